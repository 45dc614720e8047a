"""Token-based batches of sentence pairs grouped by length (§5.1), and their place in training.

Each epoch sorts the pairs by length (`length_batches`), cuts the order into micro-batches of
about `budget` real tokens per side (within a padded-size memory bound), and shuffles the
micro-batches. An update takes `world_size × accumulation` consecutive micro-batches of the
endless stream epoch 0, epoch 1, ...; update u therefore holds micro-batches
u·M ... u·M + M − 1, so the data position of a run is its step alone, and the same micro-batches
make up an update whether they run on one process with accumulation or on several GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.data.binary import BOS, EOS, PAD, Corpus


def micro_batch_budget(tokens_per_update: int, max_tokens: int, world_size: int) -> tuple[int, int]:
    """(accumulation, real tokens per micro-batch): the fewest micro-batches of at most max_tokens
    padded tokens that hold tokens_per_update, with the update's tokens split evenly over them."""
    accumulation = max(1, math.ceil(tokens_per_update / (max_tokens * world_size)))
    return accumulation, math.ceil(tokens_per_update / (accumulation * world_size))


# pairs whose lengths the cutting loop holds as Python lists at once: 8 bytes a pair a side, 0.58 GB
# for EN-FR's 36M pairs whole; the start-up's peak is the sort's all the same (benchmarks/README.md)
_CHUNK = 1 << 20


def length_batches(
    src_len: np.ndarray, tgt_len: np.ndarray, budget: int, rng: np.random.Generator, *, max_padded: int | None = None
) -> list[np.ndarray]:
    """Indices of pairs cut into batches, in shuffled order.

    Pairs are sorted by (longer side, target length, source length, random tie-break) so that a
    batch holds pairs of nearly equal shape (5.9 % padding on 13.5k real WMT pairs, 0.07 % on a
    4.5M-pair resample; sorting by target length alone gives 12 %). A batch closes before its real
    tokens exceed `budget` on either side (the paper counts ~25,000 source and ~25,000 target
    tokens) or its padded size exceeds `max_padded` on either side (the memory bound; default:
    budget). Lengths must include the EOS/BOS the batch
    adds. A pair longer than the bounds forms a batch alone.
    """
    cap = max_padded or budget
    order = np.lexsort((rng.random(len(src_len)), src_len, tgt_len, np.maximum(src_len, tgt_len)))
    cuts, start, max_len, real_s, real_t = [], 0, 0, 0, 0
    for lo in range(0, len(order), _CHUNK):  # the lengths in sorted order, a chunk at a time as Python ints
        chunk = order[lo : lo + _CHUNK]
        for i, s, t in zip(range(lo, lo + len(chunk)), src_len[chunk].tolist(), tgt_len[chunk].tolist()):
            longest = max(max_len, s, t)
            if i > start and (real_s + s > budget or real_t + t > budget or longest * (i - start + 1) > cap):
                cuts.append(i)
                start, longest, real_s, real_t = i, max(s, t), 0, 0
            max_len, real_s, real_t = longest, real_s + s, real_t + t
    batches = np.split(order, cuts)
    return [batches[j] for j in rng.permutation(len(batches))]


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids + EOS, padded
    tgt_in: torch.Tensor  # (B, T) BOS + target ids, padded
    tgt_out: torch.Tensor  # (B, T) target ids + EOS, padded
    src_tokens: int  # real (non-pad) tokens
    tgt_tokens: int

    def to(self, device) -> "Batch":
        nb = torch.device(device).type == "cuda"
        move = lambda t: t.to(device, non_blocking=nb)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.src_tokens, self.tgt_tokens)


def _gather(
    tokens: np.ndarray, offsets: np.ndarray, indices: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sentences `indices` of one side as (row, column, token) triples plus their lengths, without a Python loop."""
    starts = offsets[indices]
    lengths = offsets[indices + 1] - starts
    rows = np.repeat(np.arange(len(indices)), lengths)
    cols = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return rows, cols, np.asarray(tokens[np.repeat(starts, lengths) + cols], dtype=np.int64), lengths


def collate(corpus: Corpus, indices: np.ndarray, pin: bool | None = None) -> Batch:
    """Pad the pairs `indices` of `corpus` into one Batch (in pinned memory when a GPU is there)."""
    corpus.unchanged()  # a file written over under its memory maps: named here, not a SIGBUS
    indices = np.asarray(indices)
    B, every = len(indices), np.arange(len(indices))
    rows, cols, toks, src_len = _gather(corpus.src_tokens, corpus.src_offsets, indices)
    src = np.full((B, int(src_len.max()) + 1), PAD, dtype=np.int64)
    src[rows, cols] = toks
    src[every, src_len] = EOS
    rows, cols, toks, tgt_len = _gather(corpus.tgt_tokens, corpus.tgt_offsets, indices)
    tgt_in = np.full((B, int(tgt_len.max()) + 1), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    tgt_in[:, 0] = BOS
    tgt_in[rows, cols + 1] = toks
    tgt_out[rows, cols] = toks
    tgt_out[every, tgt_len] = EOS
    tensors = [torch.from_numpy(a) for a in (src, tgt_in, tgt_out)]
    if torch.cuda.is_available() if pin is None else pin:
        tensors = [t.pin_memory() for t in tensors]
    return Batch(*tensors, src_tokens=int(src_len.sum()) + B, tgt_tokens=int(tgt_len.sum()) + B)


class Prefetcher:
    """Collates (and pins) the micro-batches of coming updates in a background thread, so that the
    host prepares update u + 1 while the GPU runs update u. `make(step)` builds one update's data;
    `get(step)` returns it, and queues the next `depth` steps. depth 0: everything in the caller."""

    def __init__(self, make, depth: int = 2):
        from concurrent.futures import ThreadPoolExecutor

        self.make, self.depth = make, depth
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="aiayn-prefetch") if depth > 0 else None
        self.pending: dict = {}

    def get(self, step: int):
        if self.pool is None:
            return self.make(step)
        future = self.pending.pop(step, None)
        if future is None:  # first call, or a jump (resume): start afresh
            for stale in self.pending.values():
                stale.cancel()
            self.pending = {}
            future = self.pool.submit(self.make, step)
        for ahead in range(step + 1, step + 1 + self.depth):
            if ahead not in self.pending:
                self.pending[ahead] = self.pool.submit(self.make, ahead)
        return future.result()

    def close(self) -> None:
        if self.pool is not None:
            for future in self.pending.values():
                future.cancel()
            self.pool.shutdown(wait=True)
            self.pool = None


class Batcher:
    """The micro-batches of every update of a run over `corpus`."""

    def __init__(self, corpus: Corpus, *, budget: int, seed: int, per_update: int, max_padded: int | None = None):
        self.corpus, self.budget, self.seed, self.per_update = corpus, budget, seed, per_update
        self.max_padded = max_padded or budget
        self.src_len = corpus.src_lengths + 1  # + EOS
        self.tgt_len = corpus.tgt_lengths + 1  # + BOS / EOS
        self._epoch, self._batches = -1, []
        self.n_batches = len(self.epoch(0))
        if self.n_batches == 0:
            raise ValueError(f"{corpus.path}: no sentence pairs to train on")

    def epoch(self, e: int) -> list[np.ndarray]:
        if e != self._epoch:
            rng = np.random.default_rng([self.seed, e])
            self._epoch, self._batches = (
                e,
                length_batches(self.src_len, self.tgt_len, self.budget, rng, max_padded=self.max_padded),
            )
        return self._batches

    def micro_batch(self, g: int) -> np.ndarray:
        """Global micro-batch g of the endless stream of epochs."""
        return self.epoch(g // self.n_batches)[g % self.n_batches]

    def update(self, step: int) -> list[np.ndarray]:
        """The micro-batches of update `step` (1-based): all ranks' share, in rank-major order."""
        first = (step - 1) * self.per_update
        return [self.micro_batch(g) for g in range(first, first + self.per_update)]
