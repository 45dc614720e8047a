"""The paper's study rehearsed at its real sizes on this machine (docs/rehearsal.md), and what it costs.

    python benchmarks/rehearsal.py                        # the whole study: EN-DE 4.5M, EN-FR 36M pairs
    python benchmarks/rehearsal.py --run base-en-de --pairs wmt14-en-de=4500000   # one row (CI's)

1. The WMT archives config.yaml names, generated at the paper's sizes with the statistics of the real
   WMT news sets (aiayn.data.mimic), in results/rehearsal/mirror/; their checksums and the `mirror`
   that serves them to the download rule in results/rehearsal/mirror.yaml (profiles/rehearsal reads it).
2. The study run through `snakemake --profile profiles/rehearsal` in stages: the data of every
   dataset; then each trained experiment to its scores, after which its folder of checkpoints is
   measured (and, unless --keep, its step and resume checkpoints removed: the machine's disk holds
   the data and one run's checkpoints, not all of them); then the rest (tables, figures, Table 1).
   A rehearsal stopped and run again (with --run, say, to leave experiments out) resumes: its
   trainings from their resume checkpoints, its records from results/rehearsal/progress.json.
3. Every `python -m aiayn` job records its wall and CPU seconds, peak RSS and bytes written
   (AIAYN_COSTS, aiayn.cli.record_cost); a thread samples the disk the study takes. All of it goes to
   results/rehearsal/cost.{md,csv} (per job: seconds, peak RSS in MiB, MB written) and summary.json (the
   stages' seconds, the peak disk, each run's folder of checkpoints: its files and their bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.data import mimic  # noqa: E402
from aiayn.errors import UserError, boundary  # noqa: E402
from aiayn.io import atomic_write_text  # noqa: E402
from aiayn.report.format import to_csv, to_markdown  # noqa: E402
from aiayn.study import config as cfg  # noqa: E402
from aiayn.study.grid import Study  # noqa: E402

PAPER_PAIRS = {"wmt14-en-de": 4_500_000, "wmt14-en-fr": 36_000_000}  # §5.1
SAMPLE_SETS = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]


class DiskPeak(threading.Thread):
    """The largest size `folder` took, sampled every `every` seconds (du), and when."""

    def __init__(self, folder: Path, every: float = 15.0):
        super().__init__(daemon=True)
        self.folder, self.every, self.peak, self.at, self.stage = folder, every, 0, None, ""
        self.done = threading.Event()

    def size(self) -> int:
        run = subprocess.run(["du", "-sb", str(self.folder)], capture_output=True, text=True)
        return int(run.stdout.split()[0]) if run.returncode == 0 and run.stdout else 0

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.sample()

    def sample(self) -> None:
        size = self.size()
        if size > self.peak:
            self.peak, self.at = size, self.stage


def snakemake(*args: str, env: dict) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/rehearsal", *args]
    print("$", " ".join(cmd[2:]), flush=True)
    done = subprocess.run(cmd, cwd=ROOT, env=env)
    if done.returncode:
        sys.exit(f"rehearsal: `{' '.join(cmd[2:])}` failed (exit {done.returncode}); see results/rehearsal/logs/")


def folder_files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.glob("*.pt"))} if folder.is_dir() else {}


def pairs(text: str) -> dict[str, int]:
    """--pairs: dataset=N,... over the datasets the paper trains on, N a whole number >= 1."""
    try:
        sizes = {k: int(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise UserError(f"--pairs {text!r}: expected dataset=N,..., e.g. wmt14-en-de=4500000") from None
    wrong = [f"{k}={v}" for k, v in sizes.items() if k not in PAPER_PAIRS or v < 1]
    if wrong:
        raise UserError(f"--pairs: {', '.join(wrong)}: each of {', '.join(PAPER_PAIRS)} at 1 pair or more")
    return sizes


def record(path: Path, keys: dict[str, type]) -> dict:
    """A record an earlier invocation wrote (progress.json, mirror.json) holding `keys` of their
    types; none yet: {}."""
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        value = exc
    if isinstance(value, dict) and any(not isinstance(value.get(k), t) for k, t in keys.items()):
        value = f"it lacks {', '.join(f'{k} ({t.__name__})' for k, t in keys.items())}, or holds another kind"
    if not isinstance(value, dict):
        raise UserError(f"{path}: not a record of an earlier rehearsal ({value}); delete it to measure that part again")
    return value


def alone(out: Path) -> None:
    """Hold `out` for this rehearsal while it runs: a second one on it is refused, naming the first."""
    import fcntl

    fd = os.open(out / "rehearsal.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "another process"
        raise UserError(f"{out} is being rehearsed by {holder}; wait for it to finish or stop it, then run again")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"the process {os.getpid()}".encode(), 0)  # the lock is held while the process lives


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default=",".join(f"{k}={v}" for k, v in PAPER_PAIRS.items()),
                        help="training pairs per dataset, dataset=N,... (default: the paper's)")  # fmt: skip
    parser.add_argument("--run", help="experiments to run, a,b,... (config's `run:`; default: every one)")
    parser.add_argument("--data", default=os.environ.get("AIAYN_TEST_DATA") or str(ROOT.parent / "shared" / "data"),
                        help="the real test data folder (its WMT news sets and newstest2013/2014)")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep every run's checkpoints (needs the disk)")
    args = parser.parse_args()
    sizes = pairs(args.pairs)
    out = ROOT / "results" / "rehearsal"
    out.mkdir(parents=True, exist_ok=True)
    alone(out)
    data = Path(args.data)
    started = time.time()

    # 1. the mirror: results/rehearsal/mirror/, its config in mirror.yaml, what made it in mirror.json
    made_path, overlay_path = out / "mirror.json", out / "mirror.yaml"
    config = cfg.merged([ROOT / "config.yaml", ROOT / "profiles/rehearsal/study.yaml"])
    unknown = [name for name in (args.run.split(",") if args.run else []) if name not in config["experiments"]]
    if unknown:
        raise UserError(
            f"--run: no experiment {', '.join(unknown)} in config.yaml; known: {', '.join(config['experiments'])}"
        )
    made = record(made_path, {"pairs": dict, "archives": dict})
    if made.get("pairs") != sizes or not overlay_path.exists():
        t0 = time.time()
        samples = {}
        for dataset in sizes:
            src, tgt = config["datasets"][dataset]["src"], config["datasets"][dataset]["tgt"]
            folder = data / "wmt_news_2008_2012" / f"{src}-{tgt}"
            files = [(folder / f"{s}.{src}.gz", folder / f"{s}.{tgt}.gz") for s in SAMPLE_SETS]
            samples[dataset] = mimic.Sample.read(files)
        made = {
            "pairs": sizes,
            "archives": mimic.write_archives(config, sizes, samples, real=data / "wmt14", out=out / "mirror"),
        }
        made["generated_s"] = round(time.time() - t0, 1)
        atomic_write_text(made_path, json.dumps(made, indent=2) + "\n")  # read by the next invocation
    overlay = {"mirror": f"file://{out / 'mirror'}/", "archives": made["archives"]}
    if args.run:
        overlay["run"] = args.run.split(",")
    atomic_write_text(overlay_path, yaml.safe_dump(overlay, sort_keys=False))
    files = [ROOT / "config.yaml", ROOT / "profiles/rehearsal/study.yaml", overlay_path]
    study = Study(cfg.validate(cfg.merged(files)))

    env = {**os.environ, "AIAYN_COSTS": str(out / "costs.jsonl")}
    env.pop("SNAKEMAKE_PROFILE", None)
    disk = DiskPeak(out)
    disk.start()
    # what earlier invocations measured (a rehearsal stopped and run again keeps them): progress.json
    progress_path = out / "progress.json"
    progress = record(progress_path, {"stages_s": dict, "runs": dict})
    stages, runs = progress.get("stages_s", {}), progress.get("runs", {})
    disk.peak, disk.at = progress.get("peak_disk_bytes", 0), progress.get("peak_disk_stage")
    before_s = progress.get("total_s", 0.0)  # the earlier invocations' time

    def save() -> None:
        record = {"stages_s": stages, "runs": runs, "peak_disk_bytes": disk.peak, "peak_disk_stage": disk.at,
                  "total_s": round(before_s + time.time() - started, 1)}  # fmt: skip
        atomic_write_text(progress_path, json.dumps(record, indent=2) + "\n")  # a stop mid-write keeps the last

    def stage(name: str, *targets: str) -> None:
        disk.stage = name
        t0 = time.time()
        snakemake(*targets, env=env)
        disk.sample()
        stages.setdefault(name, round(time.time() - t0, 1))  # a finished stage run again is a no-op
        save()

    # 2. the data, then each training to its scores, then the rest
    stage("data", "data")
    for name in study.trained:
        evaluations = [ev for ev in study.evaluations() if ev.experiment == name]
        stage(name, *(study.layout.score(name, ev.testset) for ev in evaluations))
        folder = Path(study.layout.checkpoints(name))
        files = folder_files(ROOT / folder)
        pruned = set(files) <= {"last.pt"}  # by an earlier invocation: what it held is in progress.json or lost
        if not pruned and (name not in runs or sum(files.values()) > runs[name]["bytes"]):
            runs[name] = {"experiment": name, "files": files, "bytes": sum(files.values())}
            save()
        if not args.keep:
            for file in (ROOT / folder).glob("*.pt"):
                if file.name != "last.pt":
                    file.unlink()
    stage("tables, figures, Table 1", "all")
    disk.done.set()

    # 3. the records
    summary = {"stages_s": stages, "total_s": round(before_s + time.time() - started, 1), "peak_disk_bytes": disk.peak,
               "peak_disk_stage": disk.at, "runs": list(runs.values()), "pairs": sizes,
               "results_bytes": disk.size(), "mirror": made}  # fmt: skip
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    costs = [json.loads(line) for line in (out / "costs.jsonl").read_text().splitlines() if line.strip()]
    rows = [job_row(c) for c in costs]
    atomic_write_text(out / "cost.csv", to_csv(rows))  # read by `aiayn plan --costs`
    atomic_write_text(out / "cost.md", "# What each job of the rehearsal cost\n\n" + to_markdown(rows))
    print(f"rehearsal done in {summary['total_s'] / 3600:.1f} h; peak disk {disk.peak / 1e9:.1f} GB "
          f"({disk.at}); {out / 'cost.md'}")  # fmt: skip


def job_row(record: dict) -> dict:
    """A cost record of one `python -m aiayn` job as a row: the rule (its command) and the job (its log's name)."""
    argv = record["argv"]
    log = argv[argv.index("--log-to") + 1] if "--log-to" in argv else None
    paths = [a for a in argv if a.startswith("results/")]  # the job's files; its outputs come last
    return {
        "rule": record["command"],
        "job": Path(log).stem if log else (paths[-1] if paths else ""),
        "exit": record["exit"],
        "wall_s": record["wall_s"],
        "cpu_s": record["cpu_s"],
        # MiB, as ru_maxrss and Slurm's --mem count; earlier records named it max_rss_mb
        "max_rss_mib": record.get("max_rss_mib", record.get("max_rss_mb")),
        "written_mb": round(record["write_bytes"] / 1e6, 1),  # MB, as the disk figures
    }


if __name__ == "__main__":
    shutil.which("du") or sys.exit("rehearsal: needs du (coreutils)")
    boundary(main, "rehearsal")
