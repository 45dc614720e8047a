"""Shared runtime: what training, decoding, evaluation and the report all use at run time, below
every stage (it imports only `model/`, `errors.py` and `io.py`): the checkpoint format
(`checkpoint`), the run's own record (`metrics`), the JSON records one step writes and another
reads (`records`: scores, average.json, check.json, ...), the device (`device`), its arithmetic
and peak FLOP/s (`precision`, `hardware`), the §5.3 learning rate (`schedule`) and the line reader
every file of text goes through (`lines`)."""
