"""A run that learns no more than the target words' frequencies is said once (aiayn.training.progress.Stall):
its yardstick computed through the trainer's own loss, the rule on hand-made records, and a resumed run
that does not say it twice. (The demo-size runs (a learning rate 20x the demo's, no warmup, the demo
itself: none of its 12 trainings says one) are in tests/test_e2e.py; the toy task here learns too slowly
for a run that learns to be far from the frequencies' loss at twice its warmup.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import toy

from aiayn.data import binary
from aiayn.data.binary import EOS, PAD
from aiayn.runtime import metrics
from aiayn.training import progress as watch
from aiayn.training.objective import label_smoothed_loss
from aiayn.training.progress import STALL_EVALS, Stall, stall_warning
from aiayn.training.train import run


@pytest.mark.parametrize("eps_ls", [0.0, 0.1, 0.6])
def test_the_frequency_floor_is_the_loss_of_predicting_by_frequency(eps_ls):
    """By brute force: every target token of a made-up corpus scored by the loss itself at the
    add-one frequency prediction, averaged (0.6: above (V-1)/V, the loss's written-out branch)."""
    counts = np.array([0, 0, 30, 1, 7, 0, 2], dtype=np.float64)  # PAD, BOS never targets
    V = len(counts)
    logq = np.log((counts + 1) / (counts + 1).sum())
    targets = torch.tensor([[y for y in range(V) for _ in range(int(counts[y]))]])
    logits = torch.tensor(logq, dtype=torch.float32).expand(1, targets.size(1), V)
    brute = float(label_smoothed_loss(logits, targets, eps_ls)) / targets.size(1)
    assert watch.frequency_loss(counts, eps_ls) == pytest.approx(brute, rel=1e-5)
    assert watch.frequency_nll(counts, counts) == pytest.approx(float(-(counts / counts.sum() * logq).sum()))


def test_frequencies_count_each_sentence_end_and_sample_blocks_evenly(tmp_path, monkeypatch):
    corpus = binary.read(toy.corpus(tmp_path / "train.bin", n=50))
    counts = watch.frequencies(corpus, toy.VOCAB)
    whole = np.bincount(np.asarray(corpus.tgt_tokens), minlength=toy.VOCAB).astype(float)
    whole[EOS] += 50
    assert np.array_equal(counts, whole) and counts[PAD] == 0
    monkeypatch.setattr(watch, "SAMPLE_BLOCK", 16)
    monkeypatch.setattr(watch, "SAMPLE_TOKENS", 64)  # 4 blocks of 16 out of the corpus's
    sampled = watch.frequencies(corpus, toy.VOCAB)
    tokens = sampled.sum() - sampled[EOS]  # the toy's targets are 4 and above: EOS only as sentence ends
    assert 48 < tokens <= 64 and len(corpus.tgt_tokens) > 4 * 64  # 4 blocks, the last one may be short
    assert sampled[EOS] == pytest.approx(tokens * 50 / len(corpus.tgt_tokens))  # ends in proportion


def stall(**kw) -> Stall:
    return Stall(**{"warmup": 100, "interval": 50, "loss_floor": 5.0, "nll_floor": 4.0, **kw})


def progress(step, loss):
    return {"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 0.25}


def test_a_training_loss_at_the_frequencies_after_warmup_is_said_once():
    s = stall()
    assert s.progress(progress(150, 4.95)) is None  # not yet: warmup + max(warmup, interval) = 200
    news = s.progress(progress(200, 4.6))  # above 90 % of 5.0
    assert news == {"event": "stalling", "step": 200, "on": "training loss", "value": 4.6, "floor": 5.0,
                    "lr": 1e-3, "grad_norm": 0.25}  # fmt: skip
    assert s.progress(progress(250, 4.9)) is None  # once
    line = stall_warning(news)
    assert line.startswith("warning: training stalls at step 200: the training loss is 4.6, 92% of 5, ")
    assert "learning rate 1.000e-03, gradient norm 0.25" in line and "lr_scale" in line and "warmup_steps" in line
    assert stall().progress(progress(200, 4.4)) is None  # below 90 %: it learns
    assert stall(warmup=1).progress(progress(51, 4.9))["step"] == 51  # no warmup: a log interval after it


def test_a_dev_nll_near_the_frequencies_that_stopped_improving_is_said_once():
    devs = [(100, 3.9), (150, 3.88), (200, 3.89)]
    s = stall(devs=devs)
    assert s.dev(250, 3.9, 1e-3) is not None  # 3 evaluations after 100's, none 1 % better
    s = stall(devs=devs)
    assert s.dev(250, 3.84, 1e-3) is None  # 1.5 % better than 3.9: it still learns
    assert stall(devs=devs[1:]).dev(250, 3.9, 1e-3) is None  # 3 evaluations only
    assert stall(devs=devs).dev(250, 3.5, 1e-3) is None  # flat, but far below the floor: converged
    assert stall(devs=devs, nll_floor=None).dev(250, 3.9, 1e-3) is None  # no dev set
    assert stall(devs=[(50, 3.9)] + devs[1:]).dev(250, 3.9, 1e-3) is None  # 50 is in the warmup
    news = stall(devs=devs).dev(250, 3.9, 1e-3)
    assert news["on"] == "dev NLL" and f"not improved over {STALL_EVALS} evaluations" in stall_warning(news)
    assert math.isnan(stall().norm)  # no progress record yet: the line leaves the norm out
    assert "gradient norm" not in stall_warning(news)


def stalling_settings(**kw):
    # the toy task at a learning rate that leaves it at the frequencies (the loss flat from update 10 on)
    return toy.settings(steps=60, warmup_steps=1, lr_scale=20.0, log_interval=10, checkpoint_interval=20, **kw)


def test_a_toy_run_that_stalls_says_it_once_and_a_resumed_one_not_again(tmp_path):
    first, second = [], []
    assert run(toy.make_trainer(tmp_path, stalling_settings(), log=first.append), False, max_updates=40) == 0
    assert sum("training stalls" in line for line in first) == 1
    recorded = metrics.read(tmp_path / "metrics.jsonl").stalling
    assert len(recorded) == 1 and recorded[0]["step"] <= 40
    assert metrics.summary(tmp_path / "metrics.jsonl")["stalling"] == recorded[0]["step"]
    assert run(toy.make_trainer(tmp_path, stalling_settings(), log=second.append), False) == 0
    assert any(line.startswith("resumed from step 40") for line in second)
    assert not any("training stalls" in line for line in second)
