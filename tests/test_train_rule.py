"""A small model trains on CPU through the Snakemake train rule, and a preempted job resumes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
import toy
import yaml
from conftest import ROOT

from aiayn.data import binary
from aiayn.runtime import checkpoint


def tiny_study(workdir: Path, steps: int) -> Path:
    """A one-experiment study config and its encoded data in `workdir` (upstream stages pre-made)."""
    config = {
        "archives": {"toy": {"url": "http://127.0.0.1:9/toy.tgz", "sha256": "0" * 64}},
        "datasets": {
            "toy": {
                "task": "translation",
                "src": "xx",
                "tgt": "yy",
                "train": [{"archive": "toy", "src": "train.xx", "tgt": "train.yy"}],
                "dev": "dev",
                "test": "test",
                "eval_sets": {
                    "dev": {"archive": "toy", "src": "dev.xx", "tgt": "dev.yy"},
                    "test": {"archive": "toy", "src": "test.xx", "tgt": "test.yy"},
                },
                "vocab": {"model_type": "bpe", "size": toy.VOCAB, "shared": True},
            }
        },
        "training": {**toy.SETTINGS["train"], "steps": steps, "checkpoint_interval": 50, "log_interval": 10},
        "presets": {"toy": {"model": toy.SETTINGS["model"], "average": 1}},
        "experiments": {"toy-run": {"preset": "toy", "dataset": "toy", "tables": [2]}},
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    data = workdir / "results" / "data" / "toy"
    data.mkdir(parents=True)
    for side in ("src", "tgt"):
        (data / f"spm.{side}.model").write_bytes(b"stand-in shared vocabulary")  # vocab.shared: one model
    sha = {side: hashlib.sha256((data / f"spm.{side}.model").read_bytes()).hexdigest() for side in ("src", "tgt")}
    for split, n, seed in (("train", 300, 0), ("dev", 30, 1)):
        toy.corpus(data / f"{split}.bin", n=n, seed=seed)
        corpus = binary.read(data / f"{split}.bin")
        src = (corpus.src_tokens, corpus.src_offsets)
        tgt = (corpus.tgt_tokens, corpus.tgt_offsets)
        meta = {**corpus.header["meta"], "spm_src_sha256": sha["src"], "spm_tgt_sha256": sha["tgt"]}
        binary.write(data / f"{split}.bin", src, tgt, dtype=corpus.src_tokens.dtype, meta=meta)
    return workdir


def snakemake_cmd(workdir: Path, target: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        target,
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        "--configfile",
        str(workdir / "config.yaml"),
    ]


@pytest.mark.slow
def test_a_stopped_training_job_resumes_when_run_again(tmp_path):
    """The train rule on the CPU. SIGTERM (a preemption, a user) stops the job with a checkpoint and
    exit 75; Snakemake reports it (a job outside Slurm is not requeued, nor retried) and the next
    `snakemake` resumes it to its end: its final checkpoint, log and benchmark record written."""
    steps = 1000  # the stop is sent at step 120 or so: the rest is the margin it must land within
    workdir = tiny_study(tmp_path, steps=steps)
    proc = subprocess.Popen(
        snakemake_cmd(workdir, "results/toy-run/checkpoints/last.pt"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    metrics = workdir / "results/toy-run/metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics.exists() and '"step": 120' in metrics.read_text()):
        time.sleep(0.2)
    trainer = subprocess.run(["pgrep", "-f", "aiayn train --settings results/toy-run"], capture_output=True, text=True)
    pids = [int(p) for p in trainer.stdout.split()]
    if not pids:
        proc.kill()
        pytest.fail("the training process was not found")
    for pid in pids:
        subprocess.run(["kill", "-TERM", str(pid)])
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode != 0 and "Trying to restart job" not in out, out[-3000:]
    log = (workdir / "results/logs/train/toy-run.log").read_text()
    assert "stop signal (SIGTERM): checkpoint of step" in log and "run again to resume (exit 75)" in log
    again = subprocess.run(
        snakemake_cmd(workdir, "results/toy-run/checkpoints/last.pt"), capture_output=True, text=True, timeout=900
    )
    assert again.returncode == 0, again.stderr[-3000:]
    state = checkpoint.load(workdir / "results/toy-run/checkpoints/last.pt")
    assert state["step"] == steps and state["settings"]["name"] == "toy-run"
    log = (workdir / "results/logs/train/toy-run.log").read_text()
    assert "resumed from step" in log and f"step {steps}/{steps}" in log and "done:" in log
    assert (workdir / "results/benchmarks/train/toy-run.tsv").exists()


@pytest.mark.slow
def test_a_nonfinite_loss_is_not_retried(tmp_path):
    """Exit 3 would replay the same data and dropout from the same checkpoint and fail again (at
    scale, five multi-GPU jobs in a row): the job fails once, with the trainer's message."""
    workdir = tiny_study(tmp_path, steps=200)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    config["training"]["lr_scale"] = 1e12
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run(
        snakemake_cmd(workdir, "results/toy-run/checkpoints/last.pt"), capture_output=True, text=True, timeout=600
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Trying to restart job" not in out
    log = (workdir / "results/logs/train/toy-run.log").read_text()
    assert log.count("training toy-run:") == 1 and "error: the loss is not finite at step" in log
