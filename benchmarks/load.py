"""The demo's training on a busy machine, with and without the thread policy of `aiayn.cli.thread_policy`.

One demo training job (base: 2 layers, width 96, 1,000-token batches), run as its rule runs it
(`python -m aiayn train`) with 2 threads (OMP_NUM_THREADS: the demo's trainings had 2 until the
demo profile gave each torch job one; with more than one thread a training has threads that wait,
which is where the policy acts), for `--updates` updates:

- quiet: nothing else running, with the policy (OMP_WAIT_POLICY=PASSIVE);
- loaded: beside `--load` CPU-bound processes (default: 2 per core, a busy laptop's load), with the
  policy, and without it (AIAYN_THREAD_POLICY=off: OpenMP's default, whose idle threads spin for
  about 300,000 iterations before they sleep). Two kinds of load (`--kinds`): `python`, plain
  busy loops; `torch`, other programs computing with torch on every core (small matrix products,
  OpenMP's default waiting: the demo's own trainings, or a test suite, beside it).

Conditions alternate, `--repeats` times each; the figure is the median wall time and the ratio to
quiet. `--whole` also times the whole demo (`snakemake --profile profiles/demo`) under the load with
the policy (close to an hour on 2 cores under the torch load). The demo's data is made first, in
a scratch folder, by the demo's own DAG.

    python benchmarks/load.py --json benchmarks/load.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = "results/demo"
INPUTS = [
    f"{DEMO}/base/experiment.json",
    f"{DEMO}/data/eng-zil/train.bin",
    f"{DEMO}/data/eng-zil/dev.bin",
    f"{DEMO}/data/eng-zil/spm.src.model",
    f"{DEMO}/data/eng-zil/spm.tgt.model",
]


def busy() -> None:
    while True:
        pass


def busy_torch() -> None:
    import torch

    a = torch.randn(128, 128)
    while True:
        a @ a


LOADS = {"python": busy, "torch": busy_torch}


def run_whole(cmd: list[str], timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run in a process group of its own, killed whole however the call ends (Ctrl-C,
    a timeout): an interrupted benchmark leaves no Snakemake job or training running."""
    with subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kwargs) as process:  # fmt: skip
        try:
            out, err = process.communicate(timeout=timeout)
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(cmd, process.returncode, out, err)


def snakemake(work: Path, *targets: str, env: dict) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/demo", "-d", str(work), *targets]
    run = run_whole(cmd, cwd=ROOT, env=env)
    if run.returncode != 0:
        sys.exit(f"the demo's DAG failed:\n{run.stdout[-2000:]}{run.stderr[-3000:]}")


def train(work: Path, updates: int, env: dict, timeout: float) -> float | None:
    """Wall seconds of `updates` updates of the demo's base training from scratch (None: over `timeout`)."""
    checkpoints = work / "bench" / "checkpoints"
    shutil.rmtree(checkpoints.parent, ignore_errors=True)
    data = f"{work}/{DEMO}/data/eng-zil"
    cmd = [sys.executable, "-m", "aiayn", "train", "--settings", f"{work}/{DEMO}/base/experiment.json",
           "--train", f"{data}/train.bin", "--dev", f"{data}/dev.bin", "--spm-src", f"{data}/spm.src.model",
           "--spm-tgt", f"{data}/spm.tgt.model", "--checkpoints", str(checkpoints),
           "--out", str(checkpoints / "last.pt"), "--max-updates", str(updates)]  # fmt: skip
    start = time.perf_counter()
    try:
        run = run_whole(cmd, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if run.returncode != 0:
        sys.exit(f"the training failed:\n{run.stdout[-2000:]}{run.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> None:
    from aiayn.commands import at_least, finite_at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=at_least(1), default=50, help="updates per timed training (default 50)")
    parser.add_argument("--load", type=at_least(0), default=2 * (os.cpu_count() or 1), help="CPU-bound processes")
    parser.add_argument("--kinds", nargs="+", choices=list(LOADS), default=list(LOADS), help="kinds of load")
    parser.add_argument("--repeats", type=at_least(1), default=2)
    parser.add_argument(
        "--timeout", type=finite_at_least(1), default=900, help="seconds before a training counts as > timeout"
    )
    parser.add_argument("--whole", action="store_true", help="also time the whole demo under the load")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.json:
        from aiayn.io import writable

        writable(args.json)  # before the trainings, not after them

    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "AIAYN_THREAD_POLICY")}
    base.pop("SNAKEMAKE_PROFILE", None)
    base.setdefault("XDG_CACHE_HOME", tempfile.gettempdir() + "/aiayn-bench-cache")
    base["PYTHONPATH"] = str(ROOT / "src")
    base["OMP_NUM_THREADS"] = "2"  # threads that wait on each other: what the policy is about
    policy, no_policy = dict(base), {**base, "AIAYN_THREAD_POLICY": "off"}
    work = Path(tempfile.mkdtemp(prefix="aiayn-load-"))
    print(f"demo data in {work} ...", flush=True)
    snakemake(work, *INPUTS, env=base)

    times: dict[str, list[float | None]] = {"quiet, policy": []}
    for kind in args.kinds:
        times[f"{kind} load, policy"], times[f"{kind} load, no policy"] = [], []
    train(work, 5, policy, args.timeout)  # warm the caches
    for _ in range(args.repeats):
        times["quiet, policy"].append(train(work, args.updates, policy, args.timeout))
        for kind in args.kinds:
            load = [multiprocessing.Process(target=LOADS[kind], daemon=True) for _ in range(args.load)]
            for p in load:
                p.start()
            time.sleep(2)  # the load running before the training starts
            try:
                for label, env in ((f"{kind} load, policy", policy), (f"{kind} load, no policy", no_policy)):
                    times[label].append(train(work, args.updates, env, args.timeout))
            finally:
                for p in load:
                    p.kill()
        for label in times:
            print(f"  {label:<24} {times[label][-1] or float('inf'):8.1f} s", flush=True)

    def median(xs):
        return statistics.median(x if x is not None else float("inf") for x in xs)

    quiet = median(times["quiet, policy"])
    rows = []
    for label, xs in times.items():
        m = median(xs)
        rows.append({"run": label, "seconds": xs, "median_s": m, "vs_quiet": m / quiet})
        shown = f"{m:8.1f} s" if m != float("inf") else f"> {args.timeout:.0f} s"
        print(f"{label:<24} {shown}   x{m / quiet:5.1f} of quiet   ({args.updates} updates, {len(xs)} runs)")
    if args.whole:
        shutil.rmtree(work / DEMO / "base" / "checkpoints", ignore_errors=True)
        load = [multiprocessing.Process(target=LOADS[args.kinds[-1]], daemon=True) for _ in range(args.load)]
        for p in load:
            p.start()
        start = time.perf_counter()
        try:
            snakemake(work, env=policy)
        finally:
            for p in load:
                p.kill()
        whole = time.perf_counter() - start
        rows.append({"run": f"whole demo after its data, {args.kinds[-1]} load, policy", "median_s": whole})
        print(f"whole demo (after its data), {args.kinds[-1]} load, policy: {whole:.0f} s")
    if args.json:
        meta = {"load_processes": args.load, "kinds": args.kinds, "updates": args.updates, "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "load")
