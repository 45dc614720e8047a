"""The benchmark scripts run (their figures are for benchmarks/README.md, not asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT


def test_gpu_benchmark_script_runs_on_the_cpu_in_smoke_mode(tmp_path):
    """benchmarks/gpu.py is meant for a GPU machine; --smoke runs the same code paths tiny on the CPU,
    so the script does not rot between the rare occasions a GPU is at hand."""
    out = tmp_path / "gpu.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/gpu.py"), "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    (train,), (decode,) = report["training"], report["decoding"]
    assert train["tgt_tokens_per_s"] > 0 and train["tflops"] > 0 and train["updates"] == 2
    assert 0.5 * 600 <= train["tgt_tokens_per_update"] <= 600 + 8  # about the asked-for batch size
    assert decode["sentences"] == 16 and decode["sentences_per_s"] > 0
    assert "tgt tok/s" in run.stdout and "sentences/s" in run.stdout
    # what the plan reads of it (aiayn.report.plan.measured_mfu), as on a GPU where it has an MFU
    from aiayn.report.plan import measured_mfu

    report["device"] = "NVIDIA H100 80GB HBM3"
    report["training"] = [{**train, "preset": preset, "mfu": 0.3} for preset in ("base", "big")]
    out.write_text(json.dumps(report))
    (measured,) = measured_mfu(out, "H100")
    assert (measured.precision, measured.mfu) == ("fp32", {"base": 0.3, "big": 0.3})  # auto on the CPU: fp32


def test_gpu_benchmark_refuses_plainly_without_a_gpu():
    """Without a GPU (none visible to CUDA, on a GPU machine too) the script says so in one line."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    script = [sys.executable, str(ROOT / "benchmarks/gpu.py")]
    run = subprocess.run(script, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 1 and "no GPU here" in run.stderr and "Traceback" not in run.stderr


def test_startup_benchmark_measures_the_trainers_own_batch_plan(tmp_path):
    """benchmarks/startup.py on a small corpus: its pairs, and the first update's pairs as the
    trainer's Batcher plans them at the paper's batch (25,000 tokens over 8 GPUs)."""
    import toy

    from aiayn.data import binary
    from aiayn.training.batching import Batcher, micro_batch_budget

    path = toy.corpus(tmp_path / "train.bin", n=3000, max_len=40)
    corpus = binary.read(path)
    out = tmp_path / "startup.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/startup.py"), str(path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())
    accumulation, budget = micro_batch_budget(25_000, 4096, 8)
    batcher = Batcher(corpus, budget=budget, seed=1, per_update=accumulation * 8)
    assert row["pairs"] == len(corpus) == 3000
    assert row["micro_batches_per_epoch"] == batcher.n_batches
    assert row["first_update_pairs"] == sum(len(b) for b in batcher.update(1))
    assert row["peak_rss_mib"] >= row["baseline_rss_mib"] > 0


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_every_benchmark_script_bounds_its_numbers_and_ends_bad_input_in_one_line(script):
    """Read from each script's code: no number argument without a bound (argparse's bare int or float,
    where 0 or a negative count ends in a traceback deep in the work), and its __main__ runs `main`
    under the commands' error boundary (aiayn.errors.boundary)."""
    import ast

    tree = ast.parse((ROOT / "benchmarks" / script).read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"]
    for call in calls:
        types = [ast.unparse(k.value) for k in call.keywords if k.arg == "type"]
        assert types != ["int"], f"{script}: {ast.unparse(call)}: a count with no bound (aiayn.commands.at_least)"
    main = next(n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))
    assert "boundary(" in ast.unparse(main), script


@pytest.mark.parametrize(
    "given, said",
    [
        (["--kernels", "bogus"], "argument --kernels: invalid choice: 'bogus'"),
        (["--kernels", "default", "--record", "{tmp}/rec.md"], "--record {tmp}/rec.md: not the demo's records"),
        (["--kernels", "default", "--record", "{tmp}/none.csv"], "{tmp}/none.csv: not found"),
    ],
)
def test_the_demo_kernels_benchmark_checks_its_arguments_before_its_runs(tmp_path, given, said):
    """Each run is a whole demo (about 25 minutes for three): a kernel torch has not, or records that are not
    docs/demo-runs.csv (a Markdown table, a missing file), are said in one line before the first."""
    (tmp_path / "rec.md").write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    argv = [a.format(tmp=tmp_path) for a in given]
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks/demo_kernels.py"), *argv], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 2 and said.format(tmp=tmp_path) in run.stderr.strip().splitlines()[-1], run.stderr
    assert (tmp_path / "rec.md").read_text().endswith("| 1 | 2 |\n")
