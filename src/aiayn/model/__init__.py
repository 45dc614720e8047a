"""The model (§3): what every stage trains, decodes and counts. `hparams` holds the
hyperparameters of one Transformer and their rules (plain Python: the study checks them when the
config is read), `transformer` the model itself and its incremental decoding, `beam` the batched
beam search (§6.1) and the key/value cache it reorders. No rule calls it directly and it writes
nothing; it imports nothing of aiayn but these modules.
"""
