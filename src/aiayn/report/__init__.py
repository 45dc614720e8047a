"""The report: what the study found, beside the paper. `tables` builds Tables 2, 3 and 4 from the
scores and metrics as pandas data frames, a line per run (the paper's own setting of every row is
`aiayn.study.paper`'s); `compact` lays them out as the paper prints them, our rows among the
paper's; `notes` says in words what they mean and writes a table's Markdown and HTML documents;
`format` is the cell, Markdown, CSV and footer writing every table shares. `table1` measures
Table 1 (§4), `figures` draws learning curves, the gradient norm, the learning rate and attention
maps (self and encoder-decoder, with the distance from the diagonal), `plan` the study's GPU hours,
disk and memory before launch, and every model's parameters (`python -m aiayn params`). Called by
the rules of report.smk, each named as its module (table1, tables, figures, plan); writes
results/tables/, results/<experiment>/figures/ and results/plan.md.
"""
