"""The training stage (§5): an encoded corpus and experiment.json in, checkpoints out. `trainer`
is the loop and one train job, `resume` decides whether a checkpoint continues the run,
`batching` makes the token batches, `checkpoint` reads and writes checkpoint files and a run's
folder of them, `distributed` the process group, devices and stop signals, `precision` the
arithmetic, `progress` and `metrics` what a run reports (metrics.jsonl), `hardware` FLOPs and GPU
peaks, `average` the §6.1 checkpoint averaging. Called by the train and average rules of
train.smk; writes results/<experiment>/checkpoints/, metrics.jsonl and average.pt.
"""
