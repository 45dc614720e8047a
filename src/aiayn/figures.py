"""Figures of the report: learning curves, the learning-rate schedule, throughput, attention maps
(the paper's Figures 3-5). matplotlib, written as PNG."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_records(metrics: str | Path) -> tuple[list[dict], list[dict]]:
    """(progress records, dev records) of a metrics.jsonl, with wall time since the first start."""
    progress, dev, start = [], [], None
    for line in Path(metrics).read_text().splitlines():
        rec = json.loads(line)
        if rec.get("event") == "start":
            start = rec["wall"] if start is None else start
        elif "loss" in rec:
            progress.append({**rec, "hours": (rec["wall"] - start) / 3600})
        elif "dev_ppl" in rec:
            dev.append(rec)
    return progress, dev


def learning_curves(metrics, out, title: str) -> None:
    progress, dev = read_records(metrics)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    steps = [r["step"] for r in progress]
    axes[0].plot(steps, [r["loss"] for r in progress], label="train loss (label-smoothed)")
    axes[0].set_xlabel("update")
    axes[0].set_ylabel("loss per target token")
    ax2 = axes[0].twinx()
    ax2.plot([r["step"] for r in dev], [r["dev_ppl"] for r in dev], "o-", color="C1", label="dev perplexity")
    ax2.set_ylabel("dev perplexity")
    axes[0].legend(loc="upper right", fontsize=8)
    axes[1].plot([r["hours"] for r in progress], [r["loss"] for r in progress])
    axes[1].set_xlabel("wall time (h)")
    axes[1].set_ylabel("train loss")
    axes[2].plot(steps, [r["tgt_tokens_per_s"] for r in progress])
    axes[2].set_xlabel("update")
    axes[2].set_ylabel("target tokens / s")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def learning_rate(metrics, out, title: str) -> None:
    progress, _ = read_records(metrics)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot([r["step"] for r in progress], [r["lr"] for r in progress])
    ax.set_xlabel("update")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def attention_maps(weights, src_tokens: list[str], out, title: str, heads: int = 4) -> None:
    """weights: (h, S, S) self-attention of one encoder layer for one sentence."""
    n = min(heads, weights.shape[0])
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n + 1, 3.6))
    axes = [axes] if n == 1 else axes
    for i, ax in enumerate(axes):
        ax.imshow(weights[i].numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(src_tokens)), src_tokens, fontsize=6)
        ax.set_title(f"head {i + 1}", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
