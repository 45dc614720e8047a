"""The study: what config.yaml asks for, made into a plan. `config` checks the settings against
the schema and fills its defaults, `grid` (`Study`) resolves every experiment (preset ← diff) and
plans what each needs (training, averaging, which model decodes which set, the tables' specs),
`layout` names every file under results/, `resolve` writes the training job's input file, and
`launch` how a training job starts its processes. Read by the Snakefile's common.smk (the
`resolve` rule of study.smk writes experiment.json) and by the commands that take `--config`; it
writes nothing else.
"""
