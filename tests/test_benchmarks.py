"""The benchmark scripts run (their figures are for benchmarks/README.md, not asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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


def test_gpu_benchmark_refuses_plainly_without_a_gpu():
    """Without a GPU (none visible to CUDA, on a GPU machine too) the script says so in one line."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    script = [sys.executable, str(ROOT / "benchmarks/gpu.py")]
    run = subprocess.run(script, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 1 and "no GPU here" in run.stderr and "Traceback" not in run.stderr
