"""Pipeline overhead: wall time of a dry-run of the full paper study (`snakemake -n`), which is what
every `snakemake` invocation pays before the first job starts (parsing, config validation, DAG).

    python benchmarks/pipeline.py --repeats 3 --json benchmarks/pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # aiayn from this checkout


def dry_run(extra: list[str]) -> tuple[float, int]:
    env = {
        **os.environ,
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", tempfile.gettempdir() + "/aiayn-bench-cache"),
    }
    env.pop("SNAKEMAKE_PROFILE", None)
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "8", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"snakemake -n failed:\n{run.stderr[-2000:]}")
    total = re.search(r"^total\s+(\d+)", run.stdout + run.stderr, re.M)
    return seconds, int(total.group(1)) if total else -1


def main() -> None:
    from aiayn.commands import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=at_least(1), default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for label, extra in (("paper study", []), ("paper study, --profile slurm", ["--profile", "slurm"])):
        times, jobs = zip(*(dry_run(extra) for _ in range(args.repeats)))
        rows.append({"run": label, "jobs": jobs[0], "median_s": statistics.median(times), "min_s": min(times)})
        print(
            f"{label:<30} {jobs[0]:4d} jobs planned   median {statistics.median(times):5.2f} s   "
            f"min {min(times):5.2f} s   ({args.repeats} runs)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "pipeline")
