"""A training's start-up at the paper's corpus sizes: reading the encoded corpus (its digest
verified) and building the batch plan, as `aiayn.training.train.Trainer` does before its first
update, each corpus in a fresh process; wall time, peak RSS and its allocated part (RssAnon), in MiB.

    python benchmarks/startup.py results/rehearsal/data/wmt14-en-de/train.bin \\
        results/rehearsal/data/wmt14-en-fr/train.bin --json benchmarks/startup.json

The batch plan is the paper's: 25,000 tokens a side an update over 8 GPUs, micro-batches of 3,125
(training.tokens_per_update, max_tokens of config.yaml). The model's own memory is not in these
figures (it is the same at any corpus size: the check stage's, docs/rehearsal.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(path: str, tokens_per_update: int, max_tokens: int, gpus: int) -> dict:
    """One start-up, in this process: what it costs over the imports before it."""
    import numpy as np  # noqa: F401  (imported before the baseline is taken)
    import torch  # noqa: F401

    from aiayn.data import binary
    from aiayn.training.batching import Batcher, micro_batch_budget

    base_rss, base_anon = status_mib("VmRSS"), status_mib("RssAnon")
    t0 = time.perf_counter()
    corpus = binary.read(path)
    t_read = time.perf_counter() - t0
    accumulation, budget = micro_batch_budget(tokens_per_update, max_tokens, gpus)
    batcher = Batcher(corpus, budget=budget, seed=1, per_update=accumulation * gpus)
    first = batcher.update(1)
    total = time.perf_counter() - t0
    return {
        "corpus": path,
        "pairs": len(corpus),
        "bytes": Path(path).stat().st_size,
        "read_s": round(t_read, 1),
        "plan_s": round(total - t_read, 1),
        "startup_s": round(total, 1),
        "micro_batches_per_epoch": batcher.n_batches,
        "first_update_pairs": int(sum(len(b) for b in first)),
        "baseline_rss_mib": round(base_rss),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "anon_after_mib": round(status_mib("RssAnon")),
        "anon_added_mib": round(status_mib("RssAnon") - base_anon),
    }


def main() -> None:
    from aiayn.commands import at_least

    count = at_least(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", help="encoded training corpora (train.bin)")
    parser.add_argument("--tokens-per-update", type=count, default=25_000)
    parser.add_argument("--max-tokens", type=count, default=4096)
    parser.add_argument("--gpus", type=count, default=8)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tokens_per_update, args.max_tokens, args.gpus)))
        return
    if not args.corpora:
        parser.error("name at least one encoded training corpus (train.bin)")
    if args.json:
        from aiayn.io import writable

        writable(args.json)  # before the measurements, not after them
    rows = []
    for path in args.corpora:
        cmd = [sys.executable, __file__, "--child", path, "--tokens-per-update", str(args.tokens_per_update),
               "--max-tokens", str(args.max_tokens), "--gpus", str(args.gpus)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:  # the child's one line (its error boundary's), or its traceback's last
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            sys.exit(why if why.startswith("startup: ") else f"startup: {path}: {why}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{r['pairs']:>12,} pairs  read {r['read_s']:6.1f} s  plan {r['plan_s']:6.1f} s  "
              f"peak RSS {r['peak_rss_mib']:6,} MiB (baseline {r['baseline_rss_mib']:,}; "
              f"allocated +{r['anon_added_mib']:,})  {path}", flush=True)  # fmt: skip
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        time_x = b["startup_s"] / max(a["startup_s"], 1e-9)
        anon_x = b["anon_added_mib"] / max(a["anon_added_mib"], 1)
        print(f"x{b['pairs'] / a['pairs']:.1f} pairs: time x{time_x:.1f}, peak RSS "
              f"x{b['peak_rss_mib'] / a['peak_rss_mib']:.2f}, allocated x{anon_x:.1f}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))  # this clone's aiayn (a child's baseline is taken after its imports)
    from aiayn.errors import boundary

    boundary(main, "startup")
