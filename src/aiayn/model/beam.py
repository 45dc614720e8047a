"""Batched beam search (§6.1): beam k, GNMT length penalty, maximum length, early termination.

The search follows tensor2tensor's (the paper's code): each step takes the 2k best extensions of
the k live hypotheses of every sentence; those ending in EOS join the sentence's finished
hypotheses with score log P(Y) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting the EOS; the k
best others stay live. A sentence is done when its best finished hypothesis scores above what
its best live hypothesis could still reach (its log-probability divided by the length penalty at
the maximum length: log-probabilities only fall), as tensor2tensor stops with `stop_early` for
one output; or at the maximum length, where EOS is forced. Where n > 1 hypotheses are asked for
(`nbest`), the n-th best finished one must beat that bound instead, so that none of the n best
can still change. Finished sentences leave the batch, so the work shrinks as they end (the 1-best
is the same as decoding the batch until every sentence is done).

`step(tokens)` gives log-probabilities (rows, V) of the next token for each row's prefix;
`reorder(rows)` makes row i of the model's state a copy of old row rows[i] (for the Transformer:
`BeamState.reorder`). Rows are sentence-major: row a·k + j is hypothesis j of active sentence a.

`BeamState` is that state for the Transformer: the decoder's key/value cache, laid out for the beam.
Self-attention keys/values grow by one position per step in preallocated buffers, one row per
hypothesis; encoder-decoder keys/values are computed once, one row per sentence, and shared by
the sentence's k hypotheses (`Transformer.decode_step` attends them as k query positions); the
memory is touched only when a sentence leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from torch import Tensor

if TYPE_CHECKING:
    from aiayn.model.transformer import Transformer


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # log P / length penalty
    logprob: float


def length_penalty(length: int | torch.Tensor, alpha: float):
    """GNMT lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016)."""
    return ((5.0 + length) / 6.0) ** alpha


def beam_search(
    step: Callable[[torch.Tensor], torch.Tensor],
    reorder: Callable[[torch.Tensor], None],
    *,
    max_steps: list[int],
    beam: int,
    alpha: float,
    bos: int,
    eos: int,
    nbest: int = 1,
    device: torch.device | str = "cpu",
) -> list[list[Hypothesis]]:
    """Search for len(max_steps) sentences whose model state holds len(max_steps) × beam rows.

    max_steps[b]: most tokens sentence b may generate, EOS included. Returns, per sentence, its
    `nbest` best finished hypotheses, best first.
    """
    B, k = len(max_steps), beam
    active = list(range(B))  # original sentence of each active row block
    limit = torch.tensor(max_steps, dtype=torch.float32, device=device)  # (A,)
    scores = torch.full((B, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # only one live hypothesis at the start: no duplicates
    history = torch.empty((B, k, 0), dtype=torch.long, device=device)  # (A, k, t)
    tokens = torch.full((B * k,), bos, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    t = 0
    while active:
        logp = step(tokens).float().view(len(active), k, -1)  # (A, k, V)
        V = logp.size(-1)
        last = limit <= t + 1  # (A,) the EOS step of sentences at their maximum length
        if bool(last.any()):
            forced = torch.full_like(logp[0, 0], float("-inf"))
            forced[eos] = 0.0
            logp[last] = logp[last] + forced
        # the 2k best of k·V extensions are among the 2k best tokens of each hypothesis (its score
        # is one constant per row): a top-2k per row, then over the k·2k candidates, never adding
        # the scores to the whole (A, k, V) table
        n = min(2 * k, V)
        row_s, row_tok = logp.topk(n, dim=2)  # (A, k, n)
        top_s, top_j = (scores.unsqueeze(-1) + row_s).view(len(active), k * n).topk(min(2 * k, k * n), dim=1)
        top_beam, top_tok = top_j // n, row_tok.view(len(active), k * n).gather(1, top_j)  # (A, 2k)
        is_eos = top_tok == eos
        ended = (is_eos & torch.isfinite(top_s)).nonzero().tolist()
        if ended:  # hypotheses that end here join their sentence's finished ones
            s, b, lp = top_s.tolist(), top_beam.tolist(), length_penalty(t + 1, alpha)
            for a, j in ended:
                finished[active[a]].append(Hypothesis(history[a, b[a][j]].tolist(), s[a][j] / lp, s[a][j]))
        alive_s, pick = top_s.masked_fill(is_eos, float("-inf")).topk(k, dim=1)  # (A, k), best first
        alive_beam, alive_tok = top_beam.gather(1, pick), top_tok.gather(1, pick)
        history = torch.cat([history.gather(1, alive_beam.unsqueeze(-1).expand(-1, -1, t)), alive_tok.unsqueeze(-1)], 2)
        scores, t = alive_s, t + 1
        bound = (scores[:, 0] / length_penalty(limit, alpha)).tolist()  # best any live hypothesis can reach
        keep = [a for a in range(len(active)) if not (last[a] or _settled(finished[active[a]], nbest, bound[a]))]
        rows = (torch.arange(len(active), device=device).unsqueeze(1) * k + alive_beam)[keep].view(-1)
        if keep:
            reorder(rows)
        active = [active[a] for a in keep]
        scores, history, limit = scores[keep], history[keep], limit[keep]
        tokens = alive_tok[keep].reshape(-1)
    return [sorted(f, key=lambda h: h.score, reverse=True)[:nbest] for f in finished]


def _settled(done: list[Hypothesis], n: int, live_bound: float) -> bool:
    """No live hypothesis can still enter this sentence's n best finished ones: the n-th best
    finished score beats what the best live one could reach (n = 1: tensor2tensor's stop_early)."""
    if live_bound == float("-inf"):
        return True
    if len(done) < n:
        return False
    return sorted((h.score for h in done), reverse=True)[n - 1] > live_bound


class BeamState:
    """What `Transformer.decode_step` keeps between steps, for `group` hypotheses per sentence of
    `memory`: the decoder runs rows = A × group target rows, row r reading memory row r // group."""

    def __init__(self, model: Transformer, memory: Tensor, memory_mask: Tensor, *, max_len: int, group: int = 1):
        cfg = model.cfg
        rows = memory.size(0) * group
        self.group, self.memory_mask, self.position = group, memory_mask, 0  # mask (A, 1, 1, S), True = real
        # each decoder layer's encoder-decoder keys/values, computed once: (A, h, S, d_k), (A, h, S, d_v)
        self.memory = [layer.cross_attn.keys_values(memory) for layer in model.decoder]
        # buffers like the projections' outputs (bf16 under bf16 autocast, where the memory is fp32)
        self.k = [k.new_empty(rows, cfg.h, max_len, cfg.d_k) for k, _ in self.memory]
        self.v = [v.new_empty(rows, cfg.h, max_len, cfg.d_v) for _, v in self.memory]

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Keep decoder layer `layer`'s self-attention keys/values of this step (rows, h, 1, d); return
        those of the whole prefix so far (rows, h, position + 1, d)."""
        t = self.position
        if t >= self.k[layer].size(2):
            raise ValueError(f"decoder cache is full ({self.k[layer].size(2)} positions)")
        self.k[layer][:, :, t] = k[:, :, 0]
        self.v[layer][:, :, t] = v[:, :, 0]
        return self.k[layer][:, :, : t + 1], self.v[layer][:, :, : t + 1]  # (rows, h, t + 1, d_k), (.., d_v)

    def reorder(self, index: Tensor) -> None:
        """Row i of the state becomes old row index[i]. With group g > 1 each block of g new rows
        must come from one sentence's rows, sentences in order (what beam search does)."""
        if self.group == 1:
            sentences = index
        elif index.numel() // self.group == self.memory_mask.size(0):
            sentences = None  # the same sentences, hypotheses reordered within each
        else:
            sentences = index.view(-1, self.group)[:, 0] // self.group
        self.k = [k.index_select(0, index) for k in self.k]
        self.v = [v.index_select(0, index) for v in self.v]
        if sentences is not None:
            self.memory = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.memory]
            self.memory_mask = self.memory_mask.index_select(0, sentences)
