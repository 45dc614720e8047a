"""The check stage: the experiment's own trainer and decoder run on a sample of its data (`run`) against the paper
written again (`reference`), by the measures of `check`'s registry; `mistakes` names a mistake only by evidence."""
