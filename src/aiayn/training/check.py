"""The check stage: the paper's known failure modes, measured on an experiment's own model before
it trains (seconds on a CPU, so that a mistake never costs a GPU hour).

The model is the experiment's as configured (its sizes, its vocabularies, drawn from its seed as
the trainer draws it), run on a few pairs of its own training data, in eval mode. Each check
measures a figure, compares it with what the paper implies and says, when it fails, the usual cause:

- `future_leakage`: changing the target tokens after position i changes no output at or before i,
  in every decoder layer (the causal mask of §3.2.3; a mask filled with 0 instead of -inf leaks);
- `padding`: padding appended to the source changes no encoder or decoder output (the encoder's
  padding mask);
- `attention_logits`: per head of every attention, the variance of the logits Q K^T / sqrt(d_k) at
  initialisation (their mean square: about 1, §3.2.1's footnote 4; the median over heads is
  bounded, single heads of deep layers stray) and the scale the attention really applies (read
  back from the kernel's own weights), which must be 1/sqrt(d_k) (not 1/sqrt(d_model), 1/d_model);
- `positional_encoding`: one token at every position through each embedding: the positional
  component is the table the settings give (§3.5's sinusoids, or the learned one) added once, not
  twice, not never, not scaled with the embeddings;
- `embedding_scale`: the standard deviation of the scaled token embeddings (x sqrt(d_model), §3.4)
  over that of the sinusoidal positional encoding (§3.5): of one order (sqrt(2) at initialisation),
  not drowned by it nor drowning it;
- `shifted_input`: the decoder's input is the target shifted right, BOS first (`[BOS] y[:-1]`);
- `tied_weights`: the embeddings and the pre-softmax projection are one matrix (§3.4): the logits
  move with a changed embedding row, and with a shared vocabulary the source embedding is the
  same tensor;
- `schedule`: the learning rate the trainer's own scheduler gives each update peaks at update
  warmup_steps with d_model^-0.5 · warmup_steps^-0.5 (x lr_scale), §5.3's formula;
- `label_smoothing`: the target distribution the loss trains towards sums to 1 and puts 1 - eps_ls
  on the reference token (§5.4), read from the loss's gradient.

`run_checks` takes the model, the batch and the loss and schedule as arguments, so that the tests
run each check on a model broken the way practitioners break it, and see it fail there.
`check_job`, the stage, adds the checks of aiayn.training.step_check (the same measures on one
real update of the trainer) and writes check.json when every one passed; what a check is, and the
readings both kinds share: aiayn.training.measure.
"""

from __future__ import annotations

import gc
import math

import numpy as np
import torch

from aiayn import described
from aiayn.data import binary
from aiayn.data.binary import BOS, EOS, PAD, Corpus
from aiayn.errors import UserError
from aiayn.io import writable
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import MultiHeadAttention, Transformer, build
from aiayn.runtime import records
from aiayn.study import resolve
from aiayn.study.code import checked_code
from aiayn.training.batching import Batch, collate
from aiayn.training.measure import LEAK_TOLERANCE, SMOOTHING_TOLERANCE, Check, smoothing_cause, trained_towards
from aiayn.training.objective import label_smoothed_loss, optimizer_and_schedule
from aiayn.training.reference import determinism, reference_check, residual_dropout
from aiayn.training.step_check import composed_step
from aiayn.training.train import check_positions

PAIRS = 4  # training pairs the checks run on
LONGEST = 64  # pieces per side at most (a learned position table of the demo's size holds them)
# how far a measured figure may stray from the paper's before a check fails
SCALE_TOLERANCE = 0.05  # applied attention scale x sqrt(d_k), around 1
LOGIT_VARIANCE = (1 / 16, 16.0)  # the median head's: below, softmax is near uniform; above, near one-hot
EMBEDDING_RATIO = (math.sqrt(2) / 3, 3 * math.sqrt(2))  # sqrt(2) at initialisation (N(0, 1) over PE's 1/sqrt(2))


# -- what the checks run on ----------------------------------------------------------------------------
def sample_pairs(corpus: Corpus, n: int = PAIRS, longest: int = LONGEST) -> np.ndarray:
    """The first `n` pairs of `corpus` of 3 to `longest` pieces on both sides (or, failing that, of
    at least one), in corpus order."""
    src, tgt = corpus.src_lengths, corpus.tgt_lengths
    for low in (3, 1):
        fits = np.flatnonzero((src >= low) & (tgt >= low) & (src <= longest) & (tgt <= longest))
        if len(fits):
            return fits[:n]
    raise UserError(f"{corpus.path}: no sentence pair of 1 to {longest} pieces per side to check the model on")


def decoder_outputs(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> list[torch.Tensor]:
    """Every decoder layer's output and the logits of one forward pass."""
    seen: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda m, i, out: seen.append(out.detach())) for layer in model.decoder]
    try:
        logits = model(src, tgt_in)
    finally:
        for h in hooks:
            h.remove()
    return [*seen, logits.detach()]


def _change(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest change from a to b, relative to a's largest magnitude (at least 1)."""
    if a.numel() == 0:
        return 0.0
    return float((a - b).abs().max() / max(1.0, float(a.abs().max())))


# -- the checks ----------------------------------------------------------------------------------------------
def future_leakage(model: Transformer, batch: Batch, generator: torch.Generator) -> Check:
    V, T = model.cfg.tgt_vocab, batch.tgt_in.size(1)
    before = decoder_outputs(model, batch.src, batch.tgt_in)
    worst, where, first = 0.0, (0, 0), None  # first: (layer, position, change) of the lowest layer that leaks
    positions = [i for i in sorted({0, (T - 1) // 2, T - 2}) if 0 <= i < T - 1]
    for i in positions:
        changed = batch.tgt_in.clone()
        low = min(EOS + 1, V - 1)
        changed[:, i + 1 :] = torch.randint(low, V, changed[:, i + 1 :].shape, generator=generator)
        after = decoder_outputs(model, batch.src, changed)
        for layer, (a, b) in enumerate(zip(before, after)):
            change = _change(a[:, : i + 1], b[:, : i + 1])
            if change > worst:
                worst, where = change, (layer, i)
            if change > LEAK_TOLERANCE and (first is None or layer < first[0]):
                first = (layer, i, change)
    layers = len(before) - 1
    said = ", ".join(map(str, positions))
    if first is not None:  # the layer where it starts: each layer above reads that one's output
        at = "the logits" if first[0] == layers else f"decoder layer {first[0] + 1}'s output"
        where = (first[0], first[1])
        origin = "the projection" if first[0] == layers else f"decoder layer {first[0] + 1} (its self-attention)"
        figure = (
            f"changing the target after position {first[1]} changed {at} at or before it by {first[2]:.2g}, "
            f"first in {origin}"
        )
    else:
        figure = f"changing the target after positions {said} changed no output at or before them (largest {worst:.2g})"
    return Check(
        "future_leakage",
        worst <= LEAK_TOLERANCE,
        figure,
        f"no change (at most {LEAK_TOLERANCE:g}) in any of the {layers} decoder layers",
        "the decoder's causal mask filled with 0 instead of -inf, or missing: training sees the future, "
        "decoding repeats, reorders or never stops",
        {"largest_change": worst, "layer": where[0] + 1, "position": where[1]},
    )


def _layer_outputs(layers, run) -> list[torch.Tensor]:
    """The output of each module of `layers` during `run()`."""
    seen: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda m, i, out: seen.append(out.detach())) for layer in layers]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    return seen


def padding(model: Transformer, batch: Batch) -> Check:
    """Padding appended to the source changes nothing; where it does, the first layer it changes is
    named: an encoder layer (its self-attention reads the padding) or, the encoder untouched, a
    decoder layer (its encoder-decoder attention does)."""
    src = batch.src
    padded = torch.cat([src, torch.full((src.size(0), 3), PAD, dtype=src.dtype)], dim=1)
    real = (src != PAD).unsqueeze(-1)
    T = src.size(1)
    enc_before = _layer_outputs(model.encoder, lambda: model.encode(src))
    enc_after = _layer_outputs(model.encoder, lambda: model.encode(padded))
    enc_changes = [_change(a * real, b[:, :T] * real) for a, b in zip(enc_before, enc_after)]
    memory, _ = model.encode(src)
    memory_padded, _ = model.encode(padded)
    enc = _change(memory * real, memory_padded[:, :T] * real)
    dec_before = _layer_outputs(model.decoder, lambda: model(src, batch.tgt_in))
    dec_after = _layer_outputs(model.decoder, lambda: model(padded, batch.tgt_in))
    dec_changes = [_change(a, b) for a, b in zip(dec_before, dec_after)]
    dec = _change(model(src, batch.tgt_in), model(padded, batch.tgt_in))
    worst = max(enc, dec)
    leaking_enc = [n for n, c in enumerate(enc_changes) if c > LEAK_TOLERANCE]
    leaking_dec = [n for n, c in enumerate(dec_changes) if c > LEAK_TOLERANCE]
    if leaking_enc:
        where = f"encoder layer {leaking_enc[0] + 1}'s self-attention"
        cause = f"the padding mask not applied in {where} (it attends to the padding): results depend on the batch"
    elif leaking_dec:
        where = f"decoder layer {leaking_dec[0] + 1}'s encoder-decoder attention"
        cause = (
            f"the source padding mask not passed to {where} (the encoder's output at the padding is read): "
            "results depend on the batch"
        )
    else:
        where, cause = "", "the padding mask not applied (attention reads the padding): results depend on the batch"
    figure = f"3 padding tokens appended to the source changed the encoder output by {enc:.2g}, the logits by {dec:.2g}"
    if where:
        figure += f", first in {where}"
    return Check(
        "padding",
        worst <= LEAK_TOLERANCE,
        figure,
        f"no change (at most {LEAK_TOLERANCE:g})",
        cause,
        {"encoder_change": enc, "logits_change": dec, "where": where},
    )


def _caught_attention(model: Transformer, batch: Batch):
    """One forward pass with every attention's queries, keys, mask and causality caught, and the
    inputs each attention module was called with."""
    caught: list[tuple[str, MultiHeadAttention, tuple]] = []
    inputs: dict[str, tuple] = {}  # what each attention was called with: its queries' and keys' inputs
    originals, hooks = {}, []
    for name, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            originals[name] = module.attend

            def spy(q, k, v, mask, causal=False, _name=name, _module=module, _attend=module.attend):
                caught.append((_name, _module, (q, k, mask, causal)))
                return _attend(q, k, v, mask, causal)

            module.attend = spy
            hooks.append(module.register_forward_pre_hook(lambda m, args, _name=name: inputs.setdefault(_name, args)))
    try:
        model(batch.src, batch.tgt_in)
    finally:
        for h in hooks:
            h.remove()
        for name, module in model.named_modules():
            if name in originals:
                del module.attend  # the class's method again
    return caught, inputs


def applied_weights(module: MultiHeadAttention, q, k, mask, causal) -> torch.Tensor:
    """The weights `module`'s own kernel applies, read by passing V = I: (B, h, T, S)."""
    S = k.size(-2)
    eye = torch.eye(S, dtype=q.dtype).expand(*k.shape[:-1], S)  # (B, h, S, S)
    return module.kernel(q, k, eye, mask, causal, 0.0)


def attention_weights(model: Transformer, batch: Batch) -> Check:
    """Every attention's weights, as its kernel applies them, are a distribution over the keys
    (§3.2.1's softmax): finite, each query's summing to 1."""
    caught, _ = _caught_attention(model, batch)
    worst, where, finite, over_queries = 0.0, "", True, True
    for name, module, (q, k, mask, causal) in caught:
        w = applied_weights(module, q, k, mask, causal).double()
        if not torch.isfinite(w).all():
            finite, where = False, where or name
            cols = w.nan_to_num(0.0).sum(-2)
        else:
            cols = w.sum(-2)
        off = float((w.sum(-1) - 1).abs().nan_to_num(math.inf).max())
        if off > worst:
            worst, where = off, name
        used = cols > 1e-6
        over_queries &= bool(used.any()) and float((cols[used] - 1).abs().max()) < 1e-3
    passed = finite and worst <= 1e-3
    if passed:
        cause = ""
    elif over_queries:
        cause = "the softmax taken over the queries (dim -2), not the keys: each key's weights sum to 1 instead"
    elif not finite:
        cause = (
            "weights that are not finite: a softmax over a row with no key left, or over the wrong axis "
            "(a column masked whole divides 0 by 0)"
        )
    else:
        cause = "weights that are no distribution over the keys: no softmax, or a mask applied after it"
    return Check(
        "attention_weights",
        passed,
        f"the weights every attention applies sum over the keys to 1 within {worst:.2g}"
        + ("" if finite else ", some not finite")
        + (f" (furthest: {where})" if not passed else ""),
        "1 for every query (a softmax over the keys, §3.2.1)",
        cause,
        {"largest_error": worst, "finite": finite, "where": where},
    )


def attention_logits(model: Transformer, batch: Batch) -> Check:
    """Runs the model once with every attention's queries and keys caught; each attention's weights
    are then recomputed by its own kernel with V = I (so that they are the weights it applies,
    whatever it does), their logits read back as log-weights centred per query."""
    caught, inputs = _caught_attention(model, batch)
    variances, scales, before = {}, {}, {}
    for name, module, (q, k, mask, causal) in caught:
        # a scale applied to the queries or keys before the kernel (a second 1/sqrt(d_k)) counts too:
        # q and k against the projections of the attention's own inputs
        pre = 1.0
        if name in inputs and len(inputs[name]) >= 2:
            x, memory = inputs[name][0], inputs[name][1]
            for got, ref in (
                (q, module.split(module.W_q(x), module.d_k)),
                (k, module.split(module.W_k(memory), module.d_k)),
            ):
                if got.shape == ref.shape and float(ref.double().square().sum()) > 0:
                    pre *= float((got.double() * ref.double()).sum() / ref.double().square().sum())
        before[name] = pre
        weights = applied_weights(module, q, k, mask, causal)  # (B, h, T, S)
        raw = q @ k.transpose(-1, -2)  # unscaled dot products
        kept = weights > 0
        logits = torch.where(kept, weights.clamp_min(1e-30).log(), 0.0)
        n = kept.sum(-1, keepdim=True).clamp_min(1)
        rows = (kept.sum(-1) > 1).unsqueeze(-1)  # queries with at least two keys
        # per query, log-weights are the logits less a constant: their spread over the keys, over
        # that of the unscaled dot products, is the square of the scale applied
        log_var = _row_variance(logits, kept, n, rows)
        raw_var = _row_variance(torch.where(kept, raw, 0.0), kept, n, rows)
        scale = float((log_var.sum() / raw_var.sum()).sqrt())
        scales[name] = scale * pre * math.sqrt(module.d_k)
        # footnote 4's variance: of the logits as applied, over every (query, key) pair of a head
        variances[name] = [float(raw[:, j][kept[:, j]].double().square().mean() * scale**2) for j in range(raw.size(1))]
    all_var = [v for vs in variances.values() for v in vs]
    median = float(np.median(all_var))
    low, high = LOGIT_VARIANCE
    off_scale = {n: s for n, s in scales.items() if abs(s - 1) > SCALE_TOLERANCE}
    worst_scale = max(scales.items(), key=lambda kv: abs(kv[1] - 1))
    figure = (
        f"median logit variance per head {median:.3g} ({min(all_var):.2g}..{max(all_var):.2g} over "
        f"{len(all_var)} heads); applied scale x sqrt(d_k) = {worst_scale[1]:.4g} ({worst_scale[0]})"
    )
    d_k, d_model = model.cfg.d_k, model.cfg.d_model
    cause = (
        scale_cause(worst_scale[1], d_k, d_model)
        if off_scale
        else "an initialisation far from unit variance (projection weights too large or too small)"
    )
    return Check(
        "attention_logits",
        not off_scale and low <= median <= high,
        figure,
        f"a median variance about 1 ({low:g}..{high:g}) and scale 1/sqrt(d_k) = 1/{math.sqrt(d_k):.4g} exactly",
        cause,
        {"median_variance": median, "variance": variances, "scale_times_sqrt_dk": scales, "before_kernel": before},
    )


def scale_cause(measured: float, d_k: int, d_model: int) -> str:
    """The usual mistake whose scale (times sqrt(d_k)) is nearest the `measured` one."""
    tail = "softmax saturates or flattens, the loss diverges or learns slowly"
    known = [
        (
            1 / math.sqrt(d_k),
            f"the dot products scaled twice, by 1/sqrt(d_k) before the kernel and again in it: {tail}",
        ),
        (math.sqrt(d_k), f"the dot products not scaled at all (no 1/sqrt(d_k)): {tail}"),
        (
            math.sqrt(d_k / d_model),
            f"the dot products scaled by d_model or sqrt(d_model) = {math.sqrt(d_model):.4g} "
            f"instead of sqrt(d_k): {tail}",
        ),  # fmt: skip
        (
            math.sqrt(d_k) / d_model,
            f"the dot products scaled by d_model or sqrt(d_model) = {math.sqrt(d_model):.4g} "
            f"instead of sqrt(d_k): {tail}",
        ),  # fmt: skip
    ]
    distance, said = min((abs(math.log(max(measured, 1e-30) / s)), c) for s, c in known)
    if distance > math.log(1.5):
        return f"the dot products scaled by {measured / math.sqrt(d_k):.4g} instead of 1/sqrt(d_k): {tail}"
    return said


def _row_variance(values, kept, n, rows) -> torch.Tensor:
    """Per head, the mean over queries (and batch) of the variance of `values` over the kept keys."""
    mean = (values * kept).sum(-1, keepdim=True) / n
    var = (((values - mean) * kept) ** 2).sum(-1, keepdim=True) / n
    per_head = (var * rows).sum(dim=(0, 2, 3)) / rows.sum(dim=(0, 2, 3)).clamp_min(1)
    return per_head.double()


def embedding_scale(model: Transformer, batch: Batch) -> Check:
    ratios = {}
    for side, embed, tokens in (("source", model.src_embed, batch.src), ("target", model.tgt_embed, batch.tgt_in)):
        out = embed(tokens)  # eval: no dropout
        positions = embed.positions(tokens.size(1), 0, tokens.device).expand_as(out)
        real = tokens != PAD
        ratios[side] = float((out - positions)[real].std() / positions[real].std())
    learned = model.cfg.positional == "learned"
    low, high = EMBEDDING_RATIO
    worst = max(ratios.items(), key=lambda kv: abs(math.log(kv[1])) if kv[1] > 0 else math.inf)
    passed = learned or all(low <= r <= high for r in ratios.values())
    figure = ", ".join(f"{side} {r:.3g}" for side, r in ratios.items())
    if learned:
        figure += " (learned positions: trained from a small initialisation, not bounded)"
    sqrt_d = math.sqrt(model.cfg.d_model)
    return Check(
        "embedding_scale",
        passed,
        f"std of the scaled embeddings over the positional encoding's: {figure}",
        f"of one order, {low:.2f}..{high:.2f} (sqrt(2) at initialisation)",
        f"the embeddings not multiplied by sqrt(d_model) = {sqrt_d:.4g}, so the positions drown them"
        if worst[1] < low
        else "the embeddings scaled twice, or drawn too wide, so they drown the positions",
        {"ratio": ratios},
    )


POSITIONS_TOLERANCE = 0.05  # the measured positional component's size over the table's, around 1


def paper_table(length: int, d_model: int) -> torch.Tensor:
    """§3.5's sinusoids, PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...),
    computed here on their own (float64), not by the model's code."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    rates = 10000.0 ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model))
    table[:, 0::2], table[:, 1::2] = np.sin(pos * rates), np.cos(pos * rates)
    return torch.from_numpy(table)


def positional_encoding(model: Transformer) -> Check:
    """The positional component of each side's embedding output, measured apart from the token's:
    one token at every position, so that out[p] - out[0] = PE[p] - PE[0] whatever the embedding
    does to the token. Its size over that of the table the settings imply (§3.5's sinusoids, or the
    learned table) is 1 when the positions are added once: 2 twice, 0 never, sqrt(d_model) scaled
    with the embeddings. (Sizes, not the values: the table's layout, sines and cosines interleaved
    or in halves, is a harmless rewrite.)"""
    cfg = model.cfg
    learned = cfg.positional == "learned"
    length = min(LONGEST, cfg.max_positions)
    ratios = {}
    for side, embed in (("source", model.src_embed), ("target", model.tgt_embed)):
        tokens = torch.full((1, length), min(EOS + 1, embed.weight.size(0) - 1), dtype=torch.long)
        with torch.no_grad():
            out = embed(tokens)[0].double()
        table = embed.learned.weight[:length].detach().double() if learned else paper_table(length, cfg.d_model)
        want = (table[1:] - table[0]).norm()
        ratios[side] = float((out[1:] - out[0]).norm() / want) if want > 0 else float("nan")
    worst = max(ratios.items(), key=lambda kv: abs(kv[1] - 1))
    passed = all(abs(r - 1) <= POSITIONS_TOLERANCE for r in ratios.values())
    r = worst[1]
    if r < 0.5:
        cause = (
            f"no positional encoding added to the {worst[0]} embeddings: the model cannot tell the order of the words"
        )
    elif abs(r - 2) < 0.25:
        cause = (
            f"the positional encoding added twice to the {worst[0]} embeddings (in the embedding and again after it)"
        )
    elif abs(math.log(r / math.sqrt(cfg.d_model))) < 0.2:
        cause = (
            f"the positional encoding scaled with the embeddings by sqrt(d_model) = {math.sqrt(cfg.d_model):.4g} "
            "(added before the scaling, not after)"
        )
    else:
        cause = f"the positional encoding added at {r:.3g} times the size of the table the settings give"
    table = "its learned table" if learned else "§3.5's sinusoids"
    return Check(
        "positional_encoding",
        passed,
        "size of the positional component over "
        + table
        + ": "
        + ", ".join(f"{side} {value:.4g}" for side, value in ratios.items()),
        f"1 (added once; within {POSITIONS_TOLERANCE:g})",
        cause,
        {"ratio": ratios, "table": "learned" if learned else "sinusoidal"},
    )


def shifted_input(batch: Batch) -> Check:
    rows = batch.tgt_out.size(0)
    good = 0
    for r in range(rows):
        out = batch.tgt_out[r]
        length = int((out != PAD).sum())  # target pieces + EOS
        ok = batch.tgt_in[r, 0] == BOS and torch.equal(batch.tgt_in[r, 1:length], out[: length - 1])
        good += bool(ok) and bool(out[length - 1] == EOS)
    return Check(
        "shifted_input",
        good == rows,
        f"{good} of {rows} rows' decoder input is [BOS] + the target without its last token",
        "every row",
        "the target input not shifted right ([BOS] y[:-1]): the decoder is shown the token it must "
        "predict, copies it in training and fails in decoding",
        {"rows": rows, "shifted": good},
    )


@torch.no_grad()
def tied_weights(model: Transformer, batch: Batch, generator: torch.Generator) -> Check:
    """A change d to row v of the target embedding must move the logits of v by exactly the final
    hidden states times d: the projection is then the embedding matrix."""
    weight = model.tgt_embed.weight
    v = weight.size(0) - 1
    hidden: list[torch.Tensor] = []
    hook = model.decoder_norm.register_forward_hook(lambda m, i, out: hidden.append(out))
    saved = weight[v].clone()
    delta = torch.randn(weight.size(1), generator=generator, dtype=weight.dtype)  # not constant: h sums to 0
    try:
        weight[v] += delta
        logits = model(batch.src, batch.tgt_in)[..., v]
    finally:
        weight[v] = saved
        hook.remove()
    h = hidden[-1]
    tied_error = _change(h @ (saved + delta), logits)
    untied_error = _change(h @ saved, logits)
    tensors = {id(model.tgt_embed.weight)}
    if model.cfg.shared_vocab:
        tensors.add(id(model.src_embed.weight))
    shared_ok = len(tensors) == 1
    projection_ok = tied_error < untied_error and tied_error <= 1e-3
    parts = [f"the logits follow a changed embedding row {'exactly' if projection_ok else 'not at all'}"]
    if model.cfg.shared_vocab:
        parts.append(f"source and target embeddings are {len(tensors)} tensor(s)")
    return Check(
        "tied_weights",
        projection_ok and shared_ok,
        "; ".join(parts),
        "one matrix for "
        + (
            "source and target embeddings and the projection"
            if model.cfg.shared_vocab
            else "the target embedding and the projection"
        ),
        "an untied copy (a separate nn.Linear projection, or a copied embedding): more parameters than "
        "the paper's and a weaker model",
        {"projection_error": tied_error, "untied_error": untied_error, "tensors": len(tensors)},
    )


def schedule(tr: dict, d_model: int, builder=optimizer_and_schedule) -> Check:
    warmup, scale = tr["warmup_steps"], tr["lr_scale"]
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer, scheduler = builder([param], tr, d_model, "cpu")
    rates = []
    for _ in range(2 * warmup):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()  # no gradient: changes nothing, keeps torch's order of the two
        scheduler.step()
    peak_step = int(np.argmax(rates)) + 1
    peak = rates[peak_step - 1]
    want = scale * d_model**-0.5 * warmup**-0.5
    close = math.isclose(peak, want, rel_tol=1e-6)
    return Check(
        "schedule",
        peak_step == warmup and close,
        f"the learning rate peaks at update {peak_step} with {peak:.6g}",
        f"update {warmup} with {want:.6g} (§5.3: d_model^-0.5 x warmup_steps^-0.5 x lr_scale {scale:g})",
        "no or too short a warmup, or the schedule counted from another step: early updates too large, "
        "the loss diverges",
        {"peak_step": peak_step, "peak": peak, "formula_step": warmup, "formula_peak": want},
    )


def label_smoothing(vocab: int, eps_ls: float, loss=label_smoothed_loss, seed: int = 0) -> Check:
    """The loss's gradient at random logits (`trained_towards`) gives the distribution it trains
    towards: its total weight (1 for a distribution) and its weight on the reference token."""
    target = min(EOS + 1, vocab - 1)
    drawn = torch.randn(1, 1, vocab, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    logits = drawn.clone().requires_grad_(True)
    loss(logits, torch.tensor([[target]]), eps_ls).backward()
    q = trained_towards(drawn[0, 0], logits.grad[0, 0], target)
    total, on_target = q.total, q.on_reference
    passed = abs(total - 1) <= SMOOTHING_TOLERANCE and abs(on_target - (1 - eps_ls)) <= SMOOTHING_TOLERANCE
    return Check(
        "label_smoothing",
        passed,
        f"the smoothed target sums to {total:.6g} with {on_target:.6g} on the reference token",
        f"1 with 1 - eps_ls = {1 - eps_ls:g} on it (§5.4)",
        smoothing_cause(total, on_target, eps_ls, vocab),
        {"sum": total, "on_target": on_target, "vocab": vocab},
    )


def loss_padding(vocab: int, eps_ls: float, loss=label_smoothed_loss, seed: int = 0) -> Check:
    """A padding target contributes nothing: the loss's gradient at its logits is 0."""
    target = torch.tensor([[min(EOS + 1, vocab - 1), PAD, min(EOS + 1, vocab - 1)]])
    drawn = torch.randn(1, 3, vocab, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    logits = drawn.clone().requires_grad_(True)
    loss(logits, target, eps_ls).backward()
    at_pad = float(logits.grad[0, 1].abs().max())
    at_token = float(logits.grad[0, 0].abs().max())
    return Check(
        "loss_padding",
        at_pad == 0 and at_token > 0,
        f"the loss's largest gradient at a padding target {at_pad:.3g} (at a real token {at_token:.3g})",
        "0 at the padding, more at a real token",
        "padding targets counted in the loss (no ignore_index=PAD, or the padding not masked out of the sum): the "
        "model is trained to predict padding, and a batch's loss depends on its padding"
        if at_pad > 0
        else "the loss gives no gradient at a real target token",
        {"at_padding": at_pad, "at_token": at_token},
    )


RANDOM_AT_INFERENCE = (
    "the model's output is random in eval mode (check inference_determinism failed): this figure may be "
    "that randomness alone; or "
)


def run_checks(
    model: Transformer,
    batch: Batch,
    tr: dict,
    *,
    loss=label_smoothed_loss,
    builder=optimizer_and_schedule,
    seed: int = 0,
) -> list[Check]:
    """Every check of the module docstring on `model` (random weights) over `batch`, with the
    run's `train` settings `tr`, its loss and its optimizer/scheduler builder."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        found = [
            determinism(model, batch),
            attention_weights(model, batch),
            future_leakage(model, batch, generator),
            padding(model, batch),
            attention_logits(model, batch),
            embedding_scale(model, batch),
            positional_encoding(model),
            shifted_input(batch),
        ]
    found.append(tied_weights(model, batch, generator))
    found.append(schedule(tr, model.cfg.d_model, builder))
    found.append(label_smoothing(model.cfg.tgt_vocab, tr["eps_ls"], loss))
    found.append(loss_padding(model.cfg.tgt_vocab, tr["eps_ls"], loss))
    found.append(reference_check(model, batch))
    ref = found[-1]
    found.append(residual_dropout(model, batch, seed))
    if not ref.passed and ref.measured.get("causes"):  # where the reference places it, in the earlier checks' lines
        for c in found[1:-2]:
            if not c.passed and c.name in ("future_leakage", "padding") and ref.measured["causes"][0] not in c.cause:
                c.cause += (
                    f"; the reference check places the first difference at {ref.measured['where']}: "
                    + "; ".join(ref.measured["causes"])
                )
    if not found[0].passed:  # a model random at inference: what compares two passes cannot tell a leak from it
        for c in found[1:]:
            if not c.passed and c.name in ("future_leakage", "padding", "reference", "attention_logits"):
                c.cause = RANDOM_AT_INFERENCE + c.cause
    return found


def initial_model(settings: dict, train: Corpus) -> Transformer:
    """The model an experiment's training starts from: its settings over its data's vocabularies,
    drawn from its seed as the trainer draws it (aiayn.training.train.Trainer), on the CPU."""
    meta = train.header["meta"]
    cfg = ModelConfig.from_settings(
        settings["model"],
        src_vocab=meta["src_vocab"],
        tgt_vocab=meta["tgt_vocab"],
        shared_vocab=settings["vocab"]["shared"],
    )
    check_positions(cfg, train, settings["name"])
    torch.manual_seed(settings["train"]["seed"])
    return build(cfg)


def check_job(settings_path, train_path, out, *, log=print, detail=None) -> int:
    """The check stage of one experiment (`python -m aiayn check`): its model (experiment.json) as
    the trainer builds it, over a few pairs of its encoded training data; `out` (check.json) is
    written only when every check passes, else a UserError names the first failure. Each check's
    line goes to `detail` (the job's log; default `log`), each failure's and the summary to `log`
    (the terminal too). Returns 0."""
    detail = detail or log
    writable(out)
    settings = resolve.read(settings_path)
    train = binary.read(train_path)
    model = initial_model(settings, train)
    tr = settings["train"]
    pairs = sample_pairs(train)
    batch = collate(train, pairs, pin=False)
    found = run_checks(model, batch, tr, seed=tr["seed"])
    cfg = model.cfg
    del model  # the composed step builds its own, in a trainer (the big model: 0.83 GiB less at the peak)
    gc.collect()
    found += composed_step(settings, train, pairs)
    for c in found:
        (detail if c.passed else log)(c.line())
    failed = [c for c in found if not c.passed]
    if failed:
        more = f" (and {len(failed) - 1} more check(s) failed, above)" if len(failed) > 1 else ""
        raise UserError(f"experiment {settings['name']}: {failed[0].line()}{more}; nothing was trained")
    records.write(
        out,
        "check",
        {
            "experiment": settings["name"],
            "passed": True,
            "aiayn": described(),
            "code": checked_code(),
            "model": cfg.to_dict(),
            "pairs": int(batch.src.size(0)),
            "checks": [c.record() for c in found],
        },
    )
    log(f"all {len(found)} checks passed on {settings['name']}'s model: {out}")
    return 0
