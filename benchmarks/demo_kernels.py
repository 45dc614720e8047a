"""The demo's figures across torch's CPU kernels: how far another CPU's arithmetic can move them.

torch picks its CPU kernels by what the CPU can do (`ATEN_CPU_CAPABILITY`: `default`, `avx2`,
`avx512` on x86-64); forcing each on one machine stands in for other CPUs. Each run is the demo as
typed (`snakemake --profile profiles/demo`, from a fresh copy of the repository's files), one
after the other; `--cores` adds runs at other numbers of cores. Prints each figure by run, and its
range over them; `--record` appends each run, its machine, Python and torch beside its figures, to
docs/demo-runs.csv, the records docs/figures.md's ranges must hold (tests/test_e2e.py).

    python benchmarks/demo_kernels.py --record docs/demo-runs.csv   # about 25 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import run_whole  # noqa: E402 (a process group killed whole when the run ends)


def figures(tables: Path) -> dict[str, float | str]:
    """The demo's figures docs/figures.md states, from one run's tables."""

    def rows(n):  # by experiment (baselines by row), without the lines of each seed
        lines = csv.DictReader((tables / f"table{n}.csv").open())
        return {r["experiment"] or r["row"]: r for r in lines if not r.get("replicate_of")}

    t2, t3, t4 = rows(2), rows(3), rows(4)
    return {
        "Table 2: base BLEU (mean of 3 seeds)": float(t2["base"]["bleu"]),
        "Table 2: base BLEU, s_sel over its seeds": float(t2["base"]["bleu_s_sel"]),
        "Table 2: base sacreBLEU": float(t2["base"]["sacrebleu"]),
        "Table 2: big BLEU": float(t2["big"]["bleu"]),
        "Table 2: baseline, copy the source": float(t2["baseline: copy the source"]["bleu"]),
        "Table 2: baseline, word by word": float(t2["baseline: word by word"]["bleu"]),
        "Table 3 dev BLEU: base (mean of 3 seeds)": float(t3["base"]["dev_bleu"]),
        "Table 3 dev BLEU: base, s_sel over its seeds": float(t3["base"]["dev_bleu_s_sel"]),
        "Table 3 dev BLEU: one head (mean of 2 seeds)": float(t3["t3-A-h1"]["dev_bleu"]),
        "Table 3 dev BLEU: one head, s_sel over its seeds": float(t3["t3-A-h1"]["dev_bleu_s_sel"]),
        "Table 3 dev BLEU: no label smoothing": float(t3["t3-D-ls0.0"]["dev_bleu"]),
        "Table 3 dev BLEU: fairseq's initialisation": float(t3["t3-init-fairseq"]["dev_bleu"]),
        "Table 3 dev BLEU: big": float(t3["big"]["dev_bleu"]),
        "Table 4: parser F1": float(t4["parse"]["f1"]),
        "Table 4: the parser's candidate selected on the dev set": ", ".join(
            f"{k} {v}" for k, v in re.findall(r"(P_drop|lr_scale)[ =:]+([\d.]+)", t4["parse"]["selected_on_dev"])
        ),
        "Table 4: baseline, right-branching": float(t4["baseline: right-branching"]["f1"]),
    }


def cpu_model() -> str:
    """The CPU's maker, family and model as Linux names them ("AuthenticAMD family 25 model 1")."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    found = [re.search(rf"^{key}\s*:\s*(\S+)", text, re.M) for key in ("vendor_id", "cpu family", "model")]
    return "{} family {} model {}".format(*(f[1] for f in found)) if all(found) else ""


KERNELS = ("default", "avx2", "avx512")  # torch's ATEN_CPU_CAPABILITY values
RECORD_COLUMNS = ("date", "machine", "kernels", "python", "torch", "threads_per_job", "source")


def records_columns(path: Path) -> list[str]:
    """The columns of the records at `path` (docs/demo-runs.csv): refused in one line where it is not such
    a table (a Markdown table, another CSV, an empty file, a folder)."""
    from aiayn.errors import UserError
    from aiayn.io import readable

    with open(readable(path, "the demo's records (docs/demo-runs.csv)"), encoding="utf-8") as f:
        columns = next(csv.reader(f), [])
    if columns[: len(RECORD_COLUMNS)] != list(RECORD_COLUMNS):
        raise UserError(f"--record {path}: not the demo's records (its first columns are not "
                        f"{', '.join(RECORD_COLUMNS)}); give docs/demo-runs.csv")  # fmt: skip
    return columns


def record(path: Path, runs: dict[tuple[str, int], dict[str, float]]) -> None:
    """Each run appended to the records (docs/demo-runs.csv), in its columns: the demo profile runs
    each job that makes a figure on one thread."""
    import torch

    with open(path, "a", encoding="utf-8", newline="") as f:
        out = csv.DictWriter(f, records_columns(path), lineterminator="\n")
        for (kernel, cores), found in runs.items():
            out.writerow({
                "date": time.strftime("%Y-%m-%d"), "machine": cpu_model(), "kernels": kernel,
                "python": platform.python_version(), "torch": torch.__version__.split("+")[0], "threads_per_job": 1,
                "source": f"benchmarks/demo_kernels.py --cores {cores}",
                **{k: f"{v:.2f}" if isinstance(v, float) else v for k, v in found.items()},
            })  # fmt: skip


def demo(kernel: str, cores: int, env: dict) -> tuple[dict[str, float], float]:
    work = Path(tempfile.mkdtemp(prefix=f"aiayn-kernel-{kernel}-"))
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    for name in files.stdout.splitlines():
        if (ROOT / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, work / name)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/demo", "--cores", str(cores)]
    run = run_whole(cmd, cwd=work, env={**env, "ATEN_CPU_CAPABILITY": kernel})
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"the demo failed with ATEN_CPU_CAPABILITY={kernel}:\n{run.stderr[-3000:]}")
    found = figures(work / "results/demo/tables")
    shutil.rmtree(work, ignore_errors=True)
    return found, seconds


def main() -> None:
    from aiayn.commands import at_least
    from aiayn.io import writable

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--cores", nargs="+", type=at_least(1), default=[2], help="a run per kernel and --cores value")
    parser.add_argument("--record", type=Path, help="the records to append each run to: docs/demo-runs.csv")
    args = parser.parse_args()
    if args.record:  # the records are checked before the runs (25 minutes), not after
        records_columns(args.record)
        writable(args.record)
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.setdefault("XDG_CACHE_HOME", tempfile.gettempdir() + "/aiayn-bench-cache")
    runs = {}
    for cores in args.cores:
        for kernel in args.kernels:
            runs[kernel, cores], seconds = demo(kernel, cores, env)
            print(f"{kernel}, {cores} cores: {seconds:.0f} s", flush=True)
    names = list(next(iter(runs.values())))
    print(f"\n{'figure':<50}" + "".join(f"{f'{k}, {c} cores':>20}" for k, c in runs) + "   range")
    for name in (n for n in names if isinstance(next(iter(runs.values()))[n], float)):
        values = [found[name] for found in runs.values()]
        print(f"{name:<50}" + "".join(f"{v:>20.2f}" for v in values) + f"   {min(values):.2f}–{max(values):.2f}")
    if args.record:
        record(args.record, runs)


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "demo_kernels")
