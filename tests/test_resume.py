"""A run is what its settings say: a resume continues only the same run (identity in the
checkpoint), loses no dev evaluation, falls back to an older checkpoint only on corruption,
cleans what killed writes left, and agrees across processes on a non-finite loss."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import toy

from aiayn.data import binary
from aiayn.errors import UserError
from aiayn.runtime import checkpoint, metrics
from aiayn.runtime.schedule import rate
from aiayn.training.distributed import Deadline
from aiayn.training.train import EXIT_DONE, EXIT_NONFINITE, EXIT_PEER_LOST, finished_work, restore, run, set_aside


def test_changed_settings_start_afresh_and_keep_the_old_run(tmp_path):
    old = toy.settings(steps=8)
    assert toy.train_in_process(tmp_path / "run", old) == EXIT_DONE
    old_weights = toy.final_weights(tmp_path / "run")
    new = toy.settings(steps=8, eps_ls=0.0, seed=7)
    messages = []
    assert run(toy.make_trainer(tmp_path / "run", new, log=messages.append), False) == EXIT_DONE
    said = [m for m in messages if "of another run" in m]
    assert len(said) == 1 and "train.eps_ls: 0.1 -> 0.0; train.seed: 1 -> 7" in said[0], messages
    assert not any("resumed" in m for m in messages)
    # the new model is the new settings' own, trained from scratch; the old run is kept whole
    assert toy.train_in_process(tmp_path / "fresh", new) == EXIT_DONE
    toy.assert_same_weights(toy.final_weights(tmp_path / "run"), toy.final_weights(tmp_path / "fresh"))
    (aside,) = (tmp_path / "run").glob("replaced-*")
    toy.assert_same_weights(checkpoint.load(aside / "checkpoints" / "last.pt")["model"], old_weights)
    assert metrics.summary(aside / "metrics.jsonl")["step"] == 8
    assert metrics.read(tmp_path / "run" / "metrics.jsonl").start[0]["step"] == 0  # one run per metrics file


def test_another_model_or_lowered_steps_start_afresh(tmp_path):
    assert toy.train_in_process(tmp_path, toy.settings(steps=8)) == EXIT_DONE
    wider = toy.settings(steps=8)
    wider["model"]["d_ff"] = 128
    messages = []
    assert run(toy.make_trainer(tmp_path, wider, log=messages.append), False) == EXIT_DONE
    assert any("model.d_ff: 64 -> 128" in m for m in messages)
    assert checkpoint.load(tmp_path / "checkpoints" / "last.pt")["model_config"]["d_ff"] == 128

    messages = []
    assert (
        run(toy.make_trainer(tmp_path, {**wider, "train": {**wider["train"], "steps": 4}}, log=messages.append), 0) == 0
    )
    assert any("train.steps: 8 -> 4, below its step" in m for m in messages)
    assert checkpoint.load(tmp_path / "checkpoints" / "last.pt")["step"] == 4
    assert len(list(tmp_path.glob("replaced-*"))) == 2


@pytest.mark.parametrize("loss", ["deleted", "cut in half"])
def test_finished_work_without_a_resume_checkpoint_is_never_trained_over(tmp_path, loss):
    """Kept checkpoints, a final model and dev records with nothing to resume from (the resume
    checkpoints deleted, or every one damaged): one line saying what is there and how to start again
    on purpose, and every file as it was; moved aside, the run starts afresh."""
    settings = toy.settings(steps=8, keep_checkpoints=2)
    assert toy.train_in_process(tmp_path, settings) == EXIT_DONE
    folder = tmp_path / "checkpoints"
    for path in folder.glob("resume_*.pt"):
        if loss == "deleted":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    before = {p.name: p.read_bytes() for p in [*folder.iterdir(), tmp_path / "metrics.jsonl"]}
    with pytest.raises(UserError, match=r"no checkpoint to resume from .* yet this run's work is here \(kept "
                       r"checkpoints of steps 4 to 8, the final model .*last.pt, 2 dev records in .*; training "
                       r"from step 0 would rewrite it.*move .*checkpoints and .*metrics.jsonl aside"):  # fmt: skip
        run(toy.make_trainer(tmp_path, settings), False)
    assert {p.name: p.read_bytes() for p in [*folder.iterdir(), tmp_path / "metrics.jsonl"]} == before
    folder.rename(tmp_path / "old-checkpoints")
    (tmp_path / "metrics.jsonl").rename(tmp_path / "old-metrics.jsonl")
    assert run(toy.make_trainer(tmp_path, settings), False) == EXIT_DONE


def test_a_metrics_file_of_another_run_is_refused_before_a_record_is_cut(tmp_path):
    """Runs never share a metrics file: a run started, or resumed, with another run's metrics.jsonl
    (its start records carry that run's identity) stops with one line naming what differs; the
    other run's records stay whole (a resume would have cut them to its own step)."""
    assert toy.train_in_process(tmp_path / "a", toy.settings(steps=8)) == EXIT_DONE
    theirs = tmp_path / "a/metrics.jsonl"
    before = theirs.read_bytes()
    assert toy.train_in_process(tmp_path / "b", toy.settings(steps=8, seed=2), max_updates=4) == 0
    for folder in ("b", "c"):  # resumed from its own checkpoint, and started afresh
        trainer = toy.make_trainer(tmp_path / folder, toy.settings(steps=8, seed=2))
        trainer.files.metrics = theirs
        with pytest.raises(UserError, match=r"a/metrics.jsonl: the records of another run \(train.seed: 1 -> 2\): "
                           "runs never share a metrics file; give this run its own --metrics"):  # fmt: skip
            run(trainer, False)
        assert theirs.read_bytes() == before
    assert run(toy.make_trainer(tmp_path / "a", toy.settings(steps=12)), False) == EXIT_DONE  # its own: goes on


def test_raising_steps_or_changing_what_does_not_shape_the_weights_continues(tmp_path):
    assert toy.train_in_process(tmp_path / "straight", toy.settings(steps=12)) == EXIT_DONE
    assert toy.train_in_process(tmp_path / "raised", toy.settings(steps=8)) == EXIT_DONE
    messages = []
    longer = toy.settings(steps=12, log_interval=3, keep_checkpoints=2, prefetch=0)
    assert run(toy.make_trainer(tmp_path / "raised", longer, log=messages.append), False) == EXIT_DONE
    assert "resumed from step 8" in messages and not list((tmp_path / "raised").glob("replaced-*"))
    toy.assert_same_weights(toy.final_weights(tmp_path / "straight"), toy.final_weights(tmp_path / "raised"))


def test_other_training_data_is_another_run(tmp_path):
    assert toy.train_in_process(tmp_path, toy.settings(steps=4)) == EXIT_DONE
    toy.corpus(tmp_path / "train.bin", n=200, seed=5)
    messages = []
    assert run(toy.make_trainer(tmp_path, toy.settings(steps=4), log=messages.append), False) == EXIT_DONE
    assert any("training_data: other encoded training data" in m for m in messages)


def test_a_dev_set_of_other_vocabularies_is_refused(tmp_path):
    from aiayn.training.train import check_vocabularies

    def corpus(name, src_sha, tgt_sha=None):
        src, tgt = toy.from_sequences([[5, 6]], [[6, 5]])
        meta = {"src_vocab": 24, "tgt_vocab": 24, "spm_src_sha256": src_sha, "spm_tgt_sha256": tgt_sha or src_sha}
        binary.write(tmp_path / name, src, tgt, dtype="<u2", meta=meta)
        return binary.read(tmp_path / name)

    check_vocabularies(corpus("train.bin", "aa"), corpus("dev.bin", "aa"), {})
    with pytest.raises(UserError, match="dev-other.bin was encoded with another source vocabulary than"):
        check_vocabularies(corpus("train.bin", "aa"), corpus("dev-other.bin", "bb"), {})
    with pytest.raises(UserError, match="dev-tgt.bin was encoded with another target vocabulary than"):
        check_vocabularies(corpus("train.bin", "aa"), corpus("dev-tgt.bin", "aa", "bb"), {})


class KilledAt(Exception):
    pass


def test_a_checkpoint_whose_dev_pass_was_killed_is_evaluated_on_resume(tmp_path, monkeypatch):
    settings = toy.settings(steps=8, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path / "straight", settings) == EXIT_DONE
    killed = toy.make_trainer(tmp_path / "killed", settings)
    evaluate = killed.evaluate

    def dies_at_the_final_checkpoint():
        if killed.step == 8:
            raise KilledAt("kill -9 between the final checkpoint and its dev pass")
        return evaluate()

    killed.evaluate = dies_at_the_final_checkpoint
    with pytest.raises(KilledAt):
        run(killed, False)
    assert (tmp_path / "killed/checkpoints/checkpoint_0000008.pt").exists()
    assert (
        metrics.summary(tmp_path / "killed/metrics.jsonl")["dev_ppl"]
        != metrics.summary(tmp_path / "straight/metrics.jsonl")["dev_ppl"]
    )  # what Table 3 would have shown: step 4's perplexity
    messages = []
    assert run(toy.make_trainer(tmp_path / "killed", settings, log=messages.append), False) == EXIT_DONE
    assert any(m.startswith("step 8 dev nll") and m.endswith("(evaluated on resume)") for m in messages)
    ours, straight = (metrics.read(tmp_path / d / "metrics.jsonl").dev for d in ("killed", "straight"))
    assert [(r["step"], r["dev_ppl"]) for r in ours] == [(r["step"], r["dev_ppl"]) for r in straight]
    toy.assert_same_weights(toy.final_weights(tmp_path / "straight"), toy.final_weights(tmp_path / "killed"))


@pytest.mark.parametrize("updates", [2, 6])  # killed before its first checkpoint (a start again), after (a resume)
def test_a_torn_metrics_line_is_cut_when_the_run_goes_on(tmp_path, updates):
    """A crash leaves at worst a torn last line in metrics.jsonl; the run's next job, starting again
    or resuming, cuts it before it appends: every line of the file is a record."""
    settings = toy.settings(steps=8, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path, settings, max_updates=updates) == EXIT_DONE
    path = tmp_path / "metrics.jsonl"
    path.write_text(path.read_text() + '{"step": 7, "lo')
    assert toy.train_in_process(tmp_path, settings) == EXIT_DONE
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()][-1] == 8


def test_a_resume_whose_metrics_were_removed_says_its_records_start_there(tmp_path):
    """A run resumed with its metrics.jsonl gone (removed, emptied) trains on and says that its records start
    at the resumed step; a resume with its records there says nothing of it."""
    settings = toy.settings(steps=8, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path, settings, max_updates=6) == EXIT_DONE
    (tmp_path / "metrics.jsonl").unlink()
    said = []
    assert run(toy.make_trainer(tmp_path, settings, log=said.append), False) == EXIT_DONE
    assert [m for m in said if "holds no record of this run's first 4 updates" in m], said
    said.clear()
    assert run(toy.make_trainer(tmp_path, toy.settings(steps=12, checkpoint_interval=4), log=said.append), False) == 0
    assert not [m for m in said if "holds no record" in m], said


def test_a_run_stopped_by_max_updates_says_what_it_resumes_from(tmp_path):
    """--max-updates ends a run between checkpoints: the updates since the newest are not kept, which it says."""
    settings, said = toy.settings(steps=8, checkpoint_interval=4), []
    assert run(toy.make_trainer(tmp_path, settings, log=said.append), False, max_updates=2) == EXIT_DONE
    assert said[-1] == "stopped at step 2 (--max-updates); a run again resumes from step 0: no checkpoint yet"
    assert run(toy.make_trainer(tmp_path, settings, log=said.append), False, max_updates=4) == EXIT_DONE
    assert said[-1] == "stopped at step 4 (--max-updates); a run again resumes from step 4, its newest checkpoint"


def test_killed_checkpoint_writes_are_cleaned_at_the_next_start(tmp_path):
    settings = toy.settings(steps=4)
    folder = tmp_path / "checkpoints"
    folder.mkdir(parents=True)
    ours = folder / ".checkpoint_0000004.pt.othernode-77.k2j4.tmp"  # a kill on another node, GBs at scale
    older = folder / ".checkpoint_0000002.pt.x1y2z3.tmp"  # named as before the owner was in the name
    for p in (ours, older):
        p.write_bytes(b"\0" * 1000)
    messages = []
    assert run(toy.make_trainer(tmp_path, settings, log=messages.append), False) == EXIT_DONE
    assert not ours.exists() and not older.exists()
    assert sum("left by an interrupted write" in m for m in messages) == 2


def test_only_a_corrupt_checkpoint_is_fallen_back_from(tmp_path, monkeypatch):
    settings = toy.settings(steps=8, checkpoint_interval=4)
    assert toy.train_in_process(tmp_path, settings, max_updates=8) == EXIT_DONE
    real_load = torch.load

    def eio(path, *a, **k):
        if str(path).endswith("resume_0000008.pt"):
            raise OSError(errno.EIO, "Input/output error")
        return real_load(path, *a, **k)

    monkeypatch.setattr(torch, "load", eio)
    with pytest.raises(checkpoint.CheckpointReadError, match="resume_0000008.pt: reading failed"):
        restore(toy.make_trainer(tmp_path, settings))

    # an I/O error that torch wraps into its own: found by reading the file plainly
    monkeypatch.setattr(torch, "load", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("failed reading")))
    monkeypatch.setattr(checkpoint, "_probe", lambda p: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(checkpoint.CheckpointReadError):
        restore(toy.make_trainer(tmp_path, settings))


def test_fp16_skipped_updates_do_not_advance_the_schedule(tmp_path):
    trainer = toy.make_trainer(tmp_path, toy.settings(steps=4))
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    hook = trainer.model.decoder[0].ffn.W_2.bias.register_hook(lambda g: torch.full_like(g, float("inf")))
    trainer.update()
    hook.remove()
    assert trainer.step == 1 and trainer.scheduler.last_epoch == 0  # skipped: the schedule did not move
    d_model, warmup = trainer.model_cfg.d_model, trainer.tr["warmup_steps"]
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(rate(1, d_model, warmup))
    trainer.update()  # the first applied update ran at the rate of update 1
    assert trainer.scheduler.last_epoch == 1
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(rate(2, d_model, warmup))


NAN_ON_RANK_1 = textwrap.dedent(
    """
    import os, sys
    import aiayn.training.train as train
    real = train.label_smoothed_loss
    def loss(logits, target, eps):
        out = real(logits, target, eps)
        if os.environ["RANK"] == "1" and int(os.environ["AIAYN_TEST_CALLS"]) == 3:
            out = out * float("inf")
        os.environ["AIAYN_TEST_CALLS"] = str(int(os.environ["AIAYN_TEST_CALLS"]) + 1)
        return out
    train.label_smoothed_loss = loss
    from aiayn.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.slow
def test_a_nonfinite_loss_on_one_rank_stops_every_rank(tmp_path):
    """Rank 1's loss alone is infinite at update 4: both ranks stop there with exit 3, instead of rank 0
    training on into an all-reduce that rank 1 never joins (a hang until the NCCL/gloo timeout)."""
    settings = toy.settings(steps=40, tokens_per_update=400, max_tokens=200, log_interval=1)
    args = toy.train_command(tmp_path, settings)
    script = tmp_path / "nan_on_rank_1.py"
    script.write_text(NAN_ON_RANK_1)
    # each rank's own exit status, not torchrun's report: its agent ends the other worker (SIGTERM) once
    # one has exited, and on a loaded machine that came before rank 0's own exit 3 even when it looked
    # only every 5 s (CI, 2026-12-03)
    codes, out = toy.two_ranks(script, args[2:], tmp_path, {**toy.env_for_subprocess(), "AIAYN_TEST_CALLS": "0"})
    assert "the loss is not finite at step 4" in out, out[-3000:]
    assert codes == [EXIT_NONFINITE, EXIT_NONFINITE], out[-3000:]  # both ranks
    assert not list((tmp_path / "checkpoints").glob("*.pt"))


KILL_RANK_1 = textwrap.dedent(
    """
    import os, signal, sys
    import aiayn.training.train as train
    real = train.Trainer.update
    def update(self):
        if os.environ["RANK"] == "1" and self.step == int(os.environ["AIAYN_TEST_KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer or a lost node would
        return real(self)
    train.Trainer.update = update
    from aiayn.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.slow
def test_a_rank_killed_mid_run_ends_the_job_and_a_rerun_resumes(tmp_path):
    """Rank 1 is killed (SIGKILL) after the checkpoint of step 10: rank 0 does not wait in a collective
    for a peer that is gone; it stops with exit 4 and one line saying so, and which checkpoint is kept.
    Run again, the training resumes from that checkpoint to the weights of a run never killed."""
    settings = toy.settings(steps=30, tokens_per_update=400, max_tokens=200, checkpoint_interval=10, log_interval=5)
    args = toy.train_command(tmp_path / "run", settings)
    script = tmp_path / "kill_rank_1.py"
    script.write_text(KILL_RANK_1)
    # each rank's own exit status (torchrun's agent would end rank 0 with SIGTERM once it saw rank 1
    # gone, on a loaded machine before rank 0's own exit: see toy.two_ranks)
    (tmp_path / "logs").mkdir()
    env = {**toy.env_for_subprocess(), "AIAYN_TEST_KILL_AT": "13"}
    codes, said = toy.two_ranks(script, args[2:], tmp_path / "logs", env)
    # rank 0 ends by itself at once (exit 4), not in a collective until a timeout; rank 1 was killed
    assert codes == [EXIT_PEER_LOST, -9], said[-3000:]
    (line,) = [x for x in said.splitlines() if x.startswith("error: rank 0 on ")]
    # gloo's own words, first sentence only: "Connection closed by peer [127.0.0.1]:N", or "Read error
    # [127.0.0.1]:N: Connection reset by peer", by which end of the socket saw it first
    assert re.search(r"another process of this training job was lost \([^()]*Connection (closed|reset) by peer", line)
    assert "GLHF" not in line, line
    assert "stopping at step 13; the newest checkpoint (step 10) is kept: run again to resume (exit 4)" in line
    assert "aiayn/training/" not in said  # no traceback through the trainer
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2"]
    torchrun += ["--master-addr", "127.0.0.1", "--master-port", str(toy.free_port())]
    env = {**toy.env_for_subprocess(), "AIAYN_TEST_KILL_AT": "-1"}  # the rerun, through torchrun as a user would
    again = subprocess.run([*torchrun, str(script), *args[2:]], env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0 and "resumed from step 10" in again.stdout, again.stderr[-3000:]
    straight = subprocess.run(
        [sys.executable, *toy.train_command(tmp_path / "straight", settings)],
        env=toy.env_for_subprocess(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert straight.returncode == 0, straight.stderr[-3000:]
    toy.assert_same_weights(toy.final_weights(tmp_path / "run"), toy.final_weights(tmp_path / "straight"), exact=False)


def test_only_a_collective_that_lost_its_peer_is_taken_for_a_lost_peer():
    from aiayn.training.distributed import Env, peer_failure

    two = Env(rank=0, world_size=2)
    gloo = RuntimeError(
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.2]:35542. "
        "This is typically caused by a remote worker crashing. GLHF!"
    )
    assert peer_failure(gloo, two) == "Connection closed by peer [10.0.0.2]:35542"
    nccl = torch.distributed.DistBackendError("NCCL communicator was aborted on rank 0.\nmore")
    assert peer_failure(nccl, two) == "NCCL communicator was aborted on rank 0"
    assert peer_failure(gloo, Env()) is None  # one process has no peer
    for bug in (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), ValueError("gloo timed out")):
        assert peer_failure(bug, two) is None  # a bug keeps its traceback


FAKE_SQUEUE = """#!/bin/sh
# squeue -h -j JOB -o %e: the job ends {ahead} seconds after this call
date -d "+{ahead} seconds" +%Y-%m-%dT%H:%M:%S
"""
FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> {record}
"""


@pytest.mark.slow
def test_a_slurm_job_checkpoints_before_its_time_limit_and_requeues_itself(tmp_path):
    """In a Slurm job the trainer reads the job's end (squeue) and stops --stop-margin seconds before
    it: checkpoint, `scontrol requeue <job>`, exit 75; the requeued job resumes to the same weights."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "squeue").write_text(FAKE_SQUEUE.format(ahead=100 + 2))
    (bin_ / "scontrol").write_text(FAKE_SCONTROL.format(record=tmp_path / "scontrol.calls"))
    for tool in ("squeue", "scontrol"):
        (bin_ / tool).chmod(0o755)
    settings = toy.settings(steps=1500, checkpoint_interval=500, log_interval=100)
    args = toy.train_command(tmp_path / "run", settings)
    env = {**toy.env_for_subprocess(), "PATH": f"{bin_}:{os.environ['PATH']}", "SLURM_JOB_ID": "4242"}
    first = subprocess.run(
        [sys.executable, *args, "--stop-margin", "100"], env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 75, first.stdout + first.stderr
    assert "Slurm job 4242 reaches its time limit in 100 s or less: checkpoint of step" in first.stdout
    assert "Slurm job 4242 requeued, it resumes when it runs again (exit 75)" in first.stdout
    assert (tmp_path / "scontrol.calls").read_text() == "requeue 4242\n"
    (stopped,) = checkpoint.list_resumable(tmp_path / "run" / "checkpoints")
    assert 0 < stopped[0] < 1500
    (stop,) = metrics.read(tmp_path / "run" / "metrics.jsonl").stop  # kept where a requeue replaces the log
    assert stop["step"] == stopped[0] and stop["reason"] == "Slurm job 4242 reaches its time limit in 100 s or less"
    (bin_ / "squeue").write_text(FAKE_SQUEUE.format(ahead=3600))  # the requeued job, time enough
    again = subprocess.run(
        [sys.executable, *args, "--stop-margin", "100"], env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0 and f"resumed from step {stopped[0]}" in again.stdout, again.stderr
    straight = subprocess.run(
        [sys.executable, *toy.train_command(tmp_path / "straight", settings)],
        env=toy.env_for_subprocess(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert straight.returncode == 0, straight.stderr
    toy.assert_same_weights(toy.final_weights(tmp_path / "run"), toy.final_weights(tmp_path / "straight"))


def test_the_deadline_follows_a_changed_time_limit():
    now = [1000.0]
    ends = iter([1500.0, 5000.0])
    deadline = Deadline("7", 300, refresh_s=600, clock=lambda: now[0], query=lambda job: next(ends))
    assert not deadline.due()  # 500 s left
    now[0] = 1210.0
    assert deadline.due()  # 290 s left
    now[0] = 1600.0  # read again after 600 s: an administrator extended the limit
    assert not deadline.due() and deadline.end == 5000.0


def test_records_past_the_first_checkpoint_are_finished_work(tmp_path):
    """A run that evaluates no dev set and keeps no step checkpoint still leaves records of updates
    past its first checkpoint's step: a checkpoint was written, so with none to resume from, training
    refuses to start over; records before that step (a run killed before its first checkpoint) do not."""
    from aiayn.training.train import RunFiles

    files = RunFiles(tmp_path / "checkpoints", tmp_path / "last.pt", tmp_path / "metrics.jsonl")
    files.checkpoints.mkdir()
    line = {"loss": 3.0, "lr": 1e-3, "tgt_tokens_per_update": 10, "flops_per_update": 1.0, "tgt_tokens_per_s": 5.0}
    for step in (2, 4, 6):
        with open(files.metrics, "a") as f:
            f.write(json.dumps({"step": step, **line, "wall": float(step)}) + "\n")
        said = finished_work(files, interval=6)
        assert said == ("" if step < 6 else f"records of updates to step 6 in {files.metrics}"), said


def test_a_run_set_aside_takes_its_final_model_and_tensorboard_with_it(tmp_path):
    """Settings changed: the old run's final model, kept outside its folder of checkpoints, and its
    TensorBoard events are set aside with the folder and the metrics, not left for the new run to
    write over or to show beside its own curves."""
    folder, out, metrics_path = tmp_path / "checkpoints", tmp_path / "model.pt", tmp_path / "metrics.jsonl"
    folder.mkdir()
    (folder / "checkpoint_0000004.pt").write_bytes(b"old step")
    out.write_bytes(b"old model")
    metrics_path.write_text("")
    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "tensorboard" / "events.out.tfevents.1").write_bytes(b"old curves")
    aside = set_aside(folder, "20261206-120000", metrics_path, out, tmp_path / "tensorboard")
    assert (aside / "model.pt").read_bytes() == b"old model" and not out.exists()
    assert (aside / "tensorboard" / "events.out.tfevents.1").exists() and not (tmp_path / "tensorboard").exists()
    assert (aside / "checkpoints" / "checkpoint_0000004.pt").exists() and folder.is_dir()


def test_a_finished_run_run_again_writes_its_last_step_checkpoint_again(tmp_path):
    """The last step checkpoint of a finished run, deleted (a damaged one, as average says): training
    run again writes it again from the run's last resume checkpoint, the same weights."""
    settings = toy.settings(steps=8, checkpoint_interval=4, keep_checkpoints=2)
    assert toy.train_in_process(tmp_path, settings) == 0
    last = tmp_path / "checkpoints" / "checkpoint_0000008.pt"
    before = checkpoint.load(last)["model"]
    last.unlink()
    assert toy.train_in_process(tmp_path, settings) == 0
    toy.assert_same_weights(before, checkpoint.load(last)["model"])
