"""The `data` invariant: each row the trainer feeds the model is its pair of the corpus (source,
decoder input, trained target), and its plan holds each pair once an epoch."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch

from aiayn.data.binary import BOS, EOS, PAD


def trimmed(rows: torch.Tensor) -> list[list[int]]:
    """Each row's tokens without the padding after them."""
    return [row[: max((i + 1 for i, t in enumerate(row) if t != PAD), default=0)] for row in rows.tolist()]


def paper_rows(corpus, i: int) -> tuple[list, list, list]:
    """Pair i as the paper feeds it: source + EOS, BOS + target (shifted right), target + EOS."""
    s, t = corpus.src(i).tolist(), corpus.tgt(i).tolist()
    return s + [EOS], [BOS] + t, t + [EOS]


def paper_batch(corpus, indices) -> tuple[torch.Tensor, ...]:
    """The pairs `indices` as three padded tensors (B, L) built from `paper_rows`, not by collate."""
    rows = list(zip(*(paper_rows(corpus, int(i)) for i in indices)))
    width = [max(map(len, side)) for side in rows]
    return tuple(torch.tensor([r + [PAD] * (w - len(r)) for r in side]) for side, w in zip(rows, width))


def describe(got: list, want: list, named: list) -> str | None:
    """None when `got` is `want`; else what it is: a named variant, `want` cut, or where it differs."""
    if got == want:
        return None
    p = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    said = next((s for s, alt in named if got == alt), None)
    if said or (len(got) < len(want) and p == len(got)):
        return said or f"cut to {len(got)} of {len(want)} tokens"
    at = [seq[p] if p < len(seq) else "none" for seq in (got, want)]
    return f"token {at[0]} at position {p} where the corpus has {at[1]}"


class Trained:
    """The target the loss trains each row of a forward pass towards, read from the gradient at the
    logits: a loss sum_v q_v (-log p_v) has the gradient (sum q) p - q, on a line in p over every
    class of one weight; a position trained towards token e has every class but e on that line
    (whatever the smoothing and the loss's scale)."""

    def __init__(self, seen):
        self.g = None if seen.logit_grad is None else seen.logit_grad.double()
        self.p = seen.logits.double().softmax(-1)

    def first_off(self, r: int, target: list) -> int | None:
        if self.g is None or len(target) > self.g.size(1):
            return 0 if self.g is None else self.g.size(1)
        g, p = self.g[r, : len(target)], self.p[r, : len(target)]  # (L, V)
        others = torch.ones_like(g, dtype=torch.bool)
        others[range(len(target)), target] = False
        n = others.sum(-1, keepdim=True)
        dp = (p - (p * others).sum(-1, keepdim=True) / n) * others
        dg = (g - (g * others).sum(-1, keepdim=True) / n) * others
        slope = (dp * dg).sum(-1, keepdim=True) / dp.square().sum(-1, keepdim=True).clamp(min=1e-300)
        off = ((dg - slope * dp).abs().amax(-1) > 1e-3 * g.abs().amax(-1)) | (g.abs().amax(-1) == 0)
        return int(off.nonzero()[0]) if bool(off.any()) else None

    def said(self, r: int, outs: list, named: list) -> str | None:
        off = self.first_off(r, outs)
        if off is None:
            return None
        cut = self.g is not None and bool((self.g[r, off:] == 0).all())
        alt = next((n for n, alt in named if self.first_off(r, alt) is None), None)
        return alt or (f"cut to {off} of {len(outs)} tokens" if cut else f"another token at position {off}")


def read_rows(corpus, pairs, seen) -> tuple[list[int], list[str]]:
    """The pair of `pairs` each row of the forward pass `seen` is (by its source and decoder input),
    and what is not the corpus: its source, its decoder input, or the target its loss trains towards."""
    want, trained = {int(i): paper_rows(corpus, int(i)) for i in pairs}, Trained(seen)
    found, wrong = [], []
    for r, (s, d) in enumerate(zip(trimmed(seen.src), trimmed(seen.tgt_in))):
        i = next((i for i, w in want.items() if w[:2] == (s, d)), None)
        i = i if i is not None else next((i for i, w in want.items() if w[0] == s), None)
        if i is None:
            close = max(want, key=lambda j: sum(a == b for a, b in zip(s, want[j][0])))
            wrong.append(f"row {r}'s source is {describe(s, want[close][0], [])} (pair {close})")
            continue
        found.append(i)
        others = [(f"pair {j}'s (pairs misaligned)", w) for j, w in want.items() if j != i]
        _, inputs, outs = want[i]
        d = d[: len(inputs)] if d[: len(inputs)] == inputs else d  # past its end: read by no real position (causal)
        alt = [("the target itself, not shifted right", outs), ("EOS in place of BOS at its start", [EOS, *outs[:-1]])]
        said = describe(d, inputs, alt + [(n, w[1]) for n, w in others])
        wrong += [f"row {r}'s decoder input is {said} (pair {i})"] if said else []
        said = trained.said(r, outs, [("the decoder input, not the target", inputs)] + [(n, w[2]) for n, w in others])
        wrong += [f"row {r}'s trained target is {said} (pair {i})"] if said else []
    if sorted(found) != sorted(map(int, pairs)) and not wrong:
        wrong.append(f"its rows are pairs {sorted(found)} where the plan has {sorted(map(int, pairs))}")
    return found, wrong


def coverage(batcher) -> str | None:
    """What epoch 1 of a plan leaves out or doubles, a micro-batch over budget a side (§5.1), epoch 2 in 1's order."""
    n, batches = len(batcher.corpus), batcher.epoch(0)
    counts = np.bincount(np.concatenate(batches), minlength=n)
    left, twice = np.flatnonzero(counts == 0), int((counts > 1).sum())
    if len(left) or twice:
        longest = f" (the longest {int((batcher.src_len + batcher.tgt_len)[left].max())} tokens)" if len(left) else ""
        return f"epoch 1 of its plan leaves out {len(left):,} of the {n:,} pairs{longest}, has {twice:,} twice or more"
    for side, lengths in (("source", batcher.src_len), ("target", batcher.tgt_len)):
        sizes = [(int(lengths[b].sum()), len(b) * int(lengths[b].max())) for b in batches if len(b) > 1]
        if over := [(r, p) for r, p in sizes if r > batcher.budget or p > batcher.max_padded]:
            return f"a micro-batch of its plan holds {over[0][0]:,} {side} tokens ({over[0][1]:,} padded) where " \
                f"its budget is {batcher.budget:,} ({batcher.max_padded:,} padded) a side"  # fmt: skip
    order = [[int(max(batcher.src_len[b].max(), batcher.tgt_len[b].max())) for b in batcher.epoch(e)] for e in (0, 1)]
    orders = math.lgamma(len(order[0]) + 1) - sum(math.lgamma(c + 1) for c in Counter(order[0]).values())
    if orders > math.log(1e6) and order[0] == order[1]:  # a chance below 1e-6 where each epoch's order is drawn
        return "epoch 2 of its plan holds the micro-batches in epoch 1's order (by their lengths): not drawn afresh"
    return None


def full_plan(settings: dict, corpus) -> tuple[list[str], str]:
    """The plan at the experiment's own budget over the whole corpus: its coverage, and its first
    update's micro-batches and the one with the longest pair, collated, against `paper_batch`."""
    from aiayn.training.batching import Batcher, collate, micro_batch_budget

    tr = settings["train"]
    accumulation, budget = micro_batch_budget(tr["tokens_per_update"], tr["max_tokens"], 1)
    batcher = Batcher(corpus, budget=budget, seed=tr["seed"], per_update=accumulation, max_padded=tr["max_tokens"])
    wrong = [f"at the experiment's budget, {c}" for c in [coverage(batcher)] if c]
    longest = int(np.argmax(batcher.src_len + batcher.tgt_len))
    for indices in batcher.update(1) + [b for b in batcher.epoch(0) if longest in b][:1]:
        b, (src, tgt_in, tgt_out) = collate(corpus, indices, pin=False), paper_batch(corpus, indices)
        real = tgt_out != PAD  # the decoder input past the target's end is read by no real position (causal)
        if not all(g.shape == w.shape and torch.equal(g, w) for g, w in ((b.src, src), (b.tgt_out, tgt_out))) \
                or not torch.equal(b.tgt_in[real], tgt_in[real]):  # fmt: skip
            wrong.append(f"a micro-batch of the experiment's own plan, collated, is not its pairs {[*indices[:3]]}...")
    return wrong[:1], f"the experiment's own plan holds each of the {len(corpus):,} pairs once in epoch 1 (its first " \
        f"update and longest pair, {int(batcher.src_len[longest])}+{int(batcher.tgt_len[longest])} tokens, collated " \
        "whole), each micro-batch within its budget a side, epoch 2 not in epoch 1's order"  # fmt: skip
