"""Peak memory and speed of data preparation at scale: prepare (extract, align, clean), vocab, encode.

Generates a parallel corpus of --lines pairs (words drawn from a Zipf distribution, so
sentencepiece sees a realistic long tail), packs it as a WMT-style tar, then runs the real
commands as subprocesses and reports each one's wall time, lines/s and peak RSS (ru_maxrss of the
child). Memory that stays flat as --lines grows is the point: compare two sizes in one run.

    python benchmarks/data_prep.py --lines 500000 2000000 --json benchmarks/data_prep.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # aiayn from this checkout


def generate(path: Path, lines: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(50_000)])
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, lines, 100_000):
            n = min(100_000, lines - start)
            lengths = rng.integers(3, 40, n)
            ids = np.minimum(rng.zipf(1.3, lengths.sum()), len(words)) - 1
            cut = np.cumsum(lengths)[:-1]
            f.write("".join(" ".join(s) + "\n" for s in np.split(words[ids], cut)))


def run(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def bench(lines: int, tmp: Path) -> dict:
    en, de = tmp / "c.en", tmp / "c.de"
    generate(en, lines, 1)
    generate(de, lines, 2)
    archive = tmp / "corpus.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(en, "training/c.en")
        tar.add(de, "training/c.de")
    py = [sys.executable, "-m", "aiayn"]
    corpora = json.dumps([{"archive": "c", "src": "training/c.en", "tgt": "training/c.de"}])
    steps = {
        "prepare": py
        + [
            "prepare",
            "--corpora",
            corpora,
            "--archives",
            json.dumps({"c": str(archive)}),
            "--src",
            str(tmp / "train.src"),
            "--tgt",
            str(tmp / "train.tgt"),
            "--report",
            str(tmp / "r.json"),
        ],
        "vocab": py
        + [
            "vocab",
            "--vocab",
            json.dumps({"model_type": "bpe", "size": 8000, "shared": True, "input_sentence_size": 1_000_000}),
            "--train-src",
            str(tmp / "train.src"),
            "--train-tgt",
            str(tmp / "train.tgt"),
            "--out-src",
            str(tmp / "spm.src.model"),
            "--out-tgt",
            str(tmp / "spm.tgt.model"),
            "--threads",
            "2",
        ],
        "encode": py
        + [
            "encode",
            "--src",
            str(tmp / "train.src"),
            "--tgt",
            str(tmp / "train.tgt"),
            "--spm-src",
            str(tmp / "spm.src.model"),
            "--spm-tgt",
            str(tmp / "spm.tgt.model"),
            "--out",
            str(tmp / "train.bin"),
            "--threads",
            "2",
        ],
    }
    out = {"lines": lines, "corpus_mb": (en.stat().st_size + de.stat().st_size) / 1e6}
    for name, cmd in steps.items():
        seconds, rss = run(cmd)
        out[name] = {
            "seconds": round(seconds, 1),
            "lines_per_s": round(lines / seconds),
            "peak_rss_mb": round(rss / 1e6),
        }
    for f in tmp.iterdir():
        f.unlink()
    return out


def main() -> None:
    from aiayn.commands import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=at_least(1), nargs="+", default=[500_000, 2_000_000])
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.lines:
            results.append(bench(n, Path(tmp)))
            r = results[-1]
            print(
                f"{n:>10,} pairs ({r['corpus_mb']:.0f} MB of text): "
                + "; ".join(
                    f"{k} {r[k]['seconds']} s, {r[k]['lines_per_s']:,} lines/s, peak {r[k]['peak_rss_mb']} MB"
                    for k in ("prepare", "vocab", "encode")
                ),
                flush=True,
            )
    if len(results) > 1:
        a, b = results[0], results[-1]
        print(
            f"lines x{b['lines'] / a['lines']:.1f}: peak memory x"
            + ", x".join(
                f"{b[k]['peak_rss_mb'] / a[k]['peak_rss_mb']:.2f} ({k})" for k in ("prepare", "vocab", "encode")
            )
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "data_prep")
