"""Training (§5): schedule, loss, batching, resume, DDP equivalence, signals, non-finite loss."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import toy
from conftest import ROOT, real_data

import aiayn
from aiayn.data import binary
from aiayn.data.binary import BOS, EOS, PAD
from aiayn.runtime import checkpoint, metrics
from aiayn.runtime.schedule import rate
from aiayn.training import batching
from aiayn.training.batching import Batcher, Prefetcher, collate, micro_batch_budget
from aiayn.training.distributed import Env
from aiayn.training.objective import label_smoothed_loss
from aiayn.training.progress import Watch
from aiayn.training.train import EXIT_DONE, EXIT_NONFINITE, EXIT_PREEMPTED, restore, run


# -- schedule and loss ----------------------------------------------------------------------------
@pytest.mark.parametrize("step", [1, 4000, 100000])
def test_learning_rate_schedule(step):
    want = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)  # §5.3
    assert rate(step, 512, 4000) == pytest.approx(want, rel=1e-12)
    assert rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)  # the peak, at warmup_steps


def test_scheduler_gives_each_update_its_rate(tmp_path):
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=3, warmup_steps=4))
    lrs = []
    for _ in range(3):
        lrs.append(trainer.scheduler.get_last_lr()[0])
        trainer.update()
    assert lrs == pytest.approx([rate(s, 32, 4) for s in (1, 2, 3)])


def test_label_smoothed_loss_by_hand():
    logits = torch.tensor([[[2.0, 0.5, 0.0, -1.0], [0.0, 1.0, 3.0, 0.0]]])  # (B=1, T=2, V=4)
    target = torch.tensor([[2, 0]])  # second position is padding (id 0): excluded
    eps, V = 0.1, 4
    logp = torch.log_softmax(logits[0, 0], -1)
    # the paper's code (tensor2tensor): 1 - eps on the target, eps spread over the V - 1 other classes
    want = -((1 - eps) * logp[2] + eps / (V - 1) * (logp.sum() - logp[2]))
    assert label_smoothed_loss(logits, target, eps).item() == pytest.approx(want.item(), rel=1e-6)
    assert label_smoothed_loss(logits, target, 0.0).item() == pytest.approx(-logp[2].item(), rel=1e-6)
    # any eps below 1, also above (V-1)/V = 0.75, where torch's label_smoothing (e = eps·V/(V-1)) would pass 1
    for eps in (0.5, 0.8, 0.99):
        want = -((1 - eps) * logp[2] + eps / (V - 1) * (logp.sum() - logp[2]))
        assert label_smoothed_loss(logits, target, eps).item() == pytest.approx(want.item(), rel=1e-6), eps


# -- batching -------------------------------------------------------------------------------------
def test_every_pair_once_per_epoch_and_budget_respected(tmp_path):
    data = binary.read(toy.corpus(tmp_path / "t.bin", n=500))
    batcher = Batcher(data, budget=120, seed=3, per_update=2)
    for epoch in (0, 1):
        batches = batcher.epoch(epoch)
        seen = np.sort(np.concatenate(batches))
        assert np.array_equal(seen, np.arange(500))
        for b in batches:
            assert len(b) == 1 or batcher.src_len[b].sum() <= 120 and batcher.tgt_len[b].sum() <= 120
    assert not np.array_equal(np.concatenate(batcher.epoch(0)), np.concatenate(batcher.epoch(1)))


def test_update_stream_crosses_epochs(tmp_path):
    data = binary.read(toy.corpus(tmp_path / "t.bin", n=100))
    batcher = Batcher(data, budget=100, seed=0, per_update=3)
    n = batcher.n_batches
    stream = [b for step in range(1, n + 2) for b in batcher.update(step)]  # 3 (n + 1) micro-batches
    assert all(np.array_equal(a, b) for a, b in zip(stream[:n], batcher.epoch(0)))
    assert all(np.array_equal(a, b) for a, b in zip(stream[n : 2 * n], batcher.epoch(1)))


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_tokens_per_update_whatever_the_gpu_count(world):
    accumulation, budget = micro_batch_budget(25000, 4096, world)
    assert 25000 <= accumulation * world * budget < 25000 + accumulation * world
    assert budget <= 4096


def test_the_batch_plan_does_not_depend_on_the_chunks_its_lengths_are_read_in(monkeypatch):
    """length_batches reads the sorted lengths a chunk at a time (its memory at 36M pairs): the
    cuts, a batch closing across a chunk's edge included, are those of one pass over them all."""
    rng = np.random.default_rng(3)
    src = rng.integers(2, 90, 5000)
    tgt = np.maximum(2, src + rng.integers(-10, 10, 5000))
    whole = batching.length_batches(src, tgt, 300, np.random.default_rng([1, 0]), max_padded=400)
    for chunk in (1, 7, 64, 4999):
        monkeypatch.setattr(batching, "_CHUNK", chunk)
        cut = batching.length_batches(src, tgt, 300, np.random.default_rng([1, 0]), max_padded=400)
        assert len(cut) == len(whole) and all(np.array_equal(a, b) for a, b in zip(cut, whole)), chunk


def test_padding_and_tokens_per_update_on_real_sentence_lengths():
    """benchmarks/padding.py's figures, held to the speed issue's target."""
    real_data("wmt_news_2008_2012", "en-de")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from padding import batch_stats, real_lengths

    src, tgt = real_lengths()
    small_pad, small_tokens = batch_stats(src, tgt, world=8, tokens=25000, max_tokens=4096)
    # the paper's corpus has 4.5M pairs: resample the real joint length distribution to that size
    pick = np.random.default_rng(1).integers(0, len(src), 4_500_000)
    pad, tokens = batch_stats(src[pick], tgt[pick], world=8, tokens=25000, max_tokens=4096)
    print(
        f"\nreal lengths, {len(src):,} pairs: padding {small_pad:.2%}, target tokens/update {small_tokens:,.0f}; "
        f"resampled to 4.5M pairs: padding {pad:.2%}, target tokens/update {tokens:,.0f} (paper ~25,000)"
    )
    assert pad <= 0.05  # the target of the speed issue, at the paper's scale
    assert small_pad <= 0.10
    assert 0.9 * 25000 <= tokens <= 25000 + 8 and 0.9 * 25000 <= small_tokens <= 25000 + 8


# -- training runs ----------------------------------------------------------------------------------
def test_collate_pads_and_marks_each_pair_as_written_by_hand(tmp_path):
    corpus = binary.read(toy.corpus(tmp_path / "c.bin", n=50, seed=4))
    indices = np.array([7, 3, 41, 3, 0])
    batch = collate(corpus, indices, pin=False)
    S = max(len(corpus.src(i)) for i in indices) + 1
    T = max(len(corpus.tgt(i)) for i in indices) + 1
    for row, i in enumerate(indices):
        s, t = corpus.src(i).tolist(), corpus.tgt(i).tolist()
        assert batch.src[row].tolist() == s + [EOS] + [PAD] * (S - len(s) - 1)
        assert batch.tgt_in[row].tolist() == [BOS] + t + [PAD] * (T - len(t) - 1)
        assert batch.tgt_out[row].tolist() == t + [EOS] + [PAD] * (T - len(t) - 1)
    assert batch.src_tokens == sum(len(corpus.src(i)) + 1 for i in indices)
    assert batch.tgt_tokens == sum(len(corpus.tgt(i)) + 1 for i in indices)


def test_prefetcher_serves_every_step_in_order_and_after_a_jump():
    made = []

    def make(step):
        made.append(step)
        return step * 10

    fetch = Prefetcher(make, depth=2)
    assert [fetch.get(s) for s in (1, 2, 3)] == [10, 20, 30]
    assert fetch.get(9) == 90  # a resume elsewhere: the queued steps are dropped
    fetch.close()
    assert fetch.get(4) == 40  # closed: built in the caller
    assert {1, 2, 3, 4, 9}.issubset(made)


@pytest.mark.slow
@pytest.mark.parametrize("option", [{"prefetch": 0}, {"compile": True}])
def test_prefetching_and_compiling_change_no_result(tmp_path, option):
    """Collating in the prefetch thread gives the weights of the plain loop bit for bit; torch.compile
    the same up to rounding (without dropout: compiled kernels draw their own dropout masks)."""
    plain = toy.settings(steps=6, prefetch=0)
    if "compile" in option:
        plain["model"]["P_drop"] = 0.0
    assert toy.train_in_process(tmp_path / "plain", plain) == EXIT_DONE
    assert (
        toy.train_in_process(tmp_path / "other", {**plain, "train": {**plain["train"], "prefetch": 2, **option}})
        == EXIT_DONE
    )
    plain_w, other_w = toy.final_weights(tmp_path / "plain"), toy.final_weights(tmp_path / "other")
    if "compile" in option:
        # softmax ignores a constant added to all keys, so the key biases' exact gradient is 0 and Adam
        # turns their rounding noise into full-size steps: these alone follow each kernel's rounding
        for w in (plain_w, other_w):
            for key in [k for k in w if k.endswith("W_k.bias")]:
                del w[key]
    toy.assert_same_weights(plain_w, other_w, exact="compile" not in option)


def test_training_reduces_the_loss(tmp_path):
    assert (
        toy.train_in_process(
            tmp_path, toy.settings(steps=200, warmup_steps=30, checkpoint_interval=100, log_interval=20)
        )
        == EXIT_DONE
    )
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses[-1] < 0.8 * losses[0]
    dev = [r for r in records if "dev_ppl" in r]
    assert [r["step"] for r in dev] == [100, 200] and dev[-1]["dev_ppl"] < dev[0]["dev_ppl"]
    first = records[0]
    assert first["event"] == "start" and first["params"] > 0 and first["device_name"] == "cpu"
    assert first["aiayn"] == aiayn.described()  # which code trained it (its commit, in a checkout)
    progress = [r for r in records if "loss" in r][0]
    assert {
        "lr",
        "tgt_tokens_per_s",
        "src_tokens_per_update",
        "tgt_tokens_per_update",
        "eta_s",
        "tflops",
    } <= progress.keys()


def test_resume_is_bit_identical(tmp_path):
    settings = toy.settings(steps=12, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path / "straight", settings) == EXIT_DONE
    # k = 6 updates, then the process dies (the last checkpoint is step 4), then the job reruns
    assert toy.train_in_process(tmp_path / "resumed", settings, max_updates=6) == EXIT_DONE
    assert not (tmp_path / "resumed/checkpoints/last.pt").exists()
    assert toy.train_in_process(tmp_path / "resumed", settings) == EXIT_DONE
    toy.assert_same_weights(toy.final_weights(tmp_path / "straight"), toy.final_weights(tmp_path / "resumed"))
    steps = [json.loads(line).get("step") for line in (tmp_path / "resumed/metrics.jsonl").read_text().splitlines()]
    assert steps.count(6) == 1  # the dead run's records past its checkpoint were dropped


def test_stop_flag_writes_a_checkpoint_and_resumes_exactly(tmp_path):
    settings = toy.settings(steps=12, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path / "straight", settings) == EXIT_DONE
    assert toy.train_in_process(tmp_path / "stopped", settings, max_updates=None, stop=True) == EXIT_PREEMPTED
    assert (tmp_path / "stopped/checkpoints/resume_0000001.pt").exists()  # stopped after its first update
    assert toy.train_in_process(tmp_path / "stopped", settings) == EXIT_DONE
    toy.assert_same_weights(toy.final_weights(tmp_path / "straight"), toy.final_weights(tmp_path / "stopped"))
    # the log interval open at the stop (step 1 of 2) goes on: the records are the uninterrupted run's
    same = ("step", "loss", "grad_norm", "grad_norm_max", "src_tokens_per_update", "tgt_tokens_per_update",
            "flops_per_update")  # fmt: skip
    straight, stopped = (metrics.read(tmp_path / run / "metrics.jsonl").progress for run in ("straight", "stopped"))
    assert [[r[k] for k in same] for r in stopped] == [[r[k] for k in same] for r in straight]


class StopAt:
    """A stop flag that a signal sets after update `step` (a time limit at an arbitrary moment)."""

    def __init__(self, trainer, step: int):
        self.trainer, self.step = trainer, step

    def __bool__(self) -> bool:
        return self.trainer.step == self.step


def test_a_stop_at_an_off_grid_step_is_resumed_from_but_never_averaged(tmp_path):
    from aiayn.training.average import newest_on_grid

    settings = toy.settings(steps=12, checkpoint_interval=4, keep_checkpoints=3)
    trainer = toy.make_trainer(tmp_path, settings)
    assert run(trainer, StopAt(trainer, 6)) == EXIT_PREEMPTED
    folder = tmp_path / "checkpoints"
    # the weights of the grid step 4, the whole state of 4 and of the off-grid 6 (for resuming only)
    assert sorted(p.name for p in folder.glob("*.pt")) == ["checkpoint_0000004.pt", "resume_0000004.pt",
                                                           "resume_0000006.pt"]  # fmt: skip
    assert toy.train_in_process(tmp_path, settings) == EXIT_DONE
    assert sorted(p.name for p in folder.glob("*.pt")) == [
        "checkpoint_0000004.pt",
        "checkpoint_0000008.pt",
        "checkpoint_0000012.pt",
        "last.pt",
        "resume_0000008.pt",
        "resume_0000012.pt",
    ]  # pruning kept 3 grid checkpoints of the weights and the 2 newest resume checkpoints
    assert [p.name for p in newest_on_grid(folder, 3, 4, 12)][0] == "checkpoint_0000004.pt"


def test_pairs_longer_than_max_tokens_are_said_with_their_count(tmp_path):
    messages = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=1, max_tokens=8, tokens_per_update=16), log=messages.append)
    over = int(((trainer.batcher.src_len > 8) | (trainer.batcher.tgt_len > 8)).sum())
    assert over > 0 and run(trainer, False) == EXIT_DONE
    said = f"warning: {over:,} pairs are longer than train.max_tokens (8 padded tokens a micro-batch)"
    assert any(m.startswith(said) for m in messages)


def test_corrupt_newest_checkpoint_falls_back(tmp_path):
    settings = toy.settings(steps=12, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path / "a", settings, max_updates=8) == EXIT_DONE
    newest = tmp_path / "a/checkpoints/resume_0000008.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    messages = []
    trainer = toy.make_trainer(tmp_path / "a", settings, log=messages.append)
    restore(trainer)
    assert trainer.step == 4  # the resume checkpoint before it, not the weights alone of step 8
    assert any("resume_0000008.pt: not a readable checkpoint" in m for m in messages)


def test_checkpoints_are_self_describing_and_pruned(tmp_path):
    """The weights alone of the `keep_checkpoints` newest grid steps and of the final model; the
    whole state a resume needs only in the 2 newest resume checkpoints."""
    settings = toy.settings(steps=12, checkpoint_interval=2, keep_checkpoints=3)
    assert toy.train_in_process(tmp_path, settings) == EXIT_DONE
    folder = tmp_path / "checkpoints"
    kept = sorted(p.name for p in folder.glob("checkpoint_*.pt"))
    assert kept == ["checkpoint_0000008.pt", "checkpoint_0000010.pt", "checkpoint_0000012.pt"]
    assert sorted(p.name for p in folder.glob("resume_*.pt")) == ["resume_0000010.pt", "resume_0000012.pt"]
    for name in ("last.pt", "checkpoint_0000012.pt"):
        state = checkpoint.load(folder / name)
        assert state["step"] == 12 and state["settings"]["name"] == "toy"
        assert {"vocab", "model_config", "identity"} <= state.keys() and not set(
            checkpoint.TRAINING_STATE
        ) & state.keys()
        assert checkpoint.rebuild(state).cfg.d_model == 32
    state = checkpoint.load(folder / "resume_0000012.pt")
    assert set(checkpoint.TRAINING_STATE) <= state.keys()
    toy.assert_same_weights(state["model"], checkpoint.load(folder / "last.pt")["model"])
    # the disk they take: the weights three times over, and twice with Adam's two moments besides
    weights, whole = (folder / "checkpoint_0000012.pt").stat().st_size, (folder / "resume_0000012.pt").stat().st_size
    assert 2.5 * weights < whole < 3.5 * weights


def test_nonfinite_loss_stops_naming_the_step(tmp_path):
    messages = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=10, log_interval=2), log=messages.append)
    with torch.no_grad():
        trainer.model.decoder[0].ffn.W_2.bias.fill_(float("nan"))
    assert run(trainer, False) == EXIT_NONFINITE
    assert any("not finite at step 1" in m for m in messages)
    assert not list((tmp_path / "checkpoints").glob("*.pt"))


def grad_norm(model) -> float:
    return float(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    )


def test_clip_norm_bounds_the_update_gradient(tmp_path):
    free = toy.make_trainer(tmp_path / "free", toy.settings(clip_norm=0.0))
    free.update()
    assert grad_norm(free.model) > 0.05  # what clipping is for: the raw gradient is larger
    clipped = toy.make_trainer(tmp_path / "clipped", toy.settings(clip_norm=0.05))
    clipped.update()
    assert grad_norm(clipped.model) == pytest.approx(0.05, rel=1e-4)


def test_the_gradient_norm_before_clipping_is_measured(tmp_path):
    free = toy.make_trainer(tmp_path / "free", toy.settings(clip_norm=0.0))
    norm = free.update()[-1]
    assert float(norm) == pytest.approx(grad_norm(free.model), rel=1e-5)
    clipped = toy.make_trainer(tmp_path / "clipped", toy.settings(clip_norm=0.05))
    norm = clipped.update()[-1]
    assert float(norm) == pytest.approx(grad_norm(free.model), rel=1e-5)  # the same first gradient, before clipping
    assert grad_norm(clipped.model) == pytest.approx(0.05, rel=1e-4)


def test_progress_records_and_lines_carry_the_gradient_norm(tmp_path):
    lines = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=6, log_interval=3), log=lines.append)
    assert run(trainer, False) == EXIT_DONE
    progress = metrics.read(tmp_path / "metrics.jsonl").progress
    assert [r["step"] for r in progress] == [3, 6]
    assert all(0 < r["grad_norm"] <= r["grad_norm_max"] for r in progress)
    said = [line for line in lines if line.startswith("step 3/6 ")]
    assert said and f" gnorm {progress[0]['grad_norm']:.3g} " in said[0]


def test_a_diverging_loss_is_said_once_with_its_step(tmp_path):
    lines = []
    # the toy task at 30x the paper's learning rate after 5 warmup updates: the loss jumps at once
    settings = toy.settings(steps=40, warmup_steps=5, lr_scale=30.0, log_interval=5, checkpoint_interval=10)
    assert run(toy.make_trainer(tmp_path, settings, log=lines.append), False) == EXIT_DONE  # finite: it goes on
    warned = [line for line in lines if "diverges" in line]
    assert len(warned) == 1
    recorded = metrics.read(tmp_path / "metrics.jsonl").diverging
    assert len(recorded) == 1
    event = recorded[0]
    assert warned[0].startswith(
        f"warning: training diverges at step {event['step']}: the loss climbed to {event['mean']:.4g} (running mean; "
        f"this update's {event['loss']:.4g}), "
    )
    assert 1 < event["step"] <= 5 and event["mean"] > 2 * event["lowest"] and event["mean"] > event["lowest"] + 1
    assert f"at learning rate {event['lr']:.3e}, gradient norm {event['grad_norm']:.4g}" in warned[0]
    assert event["lr"] == pytest.approx(rate(event["step"], 32, 5, 30.0))  # the rate that update trained at
    assert "warmup" in warned[0] and "lr_scale" in warned[0] and "sqrt(d_k)" in warned[0]
    assert metrics.summary(tmp_path / "metrics.jsonl")["diverging"] == event["step"]


def test_a_resumed_run_does_not_say_it_again(tmp_path):
    first, second = [], []
    settings = toy.settings(steps=40, warmup_steps=5, lr_scale=30.0, log_interval=5, checkpoint_interval=10)
    assert run(toy.make_trainer(tmp_path, settings, log=first.append), False, max_updates=20) == EXIT_DONE
    assert sum("diverges" in line for line in first) == 1
    assert run(toy.make_trainer(tmp_path, settings, log=second.append), False) == EXIT_DONE
    assert any(line.startswith("resumed from step 20") for line in second)
    assert not any("diverges" in line for line in second)
    assert len(metrics.read(tmp_path / "metrics.jsonl").diverging) == 1


def test_one_hard_batch_is_no_divergence():
    """A lucky batch far under the mean, then a hard one far over it (the demo's no-smoothing run
    at 1,000 tokens per update: 0.68 at update 120, 1.91 at 124, its mean near 2): the running mean
    does not climb, nothing is said; a climb that lasts is."""
    watch = Watch(torch.device("cpu"))
    losses = [4.0, 3.0, 2.4, 2.2, 0.68, 2.1, 2.0, 1.91, 2.0, 3.0, 1.9]
    for step, loss in enumerate(losses, 1):
        watch.observe(step, torch.tensor(loss), 1e-3, torch.tensor(1.0))
    assert watch.news() is None
    for step in range(len(losses) + 1, len(losses) + 20):
        watch.observe(step, torch.tensor(8.0), 1e-3, torch.tensor(50.0))
    news = watch.news()
    assert news is not None and news["loss"] == 8.0 and news["grad_norm"] == 50.0
    assert news["mean"] > 2 * news["lowest"] and len(losses) < news["step"] < len(losses) + 10


def test_a_run_near_zero_loss_is_not_said_to_diverge(tmp_path):
    """A task learned to a loss of 1e-4 whose batches still cost 100x that now and then: many times
    its minimum, far below a nat (aiayn.training.progress.MARGIN), no divergence."""
    rng = np.random.default_rng(0)
    src = [rng.integers(4, toy.VOCAB, size=rng.integers(2, 12)) for _ in range(200)]
    (s_arrays, t_arrays) = toy.from_sequences(src, [np.array([5, 6, 7]) for _ in src])  # one answer to learn
    binary.write(tmp_path / "train.bin", s_arrays, t_arrays, dtype=binary.token_dtype(toy.VOCAB),
                 meta={"src_vocab": toy.VOCAB, "tgt_vocab": toy.VOCAB})  # fmt: skip
    lines = []
    settings = toy.settings(steps=200, warmup_steps=20, log_interval=10, checkpoint_interval=100, eps_ls=0.0)
    trainer = toy.make_trainer(tmp_path, settings, log=lines.append)
    assert run(trainer, False) == EXIT_DONE
    losses = [r["loss"] for r in metrics.read(tmp_path / "metrics.jsonl").progress]
    assert min(losses) < 1e-3 and max(losses[len(losses) // 2 :]) > 10 * float(trainer.watch.lowest)
    assert not any("diverges" in line for line in lines)


def test_a_nonfinite_loss_is_said_with_its_learning_rate_and_gradient_norm(tmp_path):
    lines = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=10, log_interval=2), log=lines.append)
    with torch.no_grad():
        trainer.model.decoder[0].ffn.W_2.bias.fill_(float("nan"))
    assert run(trainer, False) == EXIT_NONFINITE
    warned = [line for line in lines if "diverges" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: training diverges at step 1: the loss is not finite")
    assert "gradient norm nan" in warned[0]


def test_a_corpus_written_over_under_a_training_is_named_not_read(tmp_path):
    """`cp other.bin train.bin` while a training runs writes over the file its memory maps read: the
    next batch would be another corpus's tokens (same size) or a SIGBUS (shorter). The training stops
    before reading it, naming the file."""
    path = toy.corpus(tmp_path / "train.bin", n=200, seed=0)
    other = toy.corpus(tmp_path / "other.bin", n=200, seed=5).read_bytes()
    original = path.read_bytes()
    same_size = (other + original)[: len(original)]

    def log(line: str) -> None:
        if line.startswith("step 2/"):
            with open(path, "r+b") as f:  # in place, as cp and shell redirections write
                f.write(same_size)

    trainer = toy.make_trainer(tmp_path, toy.settings(steps=6, log_interval=1, checkpoint_interval=3), log=log)
    with pytest.raises(binary.EncodedError, match=r"train.bin: written over in place while this process reads it"):
        run(trainer, False)


def test_a_corpus_cut_short_in_place_is_named_before_a_batch_is_read(tmp_path):
    corpus = binary.read(toy.corpus(tmp_path / "train.bin", n=50, seed=0))
    collate(corpus, np.arange(4), pin=False)
    os.truncate(corpus.path, 100)
    with pytest.raises(binary.EncodedError, match=r"now 100 bytes, [\d,]+ when read"):
        collate(corpus, np.arange(4), pin=False)
    replaced = tmp_path / "new.bin"  # replaced whole (renamed over, as encode writes): no harm, maps keep the old
    toy.corpus(replaced, n=50, seed=0)
    corpus = binary.read(toy.corpus(tmp_path / "b.bin", n=50, seed=0))
    os.replace(replaced, corpus.path)
    collate(corpus, np.arange(4), pin=False)


def test_tensorboard_events_beside_the_metrics(tmp_path):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    lines = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=8, log_interval=4, checkpoint_interval=4), log=lines.append)
    trainer.files.tensorboard = tmp_path / "tensorboard"
    assert run(trainer, False) == EXIT_DONE
    assert (
        f"TensorBoard: events in {tmp_path / 'tensorboard'} (tensorboard --logdir {tmp_path / 'tensorboard'})" in lines
    )
    events = accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tgt_tokens_per_s", "dev/ppl", "dev/nll"} <= tags
    records = metrics.read(tmp_path / "metrics.jsonl")
    assert [e.step for e in events.Scalars("train/grad_norm")] == [4, 8]
    assert [e.value for e in events.Scalars("train/loss")] == pytest.approx([r["loss"] for r in records.progress])
    assert [e.value for e in events.Scalars("dev/ppl")] == pytest.approx([r["dev_ppl"] for r in records.dev])


# pytest swaps its own threading.excepthook in for each test: the writer thread's traceback would be a warning
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_events_that_cannot_be_written_are_said_once_and_the_training_goes_on(tmp_path, capfd):
    """The events' folder gone under a running training (a full disk acts alike): tensorboard's
    writer thread fails; one line says so, no thread's traceback, and the training ends as usual."""
    import shutil

    pytest.importorskip("tensorboard")
    folder = tmp_path / "tensorboard"
    lines = []

    def log(line: str) -> None:
        lines.append(line)
        if line.startswith("step 2/") and folder.exists():
            shutil.rmtree(folder)

    trainer = toy.make_trainer(tmp_path, toy.settings(steps=6, log_interval=1, checkpoint_interval=3), log=log)
    trainer.files.tensorboard = folder
    assert run(trainer, False) == EXIT_DONE
    said = [line for line in lines if line.startswith("TensorBoard:")]
    assert len(said) == 2 and "could not be written" in said[1] and "metrics.jsonl keeps every figure" in said[1], said
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "Exception in thread" not in err, err
    assert trainer.files.out.is_file() and len(metrics.read(trainer.files.metrics).progress) == 6


def test_the_writer_threads_quiet_hook_comes_back_when_another_replaced_it(monkeypatch):
    """pytest (and any library) may swap its own threading.excepthook in after Board put ours: the
    next Board puts ours back over it, which stays quiet for tensorboard's writer thread alone."""
    import threading
    import types

    from aiayn.training import progress as board

    seen = []
    monkeypatch.setattr(threading, "excepthook", seen.append)
    board._quiet_writer_thread()
    monkeypatch.setattr(threading, "excepthook", seen.append)  # replaced, as pytest does for each test
    board._quiet_writer_thread()
    assert getattr(threading.excepthook, "aiayn_quiet", False)

    class _AsyncWriterThread(threading.Thread):  # tensorboard's writer thread, by its class name
        pass

    def failure(thread):
        return types.SimpleNamespace(thread=thread, exc_type=OSError, exc_value=OSError(), exc_traceback=None)

    threading.excepthook(failure(_AsyncWriterThread()))
    assert seen == []
    other = failure(threading.Thread())
    threading.excepthook(other)
    assert seen == [other]


def test_without_tensorboard_the_run_says_so_and_writes_none(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as without the package
    lines = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=4, log_interval=2), log=lines.append)
    trainer.files.tensorboard = tmp_path / "tensorboard"
    assert run(trainer, False) == EXIT_DONE
    said = [line for line in lines if line.startswith("TensorBoard:")]
    assert said == [
        f"TensorBoard: the tensorboard package is not installed, no event files in {tmp_path / 'tensorboard'} "
        '(pip install "aiayn[tensorboard]" to watch the run there)'
    ]
    assert not (tmp_path / "tensorboard").exists()


def test_loss_scaling_skips_an_overflowing_update_and_goes_on(tmp_path):
    """The fp16 path (GradScaler) on the CPU, with an overflow forced into one gradient: that update
    changes no weight and lowers the scale, the next one trains."""
    messages = []
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=4), log=messages.append)
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    hook = trainer.model.decoder[0].ffn.W_2.bias.register_hook(lambda g: torch.full_like(g, float("inf")))
    trainer.update()
    hook.remove()
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert messages == ["step 1: fp16 overflow, update skipped (loss scale now 512)"]
    trainer.update()
    assert not torch.equal(before["decoder.0.ffn.W_2.bias"], trainer.model.decoder[0].ffn.W_2.bias)
    assert trainer.scaler.get_scale() == 512.0 and trainer.first_nonfinite() is None


# -- the command, torchrun and signals ---------------------------------------------------------------
@pytest.mark.slow
def test_ddp_two_processes_equal_one_process_with_accumulation_two(tmp_path):
    # one process: micro-batches of 200 tokens, 2 per update; two processes: 1 each
    single = toy.settings(steps=6, tokens_per_update=400, max_tokens=200)
    assert single["model"]["P_drop"] > 0  # dropout masks follow the micro-batch, not the process
    run1 = subprocess.run(
        [sys.executable, *toy.train_command(tmp_path / "one", single)],
        env=toy.env_for_subprocess(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run1.returncode == 0, run1.stderr
    assert "on 1 x cpu, 2 micro-batch(es)" in run1.stdout
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(toy.free_port()),
    ]
    run2 = subprocess.run(
        [*torchrun, *toy.train_command(tmp_path / "two", single)],
        env=toy.env_for_subprocess(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run2.returncode == 0, run2.stderr[-3000:]
    assert "on 2 x cpu, 1 micro-batch(es)" in run2.stdout
    toy.assert_same_weights(toy.final_weights(tmp_path / "one"), toy.final_weights(tmp_path / "two"), exact=False)
    l1 = [
        json.loads(line)["loss"]
        for line in (tmp_path / "one/metrics.jsonl").read_text().splitlines()
        if '"loss"' in line
    ]
    l2 = [
        json.loads(line)["loss"]
        for line in (tmp_path / "two/metrics.jsonl").read_text().splitlines()
        if '"loss"' in line
    ]
    assert l1 == pytest.approx(l2, rel=1e-5)


@pytest.mark.slow
def test_sigterm_mid_run_checkpoints_and_resumes(tmp_path):
    settings = toy.settings(steps=400, checkpoint_interval=1000, log_interval=5)
    args = toy.train_command(tmp_path, settings)
    proc = subprocess.Popen(
        [sys.executable, *args], env=toy.env_for_subprocess(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.exists() and '"loss"' in metrics.read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_PREEMPTED, err
    assert "stop signal (SIGTERM): checkpoint of step" in out
    saved = list((tmp_path / "checkpoints").glob("*.pt"))  # off the grid: the state to resume from alone
    assert [p.name[:7] for p in saved] == ["resume_"] and 0 < checkpoint.load(saved[0])["step"] < 400
    again = subprocess.run(
        [sys.executable, *args], env=toy.env_for_subprocess(), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    assert "resumed from step" in again.stdout
    assert checkpoint.load(tmp_path / "checkpoints" / "last.pt")["step"] == 400


def test_bad_input_is_one_clear_line(tmp_path):
    args = toy.train_command(tmp_path, toy.settings())
    (tmp_path / "train.bin").write_bytes(b"not a corpus")
    run_ = subprocess.run(
        [sys.executable, *args], env=toy.env_for_subprocess(), capture_output=True, text=True, timeout=120
    )
    assert run_.returncode == 2
    assert run_.stderr.strip().splitlines() == [
        f"aiayn train: error: {tmp_path / 'train.bin'}: not an encoded corpus (bad magic); rerun the encode step"
    ]


def test_an_unknown_gpu_says_its_peak_is_unknown():
    from aiayn.training.progress import format_start, start_record

    rec = start_record(env=Env(), step=0, accumulation=1, budget=100, params=10, precision="bf16", hosts=["h"])

    def line(device):
        cpu = {"threads": 2, "omp_wait_policy": "PASSIVE"}
        return format_start({**rec, **cpu, "device_name": device}, name="x", total=5)

    assert line("NVIDIA L40") == (
        "training x: 10 parameters on 1 x NVIDIA L40; peak bf16 FLOP/s of this GPU unknown "
        "(aiayn.runtime.hardware.PEAKS): no MFU, 1 micro-batch(es) of <= 100 tokens per side per process, "
        "step 0 -> 5; 2 CPU thread(s) per process, OMP_WAIT_POLICY PASSIVE"
    )
    assert "unknown" not in line("NVIDIA H100 80GB HBM3")
    assert "unknown" not in line("cpu")


@pytest.mark.parametrize("shared", [True, False])
def test_counted_flops_equal_torchs_flop_counter(shared):
    """The count behind TFLOP/s and MFU (aiayn.runtime.hardware.training_flops) against torch's own counter of
    one forward and backward pass, on a model whose d_k, d_v and h*d_k differ from d_model."""
    from torch.utils.flop_counter import FlopCounterMode

    from aiayn.model.hparams import ModelConfig
    from aiayn.model.transformer import build
    from aiayn.runtime.hardware import training_flops

    cfg = ModelConfig.from_dict(
        {
            **toy.SETTINGS["model"],
            "N": 2,
            "d_model": 32,
            "d_ff": 48,
            "h": 4,
            "d_k": 6,
            "d_v": 10,
            "src_vocab": 40 if not shared else 50,
            "tgt_vocab": 50,
            "shared_vocab": shared,
        }
    )
    model = build(cfg)
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 50, (3, 5))
    with FlopCounterMode(display=False) as counter:
        label_smoothed_loss(model(src, tgt), tgt, 0.1).backward()
    assert counter.get_total_flops() == training_flops(cfg.to_dict(), [7] * 3, [5] * 3)


def test_progress_reports_the_counted_flops_of_its_updates(tmp_path):
    from aiayn.runtime.hardware import training_flops

    trainer = toy.make_trainer(tmp_path, toy.settings(steps=2, log_interval=2))
    micro = trainer.batcher.update(1)
    want = sum(
        training_flops(trainer.model_cfg.to_dict(), trainer.batcher.src_len[b], trainer.batcher.tgt_len[b])
        for b in micro
    )
    assert trainer.prepare(1)[3] == want
    assert run(trainer, False) == EXIT_DONE
    rec = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"loss"' in line][0]
    assert rec["flops_per_update"] > 0 and rec["tflops"] > 0
    summary = metrics.summary(tmp_path / "metrics.jsonl")
    assert summary["flops"] == pytest.approx(rec["flops_per_update"] * 2)
