"""Translation with a trained model: length-sorted batches, KV-cached beam search, input order restored."""

from __future__ import annotations

import math
import time
from typing import Callable

import torch
import torch.nn.functional as F

from aiayn.data.binary import BOS, EOS, PAD
from aiayn.model.beam import Hypothesis, beam_search
from aiayn.model.beam_state import BeamState
from aiayn.model.transformer import Transformer
from aiayn.training import precision as arithmetic


def max_steps(src_len: int, a: float, b: int, cap: int | None = None) -> int:
    """Tokens a hypothesis may have, EOS included: a × source length + b (§6.1: length + 50), plus EOS."""
    steps = int(math.floor(a * src_len)) + b + 1
    return min(steps, cap) if cap else steps


def length_sorted_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length, cut so that each batch holds at most batch_tokens padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, current = [], []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > batch_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def search_batch(
    model: Transformer, src: list[list[int]], *, beam: int, alpha: float, a: float, b: int, nbest: int, device, autocast
) -> list[list[Hypothesis]]:
    """Beam search for one batch of source id sequences (without EOS)."""
    S = max(len(s) for s in src) + 1
    x = torch.full((len(src), S), PAD, dtype=torch.long)
    for row, ids in enumerate(src):
        x[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        x[row, len(ids)] = EOS
    cap = model.cfg.max_positions if model.cfg.positional == "learned" else None
    limits = [max_steps(len(s), a, b, cap) for s in src]
    with autocast():
        memory, mask = model.encode(x.to(device))  # (B, S, d_model)
        state = BeamState(model, memory, mask, max_len=max(limits), group=beam)  # memory once per sentence

        def step(tokens: torch.Tensor) -> torch.Tensor:
            return F.log_softmax(model.decode_step(tokens, state).float(), dim=-1)  # (rows, V)

        return beam_search(
            step, state.reorder, max_steps=limits, beam=beam, alpha=alpha, bos=BOS, eos=EOS, nbest=nbest, device=device
        )


def translate(
    model: Transformer,
    src: list[list[int]],
    *,
    beam: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
    batch_tokens: int = 4096,
    nbest: int = 1,
    precision: str = "fp32",
    progress: Callable[[int, float], None] | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses for every source sequence, in input order."""
    device = next(model.parameters()).device

    def autocast():
        return arithmetic.autocast(device, precision)

    model.eval()
    out: list[list[Hypothesis] | None] = [None] * len(src)
    start, done = time.perf_counter(), 0
    for batch in length_sorted_batches([len(s) + 1 for s in src], batch_tokens):
        results = search_batch(
            model,
            [src[i] for i in batch],
            beam=beam,
            alpha=alpha,
            a=max_len_a,
            b=max_len_b,
            nbest=nbest,
            device=device,
            autocast=autocast,
        )
        for i, hyps in zip(batch, results):
            out[i] = hyps
        done += len(batch)
        if progress:
            progress(done, time.perf_counter() - start)
    return out
