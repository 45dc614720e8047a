"""The cluster path for real: the tiny study through `--profile slurm` on a local Slurm (started by
tests/slurm/slurm-ci.sh, as .ci/run does), GPU requests, 2-task training jobs (srun + torchrun) with
a 2-minute time limit that each job meets by checkpointing, requeueing itself and resuming, and
final weights equal to a single-process run's.

Skipped where no Slurm cluster answers (`sinfo`): a user's laptop, or CI before `slurm-ci.sh up`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest
import toy
import yaml
from conftest import ROOT, tiny_demo_config

from aiayn.training import checkpoint

pytestmark = pytest.mark.slurm


def slurm_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    run = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return run.returncode == 0 and any(state in run.stdout for state in ("idle", "mix", "alloc"))


def running_train_jobs() -> dict[str, str]:
    """job id -> `scontrol show job` text of the running training jobs."""
    out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i %k"], capture_output=True, text=True).stdout
    jobs = {}
    for line in out.splitlines():
        job, _, comment = line.partition(" ")
        if "train" in comment:
            jobs[job] = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
    return jobs


def watch_train_job(workdir, experiment: str, seen: dict) -> None:
    """Record `scontrol show job` of `experiment`'s Slurm training job once it is seen running; once
    the job has stopped at its time limit and requeued itself, give it a longer limit (as an
    administrator may), so that the test ends whatever the machine's speed: the requeued job reads
    the new limit from Slurm."""
    metrics = workdir / "results" / experiment / "metrics.jsonl"
    deadline = time.time() + 1500
    while time.time() < deadline and "extended" not in seen:
        if "scontrol" not in seen:
            for job, info in running_train_jobs().items():
                if f"experiment={experiment}" in info or f"/{experiment}/" in info or f"_{experiment}" in info:
                    seen["job"], seen["scontrol"] = job, info
        if metrics.exists() and '"event": "stop"' in metrics.read_text():
            job = re.search(r"Slurm job (\d+) reaches its time limit", metrics.read_text()).group(1)
            subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=30"], check=True)
            seen["extended"] = job
        time.sleep(1)


# .ci/run sets AIAYN_REQUIRE_SLURM=1 once it has started Slurm: then a Slurm that stopped answering
# fails the test instead of skipping it (CI must not pass by accident)
REQUIRED = os.environ.get("AIAYN_REQUIRE_SLURM") == "1"


@pytest.mark.skipif(
    not REQUIRED and not slurm_up(),
    reason="no Slurm cluster answers here (CI starts one with tests/slurm/slurm-ci.sh up)",
)
def test_tiny_study_through_the_slurm_profile(tmp_path):
    assert slurm_up(), "AIAYN_REQUIRE_SLURM=1, but sinfo shows no usable node: see tests/slurm/slurm-ci.sh"
    config = tiny_demo_config()
    # ~40 s of training on 2 CPU processes: longer than the ~20 s a 2-minute job with a 90 s margin leaves
    config["experiments"]["base"]["train"] = {"steps": 2400, "checkpoint_interval": 300, "log_interval": 50}
    # micro-batches of 300 tokens, 2 per update: one per process in the 2-task jobs, 2 accumulated in
    # the single-process reference run, so both runs see the same micro-batches
    config["training"].update(tokens_per_update=600, max_tokens=300)
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        "timeout",
        "-s",
        "KILL",
        "1500",
        sys.executable,
        "-m",
        "snakemake",
        "all",
        "--cores",
        "8",
        "--profile",
        "slurm",
        "-d",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "study.yaml"),
        "--replace-workflow-config",
        "--slurm-init-seconds-before-status-checks",
        "2",
        # the CI node has 2 fake GPUs and ~20 GB: the rules' cluster-sized memory requests are lowered
        # the training jobs run as 2 Slurm tasks (srun + one torchrun agent each), one fake GPU per task
        "--set-resources",
        "train:gpu=2",
        "train:nodes=1",
        "train:tasks=2",
        "train:mpi=srun",
        "train:cpus_per_task=2",
        "train:mem_mb=3000",
        # a time limit the training cannot finish within: the job stops 90 s before its limit
        # (checkpoint, scontrol requeue, exit 75), and the requeued job resumes (with a longer limit)
        "train:runtime=2",
        "train:stop_margin_s=90",
        "translate:gpu=1",
        "translate:mem_mb=2000",
        "train_vocab:mem_mb=2000",
        "encode:mem_mb=2000",
        "average:mem_mb=2000",
    ]
    done: dict = {}
    watcher = threading.Thread(target=watch_train_job, args=(tmp_path, "base", done), daemon=True)
    watcher.start()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    watcher.join(timeout=5)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    results = tmp_path / "results"
    assert all((results / f"tables/table{n}.md").exists() for n in (2, 3, 4))
    # the GPUs were asked of Slurm itself: the job as slurmctld holds it, not Snakemake's own job summary
    # (TresPerJob=gres:gpu:2 for --gpus=2, or gres/gpu=2 in ReqTRES where accounting tracks GPUs)
    assert re.search(r"(TresPerJob|ReqTRES)=\S*gres[/:]gpu[:=]2\b", done.get("scontrol", "")), done.get("scontrol")
    output = run.stdout + run.stderr
    for experiment in ("base", "big"):
        log = (results / f"logs/train/{experiment}.log").read_text()
        assert "on 2 x cpu (2 launcher tasks)" in log  # 2 srun tasks, one torchrun agent and process each
        starts = [
            json.loads(line)
            for line in (results / experiment / "metrics.jsonl").read_text().splitlines()
            if '"event": "start"' in line
        ]
        assert all(s["world_size"] == 2 and s["agents"] == 2 for s in starts)
        # the same final model as one process with gradient accumulation 2 (dropout on, requeue or not)
        reference = single_process_run(tmp_path, output, experiment)
        final = checkpoint.load(results / experiment / "checkpoints/last.pt")
        assert final["step"] == reference["step"]
        toy.assert_same_weights(final["model"], reference["model"], exact=False)
    assert done.get("job"), "the base training job was never seen running"
    # base trains longer than one job's time (big's 24 steps fit in one)
    metrics = (results / "base/metrics.jsonl").read_text().splitlines()
    starts = [json.loads(line)["step"] for line in metrics if '"event": "start"' in line]
    assert len(starts) >= 2 and starts[0] == 0 and all(s > 0 for s in starts[1:])  # each requeue resumed
    stops = [json.loads(line) for line in metrics if '"stop"' in line]  # the stopped job's log is replaced
    assert stops and all(s["reason"].endswith("reaches its time limit in 90 s or less") for s in stops), stops
    assert done.get("extended"), "the training job never stopped at its time limit"
    assert [s["step"] for s in stops] == starts[1:]  # every stop written as a checkpoint, resumed from
    assert f"resumed from step {starts[-1]}" in (results / "logs/train/base.log").read_text()
    assert "Trying to restart job" not in output  # requeued by Slurm, never resubmitted by Snakemake
    assert checkpoint.load(results / "base/checkpoints/last.pt")["step"] == 2400


def single_process_run(workdir, output: str, experiment: str) -> dict:
    """Rerun `experiment`'s training as printed by Snakemake, as one plain process, outside Slurm."""
    found = re.search(
        rf"-m aiayn train (--settings \S*/{experiment}/experiment\.json .*?)"
        r" --checkpoints \S+ --stop-margin \S+ --out \S+",
        output,
    )
    assert found, f"no training command for {experiment} in the Snakemake output"
    ref = workdir / "reference" / experiment
    cmd = [
        sys.executable,
        "-m",
        "aiayn",
        "train",
        *found.group(1).split(),
        "--checkpoints",
        str(ref / "checkpoints"),
        "--out",
        str(ref / "last.pt"),
    ]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RANK", "WORLD_SIZE", "LOCAL_", "MASTER_"))
    }
    env["PYTHONPATH"] = str(ROOT / "src")
    run = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "on 1 x cpu, 2 micro-batch(es)" in run.stdout + run.stderr
    return checkpoint.load(ref / "last.pt")
