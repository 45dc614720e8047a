"""Shared helpers: the repository root, the paper config, and Snakemake dry-runs parsed into jobs."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Run inside a Slurm allocation (an interactive srun), a trainer the tests start would take the
# allocation for its own job and requeue it on a stop (aiayn.distributed.requeue): the tests are
# no Slurm job of theirs. Tests that need one set SLURM_JOB_ID themselves.
for _var in ("SLURM_JOB_ID", "SLURM_JOBID"):
    os.environ.pop(_var, None)
SHARED = ROOT.parent / "shared"
# Real public data some tests read (newstest sets, a WMT news slice, the NLTK treebank sample):
# ../shared/data in the project's tree, or the folder AIAYN_TEST_DATA names (README, "Tests").
TEST_DATA = Path(os.environ.get("AIAYN_TEST_DATA") or SHARED / "data")


def real_data(*parts: str) -> Path:
    """A file of the real test data, or a skip that says how to lift it."""
    path = TEST_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"{path} is absent: the real public test data is not in a clone; set AIAYN_TEST_DATA to a "
            "folder laid out as README.md, section Tests, describes (which file, from where)"
        )
    return path


@pytest.fixture(scope="session")
def paper_config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def with_treebank(config: dict, path: str = "/data/ptb3") -> dict:
    """A copy of `config` whose parsing datasets name a Penn Treebank (the default config has none)."""
    config = copy.deepcopy(config)
    for ds in config["datasets"].values():
        if ds["task"] == "parsing":
            ds["treebank"] = path
    return config


def snakemake(*args: str, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run Snakemake as a user would (from `cwd`), with a private cache and no user profile."""
    env = dict(os.environ)
    env.pop("SNAKEMAKE_PROFILE", None)
    env.setdefault("XDG_CACHE_HOME", str(Path(os.environ.get("TMPDIR", "/tmp")) / "aiayn-test-cache"))
    cmd = [sys.executable, "-m", "snakemake", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def fresh_clone(folder: Path) -> Path:
    """`folder` laid out as a fresh clone of the repository (its files by link, no results/), where
    commands run as the README types them: `snakemake --profile profiles/demo` from the root."""
    for name in ("Snakefile", "workflow", "src", "profiles", "examples", "config.yaml", "slurm"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def planned_jobs(output: str) -> list[dict]:
    """Jobs of a `snakemake -n -p` run:
    [{"rule": ..., "input": ..., "output": ..., "resources": {...}, "shell": ...}]."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:\n)", output):
        head = re.match(r"rule (\w+):\n", block)
        if not head:
            continue
        job = {"rule": head.group(1), "input": "", "output": "", "resources": {}, "shell": ""}
        for line in block.splitlines()[1:]:
            key, _, value = line.strip().partition(": ")
            if key in ("input", "output", "wildcards"):
                job[key] = value
            elif key == "resources":
                job["resources"] = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
        shell = re.search(r"Shell command: (.*)", block)
        job["shell"] = shell.group(1) if shell else ""
        jobs.append(job)
    return jobs


def job_counts(jobs: list[dict]) -> Counter:
    return Counter(j["rule"] for j in jobs)
