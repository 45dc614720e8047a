"""Every `snakemake` command the README shows, as typed, checked by a dry-run of what it plans.

The commands are read from README.md itself (code spans and code blocks), so a command added to
the README without a check here fails `test_every_readme_command_has_a_check`. They run from a
scratch folder that looks like a fresh clone (links to the Snakefile, workflow/, src/, profiles/,
examples/, config.yaml), so that a local results/ folder does not change the plan.
The forms that need a finished run (the one-job rerun, --report) are run for real in test_e2e.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import N_TRAINED_AS_TYPED, ROOT, fresh_clone, job_counts, planned_jobs, snakemake, write_corpus

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # the front door and the reference pages
README = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def readme_commands() -> list[str]:
    """`snakemake ...` as README.md and docs/ type it: code spans, and code-block lines (comments cut)."""
    found = re.findall(r"`(snakemake[^`]*)`", README)
    for lang, block in re.findall(r"^```(\w*)\n(.*?)^```", README, re.S | re.M):
        if lang in ("bash", "sh", ""):
            for line in block.splitlines():  # also those in comments ("# or: snakemake ...")
                found += [c.strip() for c in re.findall(r"(?<![\w/.-])snakemake\b[^#]*", line)]
    return list(dict.fromkeys(" ".join(c.split()) for c in found))


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A folder laid out as a fresh clone: the repository's files by link, no results."""
    folder = fresh_clone(tmp_path_factory.mktemp("clone"))
    write_corpus(folder, {"train": 200, "dev": 20, "test": 20})  # the files examples/own-pair.yaml names
    return folder


PLANNED: dict[tuple, tuple[int, str]] = {}  # argv -> (exit status, output): a plan asked twice runs once


def plan(clone: Path, command: str, expect_ok: bool = True) -> tuple[Counter, list[dict], str]:
    """The dry-run of `command` as typed (plus -n -p): job counts, jobs, all output. A command that
    differs from another only by its own `-n` (given twice, the same flag) reuses that one's run."""
    args = tuple(a for a in shlex.split(command)[1:] if a != "-n")
    if (clone, args) not in PLANNED:
        run = snakemake("-n", "-p", *args, cwd=clone)  # before the args: after `--` they would be targets
        PLANNED[clone, args] = run.returncode, run.stdout + run.stderr
    returncode, out = PLANNED[clone, args]
    assert (returncode == 0) == expect_ok, f"{command}: exit {returncode}\n{out[-3000:]}"
    jobs = planned_jobs(out)
    return job_counts(jobs), jobs, out


TABLE2 = 4  # Table 2's experiments in config.yaml: base and big, EN-DE and EN-FR


def whole_study(counts: Counter, jobs, out) -> None:
    """The default config has no Penn Treebank: the WMT study without Table 4's branch (no job that
    would fail at once and stop the rest), with a notice naming the key."""
    assert counts["train"] == N_TRAINED_AS_TYPED and counts["tables"] == 2 and counts["table1"] == 1
    assert "config: experiments.parse-wsj is left out: datasets.wsj.treebank is not set" in out
    assert "prepare_treebank" not in counts and "select" not in counts and counts["vocab"] == 2


def slurm_study(counts, jobs, out) -> None:
    """From the root, `--profile slurm` finds the project's profile: 8 GPUs per training, one torchrun."""
    whole_study(counts, jobs, out)
    train = [j for j in jobs if j["rule"] == "train"]
    assert all(j["resources"].get("gpu") == "8" for j in train)
    assert all("torchrun --standalone --nnodes 1 --nproc-per-node 8 -m aiayn train" in j["shell"] for j in train)


def slurm_four_gpus(counts, jobs, out) -> None:
    whole_study(counts, jobs, out)
    train = [j for j in jobs if j["rule"] == "train"]
    assert all(j["resources"]["gpu"] == "4" and j["resources"]["slurm_partition"] == "gpu" for j in train)
    assert all("--nproc-per-node 4" in j["shell"] for j in train)


def workstation(counts, jobs, out) -> None:
    whole_study(counts, jobs, out)
    assert all(j["resources"].get("gpu") == "8" for j in jobs if j["rule"] in ("train", "translate"))


def demo(counts, jobs, out) -> None:
    # 5 translation rows (base with 3 seeds, one head with 2: 8 models) and 2 parser candidates;
    # generated archives, nothing downloaded
    assert counts["train"] == 10 and counts["generate"] == 2 and "download" not in counts
    assert counts["tables"] == 3 and counts["select"] == 1 and counts["table1"] == 1
    # on a laptop CPU the job blocks show no GPU and a few GB, not the paper study's cluster sizes
    # (a GPU and 64 GB per training job)
    assert {"train", "translate", "encode", "vocab", "average"} <= set(counts)
    asked = {(j["rule"], j["resources"].get("gpu", "0"), int(j["resources"].get("mem_mb", "0"))) for j in jobs}
    assert [a for a in asked if a[1] != "0" or a[2] > 2000] == []


def demo_export(counts, jobs, out) -> None:
    assert counts["export"] == 2 and "tables" not in counts  # base and big; no table is needed


def table1(counts, jobs, out) -> None:
    assert set(counts) == {"table1"}


def table2(counts, jobs, out) -> None:
    assert counts["tables"] == 1 and counts["score"] == TABLE2 and counts["average"] == TABLE2
    assert all("--table 2" in j["shell"] for j in jobs if j["rule"] == "tables")


def table4_refused(counts, jobs, out) -> None:
    said = " ".join(out.split())
    assert (
        "Table 4: no experiment of it runs as configured; experiments.parse-wsj is left out: datasets.wsj.treebank"
        in said
    )


def one_experiment(counts, jobs, out) -> None:
    # base-en-de is in Table 2 (newstest2014, averaged) and Table 3's base row (newstest2013)
    assert counts["train"] == 1 and counts["score"] == 2 and counts["tables"] == 2
    assert all("base-en-de" in j["output"] for j in jobs if j["rule"] in ("train", "translate", "score"))


def data(counts, jobs, out) -> None:
    assert set(counts) == {"download", "prepare", "prepare_eval", "vocab", "vocab_info", "encode", "data"}
    assert counts["prepare"] == 2 and "train" not in counts


def one_score(counts, jobs, out) -> None:
    assert counts["score"] == 1 and counts["translate"] == 1 and counts["train"] == 1 and "tables" not in counts


def one_translation(counts, jobs, out) -> None:
    """The target is the translation, not a rule name swallowed by --forcerun's list."""
    assert counts["translate"] == 1 and "score" not in counts and "tables" not in counts
    assert [j["output"] for j in jobs if j["rule"] == "translate"] == ["results/base-en-de/newstest2014.de"]


def own_pair(counts, jobs, out) -> None:
    assert counts["train"] == 2 and "download" not in counts and counts["tables"] == 1
    assert "table1" not in counts and "figures" not in counts  # Table 2 and what it needs, no more


def demo_one_translation(counts, jobs, out) -> None:
    # in a fresh clone its inputs are planned too; after the demo, the translation alone reruns
    assert counts["translate"] == 1 and "score" not in counts and "tables" not in counts


def own_pair_one(counts, jobs, out) -> None:
    assert counts["train"] == 1 and all("my-small-ls0" not in j["output"] for j in jobs)


def one_check(counts, jobs, out) -> None:
    assert counts["check"] == 1 and "train" not in counts and counts["encode"] == 1  # its training data, no training


def checks(counts, jobs, out) -> None:
    assert counts["check"] == N_TRAINED_AS_TYPED and "train" not in counts


def touch_plan(counts, jobs, out) -> None:
    """--touch plans the jobs a run would, to mark their outputs done instead of running them."""
    whole_study(counts, jobs, out)
    assert counts["check"] == N_TRAINED_AS_TYPED


def study_plan(counts, jobs, out) -> None:
    """The plan alone, for the training jobs' GPUs: 8, the paper's P100 unless the profile names others."""
    assert set(counts) == {"plan"}
    assert "--gpu-model P100 --gpus 8" in jobs[0]["shell"]


def study_plan_h100(counts, jobs, out) -> None:
    assert set(counts) == {"plan"} and "--gpu-model H100 --gpus 8" in jobs[0]["shell"]


def export(counts, jobs, out) -> None:
    assert counts["export"] == TABLE2 and "tables" not in counts


OWN_PAIR = "snakemake --cores 4 --configfile examples/own-pair.yaml --replace-workflow-config"
CHECKS = {
    "snakemake --profile profiles/demo": demo,
    "snakemake --profile profiles/demo exports": demo_export,
    "snakemake --cores 8 --profile slurm": slurm_study,
    "snakemake --cores 8 --profile slurm --set-resources train:gpu=4 train:slurm_partition=gpu": slurm_four_gpus,
    "snakemake --cores 8 --profile slurm --config 'run=[base-en-de]'": one_experiment,
    "snakemake --profile profiles/workstation": workstation,
    "snakemake --cores 8 table1": table1,
    "snakemake --profile profiles/demo table1": table1,
    "snakemake --cores 8 table2": table2,
    "snakemake --cores 8 table4": table4_refused,
    "snakemake --cores 8 data": data,
    "snakemake --cores 8 results/base-en-de/newstest2014.score.json": one_score,
    "snakemake --cores 8 results/base-en-de/newstest2014.de --forcerun translate": one_translation,
    "snakemake --cores 8 --forcerun translate -- results/base-en-de/newstest2014.de": one_translation,
    OWN_PAIR + " table2": own_pair,
    OWN_PAIR + " table2 --config 'run=[my-small]'": own_pair_one,
    "snakemake --profile profiles/demo results/demo/base/test.zil --forcerun translate": demo_one_translation,
    "snakemake --cores 8 exports": export,
    "snakemake --cores 2 results/base-en-de/check.json": one_check,
    "snakemake --cores 2 checks": checks,
    "snakemake --cores 8 --rerun-triggers mtime params input": whole_study,
    # upgrading a study begun with 0.3 (docs/troubleshooting.md), each planned here on a fresh clone;
    # on a study trained under 0.3.0 the four were run for real (no training, the checkpoints' bytes kept)
    "snakemake --cores 8 --profile slurm checks": checks,
    "snakemake --cores 8 --profile slurm --rerun-triggers mtime params software-env code": slurm_study,
    "snakemake --cores 8 --profile slurm --touch": touch_plan,
    "snakemake --cores 8 --profile slurm -n": slurm_study,
    # and with 0.4: --touch above, then the checks of this version (run for real on a demo study of 0.4)
    "snakemake --cores 8 --profile slurm checks --forcerun check": checks,
    # the plan before launch (docs/rehearsal.md)
    "snakemake --cores 8 --profile slurm plan": study_plan,
    "snakemake --cores 8 --profile slurm plan --set-resources plan:gpu_model=H100": study_plan_h100,
}
# run for real rather than planned: --report on the demo in test_e2e.py, --unlock below
NOT_PLANNED = {
    "snakemake --unlock",
    "snakemake --profile profiles/demo --report results/demo/report.html",
    "snakemake --cores 8 --report results/report.html",
}
FAILS_BY_DESIGN = {"snakemake --cores 8 table4"}


def test_every_readme_command_has_a_check():
    commands = readme_commands()
    # as typed, each must run for real too: Snakemake needs --cores (or a profile that sets it)
    no_cores = [c for c in commands if not re.search(r"--cores|--profile|--unlock", c)]
    assert not no_cores, f"README commands that fail as typed (no --cores, no profile): {no_cores}"
    unchecked = [c for c in commands if c not in CHECKS and c not in NOT_PLANNED]
    assert not unchecked, f"README commands without a dry-run check in tests/test_readme.py: {unchecked}"
    stale = [c for c in list(CHECKS) + list(NOT_PLANNED) if c not in commands]
    assert not stale, f"checks of commands the README no longer shows: {stale}"


@pytest.mark.parametrize("command", list(CHECKS))
def test_readme_command_plans_what_the_readme_says(clone, command):
    counts, jobs, out = plan(clone, command, expect_ok=command not in FAILS_BY_DESIGN)
    CHECKS[command](counts, jobs, out)
    assert "RuntimeWarning" not in out and "never awaited" not in out, out[-2000:]


def test_forcerun_before_the_target_swallows_it(clone):
    """Why the README puts the target first: `--forcerun` takes a list, so a file after it is one
    more rule name, and the whole default target is planned."""
    counts, _, _ = plan(clone, "snakemake --cores 8 --forcerun translate results/base-en-de/newstest2014.de")
    assert counts["translate"] > 1 and counts["tables"] >= 2


def test_unlock_as_typed(clone):
    run = snakemake("--unlock", cwd=clone)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_reference_pages_build_as_a_site_with_no_broken_link(tmp_path):
    """`mkdocs build --strict`: a broken link or anchor between the pages, or a page left out of
    mkdocs.yml's nav, fails (the docs extra; CI installs it)."""
    pytest.importorskip("mkdocs", reason='the site is built with the docs extra: pip install -e ".[docs]"')
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "figures" / "index.html").exists()


def test_the_readme_is_a_front_door():
    """README.md stays short (what, install, the two commands, the cluster and your own data, where
    the results are, a map of the pages) and links every reference page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert {p for p in pages if f"(docs/{p})" not in readme} == set()
