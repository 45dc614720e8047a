"""Table 1 (§4, "Why Self-Attention"), measured: complexity per layer, sequential operations and
maximum path length of self-attention, recurrent, convolutional and restricted self-attention
layers, beside the paper's asymptotic column.

- Complexity per layer: the forward FLOPs of one layer over a sequence of n positions of width d,
  counted by torch's FLOP counter (`torch.utils.flop_counter`), and its wall time (best of a few);
  the exponents of n and of d are the least-squares slopes on log-log axes. For the attention
  layers the FLOPs are those of the attention itself (Q K^T and the weighted sum of V), as the
  paper's O(n^2 d) and O(r n d) count them: the four projections (O(n d^2), position-wise) are
  counted separately and left out; the wall time is the whole layer's.
- Sequential operations: the dependent steps a layer takes over n positions, by construction: the
  recurrence applies its cell n times, one after the other; attention and convolution are one
  batched operation each.
- Maximum path length: measured. For a stack of L layers (random weights), output position 0
  depends on input position n-1 when the gradient of the one with respect to the other is not zero;
  the path length is the smallest such L. For the recurrence the path runs through its steps inside
  one layer: the number of cell applications between reading position 0 and writing position n-1,
  counted on an unrolled cell.
- Crossover: the smallest measured n at which self-attention takes longer than the recurrent layer
  at the same d (the paper: self-attention is faster when n < d).

Layers are torch's own where they exist (`nn.LSTM`, `nn.Conv1d`); self-attention is multi-head
attention written out as matrix products (so that the FLOP counter sees them; the model's fused
`F.scaled_dot_product_attention` is not counted on CPU), and restricted self-attention the same
attention over a band of neighbourhood r; the dilated convolution doubles as the O(log_k n) path of §4.
`write` measures a `table1:` setting and writes the table as the paper prints it, our rows under its
rows (Markdown and an HTML page, as Tables 2-4 are written: aiayn.report.notes), every column in its
CSV, and its figure.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import torch
import torch.nn as nn

from aiayn.io import atomic_paths, together, writable
from aiayn.report.compact import OURS, ours
from aiayn.report.figures import pyplot, save
from aiayn.report.format import footer, html_of, markdown_of, paragraphs, to_csv

# the paper's Table 1, its rows in its order (n: sequence length, d: representation dimension, k: kernel size,
# r: neighbourhood): layer type, complexity per layer, sequential operations, maximum path length
COLUMNS = ("Layer Type", "Complexity per Layer", "Sequential Operations", "Maximum Path Length")
PAPER = {
    "self-attention": ("Self-Attention", "O(n²·d)", "O(1)", "O(1)"),
    "recurrent": ("Recurrent", "O(n·d²)", "O(n)", "O(n)"),
    "convolutional": ("Convolutional", "O(k·n·d²)", "O(1)", "O(log_k(n))"),
    "restricted self-attention": ("Self-Attention (restricted)", "O(r·n·d)", "O(1)", "O(n/r)"),
}
SEPARABLE = ("O(k·n·d + n·d²)", "O(1)", "O(log_k(n))")  # §4's separable convolution: its text, not its table
# what each measured layer is (the first words of its note)
ABOUT = {
    "self-attention": "Multi-head self-attention ({heads} heads) written out as matrix products; its FLOPs are the "
    "attention's own (Q·K^T and the weighted sum of V), the four position-wise projections (n·d² each) left out of "
    "them as the paper counts, not of its time",
    "recurrent": "torch's nn.LSTM; its FLOPs counted on its cell unrolled over the n steps (the fused kernel is "
    "not counted); its path: the cell steps from reading position 0 to writing position n-1",
    "convolutional": "torch's nn.Conv1d, kernel k = {k}; its path through k-ary dilated layers (dilation k^i, the "
    "paper's O(log_k(n))); through contiguous layers (O(n/k)): {contiguous}",
    "separable convolutional": "§4's separable convolution (depthwise, kernel k = {k}, then pointwise), "
    "O(k·n·d + n·d²) in §4's text and no row of the paper's table; its path is not measured",
    "restricted self-attention": "The same attention over a band of neighbourhood r = {r} (2r + 1 positions), "
    "computed on the band only",
}
CSV_NOTE = (
    "layer; paper_complexity, paper_sequential, paper_path: the paper's cells; n_exponent_flops, d_exponent_flops: "
    "the fitted exponents of n and d, beside paper_n_exponent, paper_d_exponent, those the paper's complexity "
    "implies; n_exponent_time: of the wall time; sequential_ops and path_length: measured, at their n (the "
    "convolution's path both dilated and contiguous); flops_at_max_n, seconds_at_max_n: one layer's forward pass "
    "at the largest n."
)
# exponents of n and d the paper's complexities imply
PAPER_EXPONENTS = {
    "self-attention": (2, 1),
    "recurrent": (1, 2),
    "convolutional": (1, 2),
    "separable convolutional": (1, 2),  # k n d + n d^2 (§4): the pointwise part dominates
    "restricted self-attention": (1, 1),
}
KINDS = ("self-attention", "recurrent", "convolutional", "separable convolutional", "restricted self-attention")


class SelfAttention(nn.Module):
    """Multi-head self-attention (§3.2): softmax(Q K^T / sqrt(d_k)) V over all n positions, written
    out as matrix products so that torch's FLOP counter sees them (the fused CPU kernel is not
    counted). With `radius` r: restricted self-attention, each position attending to the 2r + 1
    around it, computed on that band only (keys unfolded per position), O(r n d)."""

    def __init__(self, d: int, heads: int, radius: int | None = None):
        super().__init__()
        self.h, self.radius = heads, radius
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (1, n, d)
        B, n, d = x.shape
        h, dk = self.h, d // self.h
        q, k, v = (w(x).view(B, n, h, dk).transpose(1, 2) for w in (self.W_q, self.W_k, self.W_v))  # (B, h, n, dk)
        if self.radius is None:
            weights = (q @ k.transpose(-1, -2) / math.sqrt(dk)).softmax(-1)  # (B, h, n, n)
            out = weights @ v
        else:
            r = self.radius
            band = 2 * r + 1
            pad = nn.functional.pad  # keys and values of positions i - r .. i + r, zeros outside
            kb = pad(k, (0, 0, r, r)).unfold(2, band, 1)  # (B, h, n, dk, band)
            vb = pad(v, (0, 0, r, r)).unfold(2, band, 1)
            scores = (q.unsqueeze(-2) @ kb).squeeze(-2) / math.sqrt(dk)  # (B, h, n, band)
            i = torch.arange(n, device=x.device)[:, None] + torch.arange(-r, r + 1, device=x.device)
            scores = scores.masked_fill(((i < 0) | (i >= n))[None, None], float("-inf"))
            out = (scores.softmax(-1).unsqueeze(-2) @ vb.transpose(-1, -2)).squeeze(-2)  # (B, h, n, dk)
        return self.W_o(out.transpose(1, 2).reshape(B, n, d))


class Recurrent(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lstm = nn.LSTM(d, d, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]

    def unrolled(self, x: torch.Tensor) -> torch.Tensor:
        """The same layer, one LSTMCell step per position (n dependent steps)."""
        cell = nn.LSTMCell(self.lstm.input_size, self.lstm.hidden_size)
        cell.weight_ih, cell.weight_hh = self.lstm.weight_ih_l0, self.lstm.weight_hh_l0
        cell.bias_ih, cell.bias_hh = self.lstm.bias_ih_l0, self.lstm.bias_hh_l0
        h = c = x.new_zeros(x.size(0), self.lstm.hidden_size)
        out = []
        for t in range(x.size(1)):
            h, c = cell(x[:, t], (h, c))
            out.append(h)
        return torch.stack(out, 1)


class Convolution(nn.Module):
    """Kernel k over the positions, "same" padding; separable: depthwise k, then pointwise (§4);
    dilation: the k-ary dilated convolutions of the O(log_k n) path."""

    def __init__(self, d: int, k: int, separable: bool = False, dilation: int | None = None):
        super().__init__()
        # centered ("same") for a plain kernel; a dilated one (a layer of a k-ary dilated stack, its
        # dilation k^i) looks ahead only, offsets 0, dil, .., (k-1) dil, as WaveNet-style stacks do,
        # so that L layers reach every offset below k^L
        self.pad = ((k - 1) // 2, (k - 1) // 2) if dilation is None else (0, dilation * (k - 1))
        dilation = dilation or 1
        if separable:
            self.conv = nn.Sequential(nn.Conv1d(d, d, k, dilation=dilation, groups=d), nn.Conv1d(d, d, 1))
        else:
            self.conv = nn.Conv1d(d, d, k, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(nn.functional.pad(x.transpose(1, 2), self.pad)).transpose(1, 2)


def make(kind: str, d: int, *, k: int, r: int, heads: int = 8, dilation: int | None = None) -> nn.Module:
    heads = math.gcd(heads, d)
    return {
        "self-attention": lambda: SelfAttention(d, heads),
        "restricted self-attention": lambda: SelfAttention(d, heads, radius=r),
        "recurrent": lambda: Recurrent(d),
        "convolutional": lambda: Convolution(d, k, dilation=dilation),
        "separable convolutional": lambda: Convolution(d, k, separable=True),
    }[kind]()


@torch.no_grad()
def flops(layer: nn.Module, n: int, d: int) -> int:
    """Forward FLOPs by torch's counter. nn.LSTM's fused kernel is not counted: its FLOPs are
    counted on an LSTMCell with its weights, unrolled over the n steps (the same arithmetic)."""
    # its import warns on a CUDA build without triton that triton kernels go uncounted: none runs here
    logging.getLogger("torch.utils.flop_counter").setLevel(logging.ERROR)
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randn(1, n, d)
    with FlopCounterMode(display=False) as counter:
        if isinstance(layer, Recurrent):
            layer.unrolled(x)
        else:
            layer(x)
    total = counter.get_total_flops()
    if isinstance(layer, SelfAttention):  # Table 1 counts the attention itself, not the projections
        with FlopCounterMode(display=False) as projections:
            for w in (layer.W_q, layer.W_k, layer.W_v, layer.W_o):
                w(x)
        total -= projections.get_total_flops()
    return total


@torch.no_grad()
def seconds(layer: nn.Module, n: int, d: int, repeats: int = 3) -> float:
    x = torch.randn(1, n, d)
    layer(x)  # warm-up
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        layer(x)
        best = min(best, time.perf_counter() - start)
    return best


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-12)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def depends(stack: list[nn.Module], n: int, d: int) -> bool:
    """Whether output position 0 of the stack depends on input position n-1 (a non-zero gradient)."""
    x = torch.randn(1, n, d, requires_grad=True)
    y = x
    for layer in stack:
        y = layer(y)
    (grad,) = torch.autograd.grad(y[0, 0].sum(), x)
    return bool(grad[0, n - 1].abs().sum() > 0)


def path_length(kind: str, n: int, *, k: int, r: int, d: int = 8) -> int:
    """Layers (or, for the recurrence, cell steps) on the shortest path from input n-1 to output 0."""
    torch.manual_seed(0)
    if kind == "recurrent":
        return recurrent_steps(n, d)
    stack: list[nn.Module] = []
    limit = n + 1
    while len(stack) < limit:
        dilation = k ** len(stack) if kind == "dilated convolutional" else None
        if dilation is not None and dilation > k * n:
            break  # wider layers cannot reach further within n positions
        layer_kind = "convolutional" if kind == "dilated convolutional" else kind
        stack.append(make(layer_kind, d, k=k, r=r, heads=2, dilation=dilation))
        if depends(stack, n, d):
            return len(stack)
    raise RuntimeError(f"{kind}: no path within {limit} layers")


def recurrent_steps(n: int, d: int) -> int:
    """Cell applications between reading input 0 and writing output n-1, on an unrolled LSTM cell:
    the output at step t is written by the t-th application after the one that read input 0."""
    cell = nn.LSTMCell(d, d)
    x = torch.randn(n, d, requires_grad=True)
    h = c = torch.zeros(1, d)
    steps = 0
    for t in range(n):
        h, c = cell(x[t : t + 1], (h, c))
        steps += 1
        if t == n - 1:
            (grad,) = torch.autograd.grad(h.sum(), x)
            assert grad[0].abs().sum() > 0  # output n-1 does depend on input 0
    return steps  # applications from reading x_0 (the first) to writing y_{n-1} (the last), inclusive


def sequential_operations(kind: str, n: int) -> int:
    """Dependent steps over n positions, by construction: the recurrence's cell calls, else one."""
    return n if kind == "recurrent" else 1


@dataclass
class Layer:
    """What was measured of one layer type."""

    kind: str
    n_exponent: float  # of its FLOPs against n, at d = d_model
    d_exponent: float  # of its FLOPs against d, at the middle n
    time_exponent: float  # of its wall time against n
    sequential: int  # dependent steps at the largest n
    paths: dict[int, int]  # n -> path length (the convolution's: through k-ary dilated layers); none measured: {}
    contiguous: dict[int, int]  # the convolution's path through contiguous layers; else {}
    flops_at_max_n: float
    seconds_at_max_n: float


@dataclass
class Result:
    layers: list[Layer]
    curves: dict  # kind -> {"n": [...], "flops": [...], "seconds": [...]}
    crossover_n: int | None
    d: int


def measure(*, d: int, ns: list[int], ds: list[int], k: int, r: int, path_ns: list[int], repeats: int = 3) -> Result:
    torch.manual_seed(0)
    layers, curves = [], {}
    for kind in KINDS:
        layer = make(kind, d, k=k, r=r).eval()
        f = [flops(layer, n, d) for n in ns]
        s = [seconds(layer, n, d, repeats) for n in ns]
        width = [flops(make(kind, w, k=k, r=r).eval(), ns[len(ns) // 2], w) for w in ds]
        curves[kind] = {"n": ns, "flops": f, "seconds": s}
        path_kind = "dilated convolutional" if kind == "convolutional" else kind
        measured = kind != "separable convolutional"
        layers.append(
            Layer(
                kind,
                slope(ns, f),
                slope(ds, width),
                slope(ns, s),
                sequential_operations(kind, ns[-1]),
                {n: path_length(path_kind, n, k=k, r=r) for n in path_ns} if measured else {},
                {n: path_length("convolutional", n, k=k, r=r) for n in path_ns} if kind == "convolutional" else {},
                f[-1],
                s[-1],
            )
        )
    attention, recurrent = curves["self-attention"]["seconds"], curves["recurrent"]["seconds"]
    crossover = next((n for n, a, b in zip(ns, attention, recurrent) if a > b), None)
    return Result(layers, curves, crossover, d)


# -- the table ----------------------------------------------------------------------------------
def at(values: dict[int, int]) -> str:
    """Path lengths at their n: "8 at n=8, 16 at n=16"."""
    return ", ".join(f"{v} at n={n}" for n, v in values.items())


def rows(result: Result, ns: list[int]) -> list[dict]:
    """Every column of every layer: what table1.csv holds."""
    out = []
    for m in result.layers:
        paper = PAPER.get(m.kind) or ("", *SEPARABLE)
        path = at(m.paths) or "-"
        if m.contiguous:
            path += f" (dilated k^i); contiguous: {at(m.contiguous)}"
        out.append(
            {
                "layer": m.kind,
                "paper_complexity": paper[1],
                "n_exponent_flops": f"{m.n_exponent:.2f}",
                "paper_n_exponent": PAPER_EXPONENTS[m.kind][0],
                "d_exponent_flops": f"{m.d_exponent:.2f}",
                "paper_d_exponent": PAPER_EXPONENTS[m.kind][1],
                "n_exponent_time": f"{m.time_exponent:.2f}",
                "sequential_ops": f"{m.sequential} at n={ns[-1]}",
                "paper_sequential": paper[2],
                "path_length": path,
                "paper_path": paper[3],
                "flops_at_max_n": f"{m.flops_at_max_n:.3g}",
                "seconds_at_max_n": f"{m.seconds_at_max_n:.4f}",
            }
        )
    return out


def block(result: Result, settings: dict) -> tuple[list[dict], list[str]]:
    """(lines, notes): the paper's Table 1, each of its rows with ours under it in its columns (the
    separable convolution, which §4 names and the table does not, ours alone at the end), and our
    rows' numbered notes."""
    k, r, n_max = settings["k"], settings["r"], settings["n"][-1]
    lines, notes = [], []
    for m in sorted(result.layers, key=lambda m: list(PAPER).index(m.kind) if m.kind in PAPER else len(PAPER)):
        if m.kind in PAPER:
            lines.append(dict(zip(COLUMNS, PAPER[m.kind])))
        notes.append(
            f"{ABOUT[m.kind].format(k=k, r=r, heads=math.gcd(8, result.d), contiguous=at(m.contiguous))}; its wall "
            f"time grows as n^{m.time_exponent:.2f}; at n = {n_max}: {m.flops_at_max_n:.3g} FLOPs in "
            f"{m.seconds_at_max_n:.4f} s."
        )
        label = "ours" if m.kind in PAPER else "ours: separable conv."
        lines.append(
            {
                OURS: True,
                COLUMNS[0]: ours(label, [len(notes)]),
                COLUMNS[1]: f"n^{m.n_exponent:.2f}·d^{m.d_exponent:.2f}",
                COLUMNS[2]: f"{m.sequential:,}",
                COLUMNS[3]: ", ".join(map(str, m.paths.values())) or "not measured",
            }
        )
    return lines, notes


def document(result: Result, settings: dict) -> list[tuple[str, object]]:
    """Table 1 as parts, in the order they are read, as aiayn.report.notes writes Tables 2-4: the
    title, the paper's table with our rows in it, how to read it, our rows' notes, how it was
    measured, what the CSV's columns mean, aiayn's version."""
    ns, ds = settings["n"], settings["d"]
    lines, row_notes = block(result, settings)
    cross = (
        f"self-attention first took longer than the recurrent layer at n = {result.crossover_n}"
        if result.crossover_n
        else f"self-attention was faster than the recurrent layer at every n measured (up to {ns[-1]})"
    )
    return [
        ("title", "Table 1: per-layer complexity, sequential operations and maximum path length, measured"),
        ("table", (lines, [*COLUMNS], set())),
        (
            "p",
            "The paper's rows (n: the sequence length, d: the representation dimension, k: the kernel size, r: the "
            "neighbourhood of restricted self-attention), ours under each: its complexity per layer as the FLOPs of "
            f"one layer, n^a·d^b with a fitted over n = {', '.join(map(str, ns))} at d = {result.d} and b over d = "
            f"{', '.join(map(str, ds))} at n = {ns[len(ns) // 2]}; its sequential operations at n = {ns[-1]}; its "
            f"maximum path length at n = {', '.join(map(str, settings['path_n']))}. [n]: the number of a row's note "
            "below. `table1.csv` has every column (below); `table1.png` draws FLOPs and wall time against n.",
        ),
        ("ol", row_notes),
        (
            "p",
            f"Measured on the CPU that ran it, kernel k = {settings['k']}, neighbourhood r = {settings['r']} "
            "(aiayn.report.table1). Exponents: least-squares slopes on log-log axes of FLOPs (torch's FLOP counter) "
            "and of wall time (the best of a few runs). Sequential operations: the recurrence's cell calls, by "
            "construction. Path length: the smallest stack of layers whose output position 0 depends on input "
            "position n-1 (a non-zero gradient); for the recurrence, the cell steps from reading position 0 to "
            f"writing position n-1. Crossover, in this machine's wall time when it ran, at d = {result.d}: {cross} "
            "(the paper: self-attention is faster while n < d). It moves between runs, thread counts and machines; "
            "the FLOP exponents do not.",
        ),
        ("h2", "The CSV's columns (table1.csv)"),
        ("p", CSV_NOTE),
        *paragraphs(footer()),
    ]


def figure(result: Result, path) -> None:
    fig, axes = pyplot().subplots(1, 2, figsize=(10, 4))
    for kind, c in result.curves.items():
        axes[0].loglog(c["n"], c["flops"], marker="o", label=kind)
        axes[1].loglog(c["n"], c["seconds"], marker="o", label=kind)
    axes[0].set(xlabel="n (positions)", ylabel="FLOPs per layer", title=f"FLOPs, d = {result.d}")
    axes[1].set(xlabel="n (positions)", ylabel="seconds per layer (forward)", title=f"wall time, d = {result.d}")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save(fig, path, dpi=100)


def write(settings: dict, *, out_md, out_csv, out_html, figure_path, threads: int = 0, log=print) -> Result:
    """Measure Table 1 with `settings` (the complete `table1:` settings) on `threads` torch threads
    (0: torch's default) and write it as Markdown, CSV and an HTML page, and its figure."""
    writable(out_md, out_csv, out_html, figure_path)  # before minutes of measuring
    if threads:
        torch.set_num_threads(threads)
    settings = {**settings, "n": sorted(settings["n"]), "d": sorted(settings["d"])}
    result = measure(
        d=settings["d_model"],
        ns=settings["n"],
        ds=settings["d"],
        k=settings["k"],
        r=settings["r"],
        path_ns=settings["path_n"],
        repeats=settings["repeats"],
    )
    table = rows(result, settings["n"])
    parts = document(result, settings)
    with together():  # the table and its figure, or none of them
        with atomic_paths(out_md, out_csv, out_html) as (md, csv, page):
            md.write_text(markdown_of(parts), encoding="utf-8")
            csv.write_text(to_csv(table), encoding="utf-8")
            page.write_text(html_of(parts), encoding="utf-8")
        figure(result, figure_path)
    for row in table:
        log(
            f"{row['layer']}: n-exponent {row['n_exponent_flops']} (paper {row['paper_n_exponent']}), "
            f"d-exponent {row['d_exponent_flops']} (paper {row['paper_d_exponent']}), path {row['path_length']}"
        )
    return result
