"""Figures of the report: learning curves, the learning-rate schedule, throughput, attention maps
(the paper's Figures 3-5). matplotlib, written as PNG."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from aiayn.io import atomic_path  # noqa: E402
from aiayn.training import metrics  # noqa: E402


def _save(fig, out) -> None:
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)


def learning_curves(path, out, title: str) -> None:
    records = metrics.read(path)
    progress, dev = records.progress, records.dev
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    steps = [r["step"] for r in progress]
    axes[0].plot(steps, [r["loss"] for r in progress], label="train loss (label-smoothed)")
    axes[0].set_xlabel("update")
    axes[0].set_ylabel("loss per target token")
    ax2 = axes[0].twinx()
    ax2.plot([r["step"] for r in dev], [r["dev_ppl"] for r in dev], "o-", color="C1", label="dev perplexity")
    ax2.set_ylabel("dev perplexity")
    # one legend for both axes: the dev line lives on the twin axis, whose handles legend() alone misses
    lines = axes[0].get_lines() + ax2.get_lines()
    axes[0].legend(lines, [line.get_label() for line in lines], loc="upper right", fontsize=8)
    axes[1].plot([r["hours"] for r in progress], [r["loss"] for r in progress])
    axes[1].set_xlabel("wall time (h)")
    axes[1].set_ylabel("train loss")
    axes[2].plot(steps, [r["tgt_tokens_per_s"] for r in progress])
    axes[2].set_xlabel("update")
    axes[2].set_ylabel("target tokens / s")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, out)


def learning_rate(path, out, title: str) -> None:
    progress = metrics.read(path).progress
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot([r["step"] for r in progress], [r["lr"] for r in progress])
    ax.set_xlabel("update")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    fig.tight_layout()
    _save(fig, out)


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
    _save(fig, out)
