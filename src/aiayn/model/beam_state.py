"""The model state of a batched beam search: the decoder's key/value cache, laid out for the beam.

Rows are sentence-major: with a beam of g, row a·g + j is hypothesis j of active sentence a.
Self-attention keys/values grow by one position per step in preallocated buffers, one row per
hypothesis; encoder-decoder keys/values are computed once, one row per sentence, and shared by
the sentence's g hypotheses (`Transformer.decode_step` attends them as g query positions).
`reorder` is what `beam.beam_search` calls after each step: hypotheses move within their
sentence, finished sentences leave, and the memory is touched only when a sentence leaves.
"""

from __future__ import annotations

from torch import Tensor

from aiayn.model.transformer import Transformer


class BeamState:
    """An `IncrementalState` (aiayn.model.transformer) for `group` hypotheses per sentence of `memory`."""

    def __init__(self, model: Transformer, memory: Tensor, memory_mask: Tensor, max_len: int, group: int = 1):
        cfg = model.cfg
        rows = memory.size(0) * group
        self.group, self.memory_mask, self.position = group, memory_mask, 0  # mask (A, 1, 1, S)
        self.memory = model.memory_keys_values(memory)  # per layer: (A, h, S, d_k), (A, h, S, d_v)
        # buffers like the projections' outputs (bf16 under bf16 autocast, where the memory is fp32)
        self.k = [k.new_empty(rows, cfg.h, max_len, cfg.d_k) for k, _ in self.memory]
        self.v = [v.new_empty(rows, cfg.h, max_len, cfg.d_v) for _, v in self.memory]

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        t = self.position
        if t >= self.k[layer].size(2):
            raise ValueError(f"decoder cache is full ({self.k[layer].size(2)} positions)")
        self.k[layer][:, :, t] = k[:, :, 0]
        self.v[layer][:, :, t] = v[:, :, 0]
        return self.k[layer][:, :, : t + 1], self.v[layer][:, :, : t + 1]  # (rows, h, t + 1, d_k), (.., d_v)

    def memory_kv(self, layer: int) -> tuple[Tensor, Tensor]:
        return self.memory[layer]

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
