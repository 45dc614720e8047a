"""The check stage: the experiment's own trainer and decoder on a sample of its data (`run`) against the paper written
again (`reference`) by `data`, `training` and `check`'s registry; `mistakes` names a mistake only by evidence."""
