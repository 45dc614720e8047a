"""No test leaves a process behind: conftest.py runs every `subprocess.run` of the tests in a
process group of its own and kills the whole group when the call ends, however it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import KILL_WORKER, ROOT, tiny_demo_config


def processes_in(folder: Path) -> list[str]:
    """The processes whose working directory is `folder` or below it (Snakemake's jobs run there)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone too, waiting only for its parent
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_timed_out_command_takes_its_children_along(tmp_path):
    pids = tmp_path / "pids"
    script = f"sleep 300 >/dev/null 2>&1 & echo $! > {pids}; sleep 300"
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=2)
    said = str(timed_out.value)
    assert "whole process group was killed" in said and "AIAYN_TEST_TIMEOUT_SCALE=3 (now 1)" in said, said
    assert timed_out.value.timeout == 2
    child = int(pids.read_text())
    deadline = time.time() + 10
    while not gone(child) and time.time() < deadline:
        time.sleep(0.1)
    assert gone(child), f"the background child {child} outlived its timed-out parent"


def test_timeouts_scale_as_asked(tmp_path, monkeypatch):
    """AIAYN_TEST_TIMEOUT_SCALE multiplies every timeout of the tests' processes; a bad value is
    refused, naming the variable."""
    monkeypatch.setenv("AIAYN_TEST_TIMEOUT_SCALE", "0.5")
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        subprocess.run(["sleep", "30"], timeout=4)
    assert timed_out.value.timeout == 2 and "(now 0.5)" in str(timed_out.value)
    monkeypatch.setenv("AIAYN_TEST_TIMEOUT_SCALE", "fast")
    with pytest.raises(pytest.UsageError, match="AIAYN_TEST_TIMEOUT_SCALE='fast'"):
        subprocess.run(["true"], timeout=4)


def test_a_command_that_ends_leaves_nothing_behind(tmp_path):
    pids = tmp_path / "pids"
    script = f"sleep 300 >/dev/null 2>&1 & echo $! > {pids}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=30)
    assert done.returncode == 0
    child = int(pids.read_text())
    time.sleep(0.2)
    assert gone(child)


@pytest.mark.slow
def test_a_timed_out_end_to_end_run_leaves_no_process(tmp_path):
    """The whole DAG, cut off by its timeout while a training job runs: no Snakemake, no job left."""
    config = tiny_demo_config()
    config["experiments"]["base"]["train"] = {"steps": 20000}  # still training when the timeout comes
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "-d", str(tmp_path), "--configfile",
           str(tmp_path / "study.yaml"), "--replace-workflow-config", "results/base/checkpoints/last.pt"]  # fmt: skip
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=45)
    metrics = tmp_path / "results/base/metrics.jsonl"
    assert metrics.exists(), "the training had not started when the timeout came: a longer timeout"
    left = processes_in(tmp_path)
    deadline = time.time() + 3  # SIGKILL to the group: gone at once, a moment for the kernel
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = processes_in(tmp_path)
    assert left == [], f"processes of the timed-out run still running: {left}"


def test_the_slurm_tests_kill_step_never_picks_itself(tmp_path):
    """The kill step of tests/test_slurm.py, run here against a stand-in worker (a python whose argv
    is the worker's: `python -u -m aiayn train`) in the folder it is given, a worker of another
    folder (another test's, or another CI leg's beside this one) and a decoy whose command line holds
    that text: the first worker is killed, the other, the decoy and the step itself are not, whatever
    their process ids."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(60)\n")  # waits before `-m aiayn` runs
    (tmp_path / "elsewhere").mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen([sys.executable, "-u", "-m", "aiayn", "train"], cwd=tmp_path, env=env)
    other = subprocess.Popen([sys.executable, "-u", "-m", "aiayn", "train"], cwd=tmp_path / "elsewhere", env=env)
    decoy = subprocess.Popen(["bash", "-c", "sleep 60 # python -u -m aiayn train"])
    try:
        time.sleep(1)
        kill = ["bash", "-c", KILL_WORKER, "kill-worker", os.path.realpath(tmp_path)]
        run = subprocess.run(kill, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and f"killed {worker.pid} " in run.stdout, run.stdout + run.stderr
        assert worker.wait(timeout=10) == -9 and decoy.poll() is None and other.poll() is None
        assert run.stdout.count("killed ") == 1, run.stdout
    finally:
        for proc in (worker, other, decoy):
            proc.kill()
            proc.wait()
