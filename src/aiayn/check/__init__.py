"""The check stage: the experiment's own trainer and decoder run on a sample of its data (`run`), compared
with the paper written again (`reference`) by the invariants of `data`, `training` and the measures in the
registry of `check` (the stage); `mistakes` names a known mistake only where its reproduction matches."""
