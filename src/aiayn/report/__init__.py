"""The report: what the study found, beside the paper. `tables` builds Tables 2, 3 and 4 from the
scores and metrics as pandas data frames (`notes` says what they mean in words, `format` writes
rows as Markdown and CSV; the paper's own setting of every row is `aiayn.study.paper`'s),
`table1` measures Table 1 (§4), `figures` draws learning curves, the gradient norm, the learning
rate and attention maps (self and encoder-decoder, with the distance from the diagonal),
`params` counts every model's parameters. Called by the rules of report.smk, each named as its
module (table1, tables, figures; and `python -m aiayn params`); writes results/tables/ and
results/<experiment>/figures/.
"""
