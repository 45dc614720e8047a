"""The training stage (§5): an encoded corpus and experiment.json in, checkpoints out. `train` is the
trainer, its update loop, one train job, and whether a checkpoint continues the run; `objective` the loss,
optimizer and schedule it steps, `batching` the token batches, `distributed` the process group and stop signals,
`progress` what a run reports while it trains (progress records; the watch: gradient norm, a diverging loss, a
stalled run; TensorBoard events), `average` the §6.1 checkpoint averaging. What training shares with decoding and
the report (the checkpoint format, metrics.jsonl, the device, precision, the schedule) is aiayn.runtime. Called by
the train and average rules of training.smk (the check rule's stage, aiayn.check, runs this trainer before); writes
checkpoints/, metrics.jsonl, tensorboard/ and average.pt.
"""
