"""The report: what the study found, beside the paper. `tables` builds Tables 2, 3 and 4 from the
scores and metrics (`format` writes rows as Markdown and CSV, `paper` holds the paper's own
setting of every row), `table1` measures Table 1 (§4), `figures` draws learning curves and
attention maps, `params` counts every model's parameters. Called by the rules of report.smk, each
named as its module (table1, tables, figures; and `python -m aiayn params`); writes
results/tables/ and results/<experiment>/figures/.
"""
