"""The rehearsal's study (profiles/rehearsal, docs/rehearsal.md): config.yaml's study with only what
costs GPU hours changed, and every training writing more checkpoints than it keeps, so that
retention and averaging run past what each run keeps, as the page says."""

from __future__ import annotations

from pathlib import Path

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


def test_a_jobs_cost_record_counts_its_memory_in_mib_as_slurm_does(tmp_path, monkeypatch):
    """`AIAYN_COSTS`: the peak RSS in MiB (the unit of Slurm's --mem, which a rule's mem_mb goes to),
    checked against the kernel's own high-water mark (VmHWM, in KiB), not against the same formula."""
    import json
    import resource
    import time

    from aiayn import cli

    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("needs Linux's /proc/self/status (VmHWM)")
    costs = tmp_path / "costs.jsonl"
    monkeypatch.setenv("AIAYN_COSTS", str(costs))
    cli.record_cost("plan", ["plan"], time.time(), 0)
    (record,) = [json.loads(line) for line in costs.read_text().splitlines()]
    hwm_kib = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
    children_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert record["max_rss_mib"] == pytest.approx(max(hwm_kib, children_kib) / 1024, rel=0.005)
    assert "max_rss_mb" not in record


def test_a_costs_file_that_is_not_cost_records_is_refused_and_never_appended_to(tmp_path, monkeypatch, capsys):
    import json

    from aiayn.cli import main

    corpus, folder, new = tmp_path / "corpus.en", tmp_path / "folder", tmp_path / "new.jsonl"
    corpus.write_text("a sentence\n")
    folder.mkdir()
    for path in (corpus, folder):
        monkeypatch.setenv("AIAYN_COSTS", str(path))
        assert main(["params", "--help"]) == 2
        assert f"AIAYN_COSTS={path}: not a file of cost records" in capsys.readouterr().err
    assert corpus.read_text() == "a sentence\n"  # nothing appended
    monkeypatch.setenv("AIAYN_COSTS", str(new))
    for _ in range(2):  # a new file, then the file of cost records it became
        with pytest.raises(SystemExit):
            main(["params", "--help"])
    assert [json.loads(line)["command"] for line in new.read_text().splitlines()] == ["params", "params"]


def test_the_rehearsals_cost_rows_name_their_units(tmp_path):
    """benchmarks/rehearsal.py's cost.csv rows: peak RSS in MiB as recorded (an earlier record's
    max_rss_mb held the same MiB), bytes written in MB of 10^6 bytes (as the disk figures)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rehearsal", ROOT / "benchmarks" / "rehearsal.py")
    rehearsal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rehearsal)
    argv = ["train", "--log-to", "results/rehearsal/logs/train/base-en-de.log"]
    record = {"command": "train", "argv": argv, "exit": 0, "wall_s": 1.0, "cpu_s": 2.0, "write_bytes": 7_316_400_000}
    for unit in ("max_rss_mib", "max_rss_mb"):
        row = rehearsal.job_row({**record, unit: 5150.6})
        assert (row["job"], row["max_rss_mib"], row["written_mb"]) == ("base-en-de", 5150.6, 7316.4)


@pytest.mark.parametrize(
    "case, said",
    [
        ("--pairs wmt14-en-de", "--pairs 'wmt14-en-de': expected dataset=N,..."),
        ("--pairs wmt14-en-de=0", "--pairs: wmt14-en-de=0: each of wmt14-en-de, wmt14-en-fr at 1 pair or more"),
        ("--pairs wmt14-de-en=5", "--pairs: wmt14-de-en=5: each of"),
        (
            "--pairs wmt14-en-de=5 --run base-en-dee",
            "--run: no experiment base-en-dee in config.yaml; known: base-en-de,",
        ),
        ("progress.json cut", "progress.json: not a record of an earlier rehearsal (Unterminated string"),
        ("mirror.json empty", "mirror.json: not a record of an earlier rehearsal (Expecting value"),
        ("mirror.json lacking archives", "mirror.json: not a record of an earlier rehearsal (it lacks pairs (dict),"),
        ("a second rehearsal", "results/rehearsal is being rehearsed by the process"),
    ],
)
def test_bad_input_to_the_rehearsal_is_one_line_naming_it(case, said, tmp_path, monkeypatch, capsys):
    """benchmarks/rehearsal.py, which docs/rehearsal.md tells users to run, has the commands' error
    boundary: bad input ends it in one line naming the argument or file, before any work."""
    import fcntl
    import importlib.util
    import json
    import os
    import shutil
    import sys

    spec = importlib.util.spec_from_file_location("rehearsal", ROOT / "benchmarks" / "rehearsal.py")
    rehearsal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rehearsal)
    shutil.copy(ROOT / "config.yaml", tmp_path / "config.yaml")
    shutil.copytree(PROFILE, tmp_path / "profiles" / "rehearsal")
    out = tmp_path / "results" / "rehearsal"
    out.mkdir(parents=True)
    (out / "mirror.json").write_text(json.dumps({"pairs": {"wmt14-en-de": 5}, "archives": {}}))
    (out / "mirror.yaml").write_text("{}\n")
    argv = case.split() if case.startswith("--") else ["--pairs", "wmt14-en-de=5"]
    if case == "progress.json cut":
        (out / "progress.json").write_text('{"stages_s": {"da')
    elif case == "mirror.json empty":
        (out / "mirror.json").write_text("")
    elif case == "mirror.json lacking archives":
        (out / "mirror.json").write_text(json.dumps({"pairs": {"wmt14-en-de": 5}}))
    elif case == "a second rehearsal":
        fd = os.open(out / "rehearsal.lock", os.O_RDWR | os.O_CREAT)
        os.write(fd, b"the process 1")
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: a second rehearsal's own open is refused
    monkeypatch.setattr(rehearsal, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["rehearsal.py", *argv])
    monkeypatch.setattr(rehearsal, "snakemake", lambda *a, **k: pytest.fail("the study ran"))
    with pytest.raises(SystemExit) as ended:
        rehearsal.boundary(rehearsal.main, "rehearsal")
    err = capsys.readouterr().err.strip()
    assert ended.value.code == 2 and err.count("\n") == 0 and said in err, err
    assert err.startswith("rehearsal: error: ")
