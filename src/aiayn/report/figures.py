"""Figures of the report: learning curves, the gradient norm, the learning-rate schedule, throughput, attention maps
(the paper's Figures 3-5), the encoder-decoder attention of every layer and its distance from the
diagonal (diagonal.json), and the one way every figure of the package is drawn and saved
(`pyplot`, `save`: matplotlib without a display, written as PNG atomically)."""

from __future__ import annotations

from pathlib import Path

from aiayn.data import vocab
from aiayn.data.binary import BOS, EOS
from aiayn.errors import UserError
from aiayn.io import atomic_path, atomic_paths
from aiayn.model.transformer import cross_attention, encoder_attention
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import metrics, records
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
    """Train loss and dev perplexity by update; the gradient norm before clipping beside the
    learning rate by update (the updates where the loss diverged or stalled marked, aiayn.training.progress); loss
    by wall time; throughput. `seeds`: the metrics of its row's other seeds, whose dev perplexity
    is drawn beside the run's."""
    records = metrics.read(path)
    progress, dev = records.progress, records.dev
    if not progress:  # nothing to draw: an empty file, or a run not past its first logged update
        raise UserError(f"{path}: no training records to draw; give the metrics.jsonl of a run that has trained")
    fig, grid = pyplot().subplots(2, 2, figsize=(11, 7))
    axes = grid.flatten()
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
    gradient_norm(axes[1], records)
    axes[2].plot([r["hours"] for r in progress], [r["loss"] for r in progress])
    axes[2].set_xlabel("wall time (h)")
    axes[2].set_ylabel("train loss")
    axes[3].plot(steps, [r["tgt_tokens_per_s"] for r in progress])
    axes[3].set_xlabel("update")
    axes[3].set_ylabel("target tokens / s")
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, out)


def gradient_norm(ax, records) -> None:
    """The gradient norm before clipping (the log interval's mean and largest) on a log scale, the
    learning rate on a twin axis, and the update where the loss diverged, if it did."""
    logged = [r for r in records.progress if r.get("grad_norm") is not None]
    if logged:
        steps = [r["step"] for r in logged]
        ax.plot(steps, [r["grad_norm"] for r in logged], color="C2", label="gradient norm (mean of interval)")
        ax.plot(steps, [r["grad_norm_max"] for r in logged], ":", color="C2", label="gradient norm (largest)")
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no gradient norm recorded\n(a run of aiayn 0.3)", ha="center", va="center",
                transform=ax.transAxes)  # fmt: skip
    ax.set_xlabel("update")
    ax.set_ylabel("gradient norm before clipping")
    lr = ax.twinx()
    lr.plot(
        [r["step"] for r in records.progress], [r["lr"] for r in records.progress], color="C3", label="learning rate"
    )
    lr.set_ylabel("learning rate")
    for event in records.diverging:
        ax.axvline(event["step"], color="red", linestyle="--", label=f"loss diverged (update {event['step']})")
    for event in records.stalling:
        ax.axvline(event["step"], color="orange", linestyle="--", label=f"stalled (update {event['step']})")
    lines = ax.get_lines() + lr.get_lines()
    ax.legend(lines, [line.get_label() for line in lines], loc="upper right", fontsize=7)


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


def attention_maps(weights, src_tokens: list[str], out, title: str, *, heads: int = 4) -> None:
    """weights: (h, S, S) self-attention of one encoder layer for one sentence; a row is a query
    (the position attending), a column the position it attends to, the colour its weight."""
    n = min(heads, weights.shape[0])
    panels = [(weights[i], f"head {i + 1}") for i in range(n)]
    axes = ("attended to (key)", "attending (query)")
    _heatmaps(
        panels, out, title, tokens=(src_tokens, src_tokens), labels=axes, size=(3.2, 3.9), scale="attention weight"
    )


def _heatmaps(panels, out, title: str, *, tokens, labels, size, scale: str) -> None:
    """One heatmap per (matrix, its title) side by side, columns and rows named by `tokens` (theirs,
    the rows'), on one colour scale from 0 to 1; labels: the x axis's and the first panel's y axis's."""
    columns, rows = tokens
    n = len(panels)
    fig, axes = pyplot().subplots(1, n, figsize=(size[0] * n + 1.6, size[1]))
    axes = [axes] if n == 1 else list(axes)
    image = None
    for k, (ax, (matrix, name)) in enumerate(zip(axes, panels)):
        image = ax.imshow(matrix.numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=6)
        ax.set_yticks(range(len(rows)), rows, fontsize=6)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel(labels[0], fontsize=7)
        if k == 0:
            ax.set_ylabel(labels[1], fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.colorbar(image, ax=axes, shrink=0.8, label=scale)
    save(fig, out)


DIAGONAL_PAIRS = 50  # dev pairs the distance is averaged over


def diagonal_distance(weights) -> float:
    """How far one layer's encoder-decoder attention (h, T, S) lies from the diagonal: over heads and
    target positions i, the expected |j / (S - 1) - i / (T - 1)| of the source position j attended
    (positions as fractions of their sentence). 0 on the diagonal; uniform attention's depends on
    the lengths (1/3 for long sentences, more for short ones: `uniform_weights`); a language pair
    whose word order differs (EN-DE's verb-final clauses) lies off it in places."""
    import torch

    _, T, S = weights.shape
    i = torch.arange(T, dtype=torch.float64) / max(T - 1, 1)
    j = torch.arange(S, dtype=torch.float64) / max(S - 1, 1)
    return float((weights.double() * (j[None, :] - i[:, None]).abs()).sum(-1).mean())


def uniform_weights(T: int, S: int):
    """Attention spread evenly over the S source positions, for each of T target positions."""
    import torch

    return torch.full((1, T, S), 1.0 / S, dtype=torch.float64)


def monotone_weights(T: int, S: int):
    """A monotone alignment: target position i attends to source position round(i (S-1) / (T-1))
    alone, the diagonal as near as whole positions get."""
    import torch

    weights = torch.zeros((1, T, S), dtype=torch.float64)
    for i in range(T):
        weights[0, i, round(i * (S - 1) / max(T - 1, 1))] = 1.0
    return weights


def cross_attention_maps(layers, pieces, record: dict, out, *, title: str) -> None:
    """One panel per decoder layer: its encoder-decoder attention (mean over heads) for one dev pair,
    a row per target token predicted, a column per source token (`pieces`: the source's, the target's);
    each panel's title its layer's distance from the diagonal over the dev pairs measured and where it
    stands between uniform attention (0) and a monotone alignment (1), from `record` (`diagonal_record`)."""
    panels = [
        (w.mean(0), f"layer {k + 1}: distance {entry['distance']:.3f}, position {entry['position']:.2f}")
        for k, (w, entry) in enumerate(zip(layers, record["layers"]))
    ]
    _heatmaps(
        panels,
        out,
        f"{title} (distance from the diagonal at these lengths: uniform {record['uniform']:.3f}, "
        f"monotone {record['monotone']:.3f})",
        tokens=pieces,
        labels=("source (key)", "target predicted (query)"),
        size=(3.4, 4.2),
        scale="attention weight (mean over heads)",
    )


def dev_pairs(sp_src, sp_tgt, dev_src, dev_tgt, *, longest: int = 100) -> list[tuple[list[int], list[int], int]]:
    """(source ids, target ids, line) of the dev pairs of 1 to `longest` pieces a side, in file order."""
    sources, targets = list(read_lines(dev_src)), list(read_lines(dev_tgt))
    if len(sources) != len(targets):
        raise UserError(f"{dev_src} has {len(sources)} lines, {dev_tgt} {len(targets)}: not one dev set")
    pairs = zip(vocab.to_ids(sp_src, sources), vocab.to_ids(sp_tgt, targets))
    return [(s, t, n + 1) for n, (s, t) in enumerate(pairs) if 1 <= len(s) <= longest and 1 <= len(t) <= longest]


def diagonal_record(model, pairs) -> dict:
    """Per decoder layer, the distance from the diagonal averaged over the first DIAGONAL_PAIRS `pairs`,
    with its yardsticks at the same lengths: uniform attention's distance (`uniform`) and a monotone
    alignment's (`monotone`), and where the layer stands between them (`position`: 0 uniform, 1
    monotone; below 0, further off the diagonal than uniform, as attention fixed on one place)."""
    measured, uniform, monotone = [], [], []
    for s, t, _ in pairs[:DIAGONAL_PAIRS]:
        layers = cross_attention(model, s + [EOS], [BOS] + t)
        T, S = layers[0].shape[-2:]
        uniform.append(diagonal_distance(uniform_weights(T, S)))
        monotone.append(diagonal_distance(monotone_weights(T, S)))
        measured.append([diagonal_distance(w) for w in layers])
    n = len(measured)
    u, m = records.added(uniform) / n, records.added(monotone) / n
    out = []
    for k in range(len(measured[0]) if measured else 0):
        distance = records.added(d[k] for d in measured) / n
        out.append({"layer": k + 1, "distance": distance, "position": (u - distance) / (u - m) if u > m else 0.0})
    return {"pairs": n, "uniform": u, "monotone": m, "layers": out}


def write_figures(
    name: str,
    metrics_path,
    model_path,
    spm_src,
    *,
    dev_src,
    curves,
    lr_plot,
    attention,
    spm_tgt=None,
    dev_tgt=None,
    cross=None,
    diagonal=None,
    seeds: tuple = (),
) -> None:
    """One experiment's learning curves (with the dev perplexity of its row's other `seeds`: their
    metrics files), gradient norm and learning-rate schedule (from its metrics), the encoder
    self-attention of its model on the first dev sentence of 5-25 pieces (last layer, first heads)
    and, given the dev targets, the encoder-decoder attention of every layer on that pair
    (`cross`) with each layer's distance from the diagonal over the first dev pairs (`diagonal`, JSON)."""
    given = (spm_tgt, dev_tgt, cross, diagonal)
    if any(given) and not all(given):
        raise UserError("--spm-tgt, --dev-tgt, --cross-attention and --diagonal go together: give all four or none")
    for path in (metrics_path, *seeds):
        if not Path(path).exists() and not Path(path).is_symlink():
            raise UserError(f"{path}: no metrics file; the run's training writes it")
    wanted = [curves, lr_plot, attention] + ([cross, diagonal] if cross else [])
    with atomic_paths(*wanted) as tmp:  # all of them, or none
        learning_curves(metrics_path, tmp[0], f"{name}: training", seeds=tuple(seeds))
        state = ckpt.load(model_path)
        vocab.check_model(state, model_path, {"src": spm_src, **({"tgt": spm_tgt} if spm_tgt else {})})
        learning_rate(metrics_path, tmp[1], f"{name}: learning rate (§5.3)", settings=state.get("settings"))
        model = ckpt.rebuild(state).eval()
        sp = vocab.load(spm_src)
        lines = list(read_lines(dev_src))
        if not lines:
            raise UserError(f"{dev_src}: no dev sentence to draw the attention of")
        ids = next((x for x in vocab.to_ids(sp, lines) if 5 <= len(x) <= 25), vocab.to_ids(sp, lines[:1])[0])
        pieces = [sp.IdToPiece(i) for i in ids] + ["</s>"]
        weights = encoder_attention(model, ids + [EOS])
        attention_maps(weights, pieces, tmp[2], f"{name}: encoder self-attention, last layer")
        if cross:
            sp_tgt = vocab.load(spm_tgt)
            pairs = dev_pairs(sp, sp_tgt, dev_src, dev_tgt)
            if not pairs:
                raise UserError(f"{dev_src}, {dev_tgt}: no dev pair to draw the encoder-decoder attention of")
            record = diagonal_record(model, pairs)
            s, t, line = next(((s, t, n) for s, t, n in pairs if 5 <= len(s) <= 25 and 5 <= len(t) <= 25), pairs[0])
            layers = cross_attention(model, s + [EOS], [BOS] + t)
            src_pieces = [sp.IdToPiece(i) for i in s] + ["</s>"]
            tgt_pieces = [sp_tgt.IdToPiece(i) for i in t] + ["</s>"]
            title = f"{name}: encoder-decoder attention, dev line {line}"
            cross_attention_maps(layers, (src_pieces, tgt_pieces), record, tmp[3], title=title)
            records.write(tmp[4], "diagonal", {**record, "drawn_line": line})
