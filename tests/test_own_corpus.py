"""Your own language pair, as README's "Your own data" and docs/own-data.md type it: examples/own-pair.yaml
over files on disk (plain and gzipped, no archive, no checksum), run end to end to Table 2; and
`run:` picking one experiment from the command line."""

from __future__ import annotations

import csv
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, snakemake_study, write_corpus

from aiayn.data.generate import EXAMPLE_FILES
from aiayn.io import OUTPUT_MARK

# what `aiayn example-corpus` writes in its folder: the corpus and the mark of a folder aiayn wrote
WRITTEN = sorted([OUTPUT_MARK, *(name for pair in EXAMPLE_FILES.values() for name in pair)])


def snakemake(workdir: Path, *args: str, configfiles: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    own = ("--configfile", str(ROOT / "examples/own-pair.yaml"), *configfiles, "--replace-workflow-config")
    return snakemake_study(workdir, *own, *args, timeout=1200)


@pytest.mark.slow
def test_the_documented_own_pair_runs_from_plain_files_to_table2(tmp_path):
    # as README types it: the example corpus first, written by the command, in the folder Snakemake runs in
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    made = subprocess.run([sys.executable, "-m", "aiayn", "example-corpus"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "wrote the example corpus in data/my-pair: train 3000 pairs, dev 100 pairs, test 100 pairs" in made.stdout
    data = tmp_path / "data/my-pair"
    assert sorted(p.name for p in data.iterdir()) == WRITTEN
    assert len(gzip.decompress((data / "test.xx.gz").read_bytes()).decode().splitlines()) == 100
    plan = snakemake(tmp_path, "-n", "--quiet", "rules")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "download" not in plan.stdout and "train " in plan.stdout
    only = snakemake(tmp_path, "--config", "run=[my-small]", "-n", "-p")
    assert only.returncode == 0, only.stderr[-2000:]
    assert "results/own/my-small-ls0/" not in only.stdout and "results/own/my-small/" in only.stdout
    table2 = snakemake(tmp_path, "-n", "table2")  # the README's first command plans Table 2 alone: no Table 1
    assert table2.returncode == 0 and "rule table1" not in table2.stdout + table2.stderr
    run = snakemake(tmp_path, "table2", "--config", "run=[my-small]")  # --config would take the target
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    rows = list(csv.DictReader((tmp_path / "results/own/tables/table2.csv").open()))
    assert [r["experiment"] for r in rows] == ["my-small"] and rows[0]["status"] == "done"
    # 300 updates of a small model learn some of the made-up language (4.09 on this test's machine), where
    # copying the source or translating word by word scores 0.00 (multi-bleu.perl: no matching 4-gram)
    assert float(rows[0]["bleu"]) >= 1.0 and rows[0]["lines"] == "100", rows[0]["bleu"]
    # your files are read, never moved or removed: the corpus is as the command wrote it
    assert sorted(p.name for p in data.iterdir()) == WRITTEN


def test_a_wrong_line_count_names_the_key(tmp_path):
    write_corpus(tmp_path, {"train": 300, "dev": 20, "test": 20})
    override = tmp_path / "lines.yaml"  # a second config file over the example (`--config` gives strings)
    override.write_text(
        "datasets: {my-pair: {eval_sets: {dev: {src: data/my-pair/dev.en, tgt: data/my-pair/dev.xx, lines: 30}}}}\n"
    )
    run = snakemake(tmp_path, "results/own/data/my-pair/dev.src", configfiles=(str(override),))
    assert run.returncode != 0
    log = (tmp_path / "results/own/logs/prepare_eval/my-pair.dev.log").read_text()
    assert (
        "data/my-pair/dev.en has 20 segments, dev is expected to have 30: set datasets.my-pair.eval_sets.dev.lines"
        in log
    )


@pytest.mark.parametrize("missing", ["data/my-pair/train.xx"])
def test_a_missing_file_of_your_corpus_is_named(tmp_path, missing):
    write_corpus(tmp_path, {"train": 300, "dev": 20, "test": 20})
    (tmp_path / missing).unlink()
    run = snakemake(tmp_path, "-n")
    assert run.returncode != 0 and missing in run.stdout + run.stderr
