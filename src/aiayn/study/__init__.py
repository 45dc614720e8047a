"""The study: what config.yaml asks for, made into a plan. `config` checks the settings against
the schema and fills its defaults, `grid` (`Study`) resolves every experiment (preset ← diff) and
plans what each needs (training, averaging, which model decodes which set, the tables' specs),
`layout` names every file under results/, `resolve` writes the training job's input file,
`launch` how a training job starts its processes, `paper` holds the paper's own setting of
every row (what a run must match for its delta against the paper to be printed), and `code` the
identity of the code a check measured. Read by the Snakefile's common.smk (the
`resolve` rule of study.smk writes experiment.json) and by the commands that take `--config`; it
writes nothing else.
"""
