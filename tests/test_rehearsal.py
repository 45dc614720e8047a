"""The rehearsal's study (profiles/rehearsal, docs/rehearsal.md): config.yaml's study with only what
costs GPU hours changed, and every training writing more checkpoints than it keeps, so that
retention and averaging run past what each run keeps, as the page says."""

from __future__ import annotations

import pytest
from conftest import ROOT

from aiayn.runtime.checkpoint import RESUMABLE
from aiayn.study import config as cfg
from aiayn.study.grid import Study

PROFILE = ROOT / "profiles" / "rehearsal"


@pytest.fixture(scope="module")
def studies():
    rehearsed = cfg.merged([ROOT / "config.yaml", PROFILE / "study.yaml"])
    paper = cfg.merged([ROOT / "config.yaml"])
    # the study as a user with a treebank runs it: the parsing experiments' (the rehearsal's is generated)
    paper["datasets"]["wsj"]["treebank_archive"] = rehearsed["datasets"]["wsj"]["treebank_archive"]
    paper["archives"] = rehearsed["archives"]
    return Study(cfg.validate(paper)), Study(cfg.validate(rehearsed))


def test_the_rehearsal_trains_what_the_study_trains_at_its_sizes(studies):
    paper, rehearsal = studies
    assert rehearsal.trained == paper.trained
    for name in paper.trained:
        ours, theirs = rehearsal.experiment(name), paper.experiment(name)
        assert ours["model"] == theirs["model"], name  # every model at its size
        assert ours["vocab"] == theirs["vocab"], name
        assert rehearsal.averaged(name) == paper.averaged(name), name  # what its decoding averages
        changed = {k for k in theirs["train"] if ours["train"][k] != theirs["train"][k]}
        assert changed <= {"steps", "checkpoint_interval", "log_interval", "tokens_per_update", "max_tokens"}, name


def test_every_training_writes_more_checkpoints_than_it_keeps(studies):
    _, rehearsal = studies
    for name in rehearsal.trained:
        train = rehearsal.experiment(name)["train"]
        written = -(-train["steps"] // train["checkpoint_interval"])
        kept = max(rehearsal.averaged(name), RESUMABLE)
        assert written > kept, f"{name}: {written} checkpoints written, {kept} kept: retention never prunes"


def test_one_gpus_share_of_the_batch(studies):
    paper, rehearsal = studies
    for name in rehearsal.trained:
        ours, theirs = rehearsal.experiment(name)["train"], paper.experiment(name)["train"]
        assert ours["tokens_per_update"] * 8 == theirs["tokens_per_update"], name  # the paper's 8 GPUs (§5.2)
