"""Figures of the report: learning curves, the learning-rate schedule, throughput, attention maps
(the paper's Figures 3-5), and the one way every figure of the package is drawn and saved
(`pyplot`, `save`: matplotlib without a display, written as PNG atomically)."""

from __future__ import annotations

from pathlib import Path

from aiayn.data import vocab
from aiayn.data.binary import EOS
from aiayn.errors import UserError
from aiayn.io import atomic_path, atomic_paths
from aiayn.model.transformer import encoder_attention
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import metrics
from aiayn.runtime.lines import read_lines


def pyplot():
    """matplotlib.pyplot on its file-only backend (jobs have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out, dpi: int = 90) -> None:
    """Write `fig` to `out` as PNG, atomically, and close it."""
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    pyplot().close(fig)


def learning_curves(path, out, title: str, seeds: tuple = ()) -> None:
    """Train loss and dev perplexity by update, loss by wall time and throughput of the run at
    `path`; `seeds`: the metrics of its row's other seeds, whose dev perplexity is drawn beside it."""
    records = metrics.read(path)
    progress, dev = records.progress, records.dev
    fig, axes = pyplot().subplots(1, 3, figsize=(13, 3.6))
    steps = [r["step"] for r in progress]
    axes[0].plot(steps, [r["loss"] for r in progress], label="train loss (label-smoothed)")
    axes[0].set_xlabel("update")
    axes[0].set_ylabel("loss per target token")
    ax2 = axes[0].twinx()
    own = f"dev perplexity ({Path(path).parent.name})" if seeds else "dev perplexity"
    ax2.plot([r["step"] for r in dev], [r["dev_ppl"] for r in dev], "o-", color="C1", label=own)
    for i, other in enumerate(seeds):  # the spread over seeds, seen as it grows
        d = metrics.read(other).dev
        color = f"C{2 + i % 8}"
        label = f"dev perplexity ({Path(other).parent.name})"
        ax2.plot([r["step"] for r in d], [r["dev_ppl"] for r in d], "o--", color=color, label=label, markersize=3)
    ax2.set_ylabel("dev perplexity (log scale)")
    ax2.set_yscale("log")  # the end of the curves, where seeds and variations differ, stays readable
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
    save(fig, out)


def schedule(settings: dict) -> tuple[list[int], list[float]]:
    """The learning rate at every update 1..steps of a run's `settings` (experiment.json, also in
    each checkpoint): §5.3's warmup and decay, times the run's lr_scale."""
    from aiayn.runtime.schedule import rate

    d_model, tr = settings["model"]["d_model"], settings["train"]
    steps = list(range(1, tr["steps"] + 1))
    return steps, [rate(s, d_model, tr["warmup_steps"], tr.get("lr_scale", 1.0)) for s in steps]


def learning_rate(path, out, title: str, settings: dict | None = None) -> None:
    """The schedule from update 1 (warmup included: the log starts at its first interval), with
    the rate each logged update trained at on top."""
    progress = metrics.read(path).progress
    fig, ax = pyplot().subplots(figsize=(5, 3.4))
    if settings is not None:
        steps, rates = schedule(settings)
        ax.plot(steps, rates, label="schedule (§5.3)")
        ax.axvline(settings["train"]["warmup_steps"], color="grey", linestyle=":", label="end of warmup")
    ax.plot([r["step"] for r in progress], [r["lr"] for r in progress], "o", markersize=3, label="logged")
    ax.set_xlabel("update")
    ax.set_ylabel("learning rate")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, out)


def attention_maps(weights, src_tokens: list[str], out, title: str, heads: int = 4) -> None:
    """weights: (h, S, S) self-attention of one encoder layer for one sentence; a row is a query
    (the position attending), a column the position it attends to, the colour its weight."""
    n = min(heads, weights.shape[0])
    fig, axes = pyplot().subplots(1, n, figsize=(3.2 * n + 1.6, 3.9))
    axes = [axes] if n == 1 else axes
    image = None
    for i, ax in enumerate(axes):
        image = ax.imshow(weights[i].numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(src_tokens)), src_tokens, fontsize=6)
        ax.set_title(f"head {i + 1}", fontsize=8)
        ax.set_xlabel("attended to (key)", fontsize=7)
        if i == 0:
            ax.set_ylabel("attending (query)", fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="attention weight")
    save(fig, out)


def write_figures(
    name: str, metrics_path, model_path, spm_src, dev_src, *, curves, lr_plot, attention, seeds: tuple = ()
) -> None:
    """One experiment's learning curves (with the dev perplexity of its row's other `seeds`: their
    metrics files), learning-rate schedule (from its metrics) and the encoder self-attention of its
    model on the first dev sentence of 5-25 pieces (last layer, first heads)."""
    for path in (metrics_path, *seeds):
        if not Path(path).exists() and not Path(path).is_symlink():
            raise UserError(f"{path}: no metrics file; the run's training writes it")
    with atomic_paths(curves, lr_plot, attention) as (tmp_curves, tmp_lr, tmp_attention):  # all three, or none
        learning_curves(metrics_path, tmp_curves, f"{name}: training", seeds=tuple(seeds))
        state = ckpt.load(model_path)
        vocab.check_model(state, model_path, {"src": spm_src})
        learning_rate(metrics_path, tmp_lr, f"{name}: learning rate (§5.3)", settings=state.get("settings"))
        model = ckpt.rebuild(state).eval()
        sp = vocab.load(spm_src)
        lines = list(read_lines(dev_src))
        if not lines:
            raise UserError(f"{dev_src}: no dev sentence to draw the attention of")
        ids = next((x for x in vocab.to_ids(sp, lines) if 5 <= len(x) <= 25), vocab.to_ids(sp, lines[:1])[0])
        pieces = [sp.IdToPiece(i) for i in ids] + ["</s>"]
        weights = encoder_attention(model, ids + [EOS])
        attention_maps(weights, pieces, tmp_attention, f"{name}: encoder self-attention, last layer")
