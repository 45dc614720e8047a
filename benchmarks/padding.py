"""Batching efficiency: the share of padding in training batches built by the trainer's own
batcher (`aiayn.training.batching.length_batches`) at the paper's batch size (8 GPUs × 3,125 tokens per
side, 25,000 per update), on the real sentence lengths of the WMT news slice in ../shared/data
(~1.3 pieces per word), and on those lengths resampled to the paper's 4.5M EN-DE pairs.

    python benchmarks/padding.py --json benchmarks/padding.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.training.batching import length_batches, micro_batch_budget  # noqa: E402


def real_lengths(pair: str = "en-de") -> tuple[np.ndarray, np.ndarray]:
    data = Path(os.environ.get("AIAYN_TEST_DATA") or ROOT.parent / "shared" / "data")
    folder = data / "wmt_news_2008_2012" / pair
    if not folder.is_dir():
        sys.exit(
            f"{folder} is absent: this benchmark reads real WMT news text; set AIAYN_TEST_DATA "
            "(docs/development.md, Tests)"
        )
    src, tgt = [], []
    for path in sorted(folder.glob("*.en.gz")):
        other = path.with_name(path.name.replace(".en.gz", f".{pair[3:]}.gz"))
        with (
            gzip.open(path, "rt", encoding="utf-8", newline="\n") as a,
            gzip.open(other, "rt", encoding="utf-8", newline="\n") as b,
        ):
            for x, y in zip(a, b):
                src.append(round(1.3 * len(x.split())) + 1)  # + EOS
                tgt.append(round(1.3 * len(y.split())) + 1)  # + BOS
    return np.array(src), np.array(tgt)


def batch_stats(src: np.ndarray, tgt: np.ndarray, *, world: int, tokens: int, max_tokens: int):
    """(padding share, median target tokens per update) of one epoch's batches."""
    _, budget = micro_batch_budget(tokens, max_tokens, world)
    batches = length_batches(src, tgt, budget, np.random.default_rng(0), max_padded=max_tokens)
    real = sum(int(src[b].sum() + tgt[b].sum()) for b in batches)
    padded = sum(len(b) * int(src[b].max() + tgt[b].max()) for b in batches)
    per_update = [sum(int(tgt[b].sum()) for b in batches[i : i + world]) for i in range(0, len(batches) - world, world)]
    return 1 - real / padded, float(np.median(per_update))


def main() -> None:
    from aiayn.commands import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=at_least(1), default=4_500_000, help="resampled corpus size (EN-DE: 4.5M)")
    parser.add_argument("--json")
    args = parser.parse_args()
    src, tgt = real_lengths()
    pick = np.random.default_rng(1).integers(0, len(src), args.pairs)
    rows = []
    for label, s, t in (
        (f"real, {len(src):,} pairs", src, tgt),
        (f"resampled, {args.pairs:,} pairs", src[pick], tgt[pick]),
    ):
        pad, per_update = batch_stats(s, t, world=8, tokens=25000, max_tokens=4096)
        rows.append({"corpus": label, "padding": pad, "tgt_tokens_per_update": per_update})
        print(
            f"{label:<28} padding {pad:6.2%}   target tokens per update {per_update:8,.0f}   (target <= 5 %)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "padding")
