"""Translation with a trained model (§6.1): length-sorted batches, KV-cached beam search, input order
restored; `translate_file` decodes a file with a checkpoint's model, one line out per line in."""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from aiayn.data import vocab
from aiayn.data.binary import BOS, EOS, PAD
from aiayn.io import atomic_paths, writable
from aiayn.model.beam import BeamState, Hypothesis, beam_search
from aiayn.model.transformer import Transformer
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime.device import choose_device
from aiayn.runtime.lines import read_lines
from aiayn.runtime.precision import autocast as precision_autocast


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
    autocast = functools.partial(precision_autocast, device, precision)
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


def fit_positions(src: list[list[int]], model: Transformer, label: str, log=print) -> list[list[int]]:
    """Source sequences cut to what learned positions cover (they end at max_positions, EOS
    included), each cut said by line; sinusoidal positions take any length."""
    if model.cfg.positional != "learned":
        return src
    cap = model.cfg.max_positions - 1
    out = []
    for i, ids in enumerate(src):
        if len(ids) > cap:
            log(f"{label}, line {i + 1}: {len(ids)} tokens, cut to the model's {cap} positions")
            ids = ids[:cap]
        out.append(ids)
    return out


def progress_lines(total: int, log=print) -> Callable[[int, float], None]:
    """A `translate` progress callback that logs a line each time the sentences done pass another
    tenth of `total` (decoding advances them a whole batch at a time), and at the end."""
    every = max(1, total // 10)
    said = [0]  # the tenths said so far

    def progress(done: int, seconds: float) -> None:
        if done == total or done // every > said[0]:
            said[0] = done // every
            log(f"translated {done}/{total} sentences, {done / max(seconds, 1e-9):.1f} sentences/s")

    return progress


def nbest_file(out) -> Path:
    """Where `translate_file` writes the n best hypotheses of each line beside `out`."""
    return Path(f"{out}.nbest")


def derived_files(out, nbest: int = 1) -> tuple[list, list]:
    """What `translate` writes that no option names (aiayn.cli.paths): OUT.nbest where --nbest > 1."""
    return ([("--out's .nbest", str(nbest_file(out)), "file")] if nbest > 1 else []), []


def translate_file(
    model_path,
    input_path,
    spm_src,
    spm_tgt,
    *,
    out,
    decode: dict,
    nbest: int = 1,
    batch_tokens: int = 4096,
    device: str = "auto",
    precision: str = "fp32",
    log=print,
) -> None:
    """Decode `input_path` with the checkpoint `model_path` (`decode`: complete decoding settings)
    into `out`, one line per line; with `nbest` > 1 also `out`.nbest (index, score, log-probability,
    text per hypothesis). Both are written together once every sentence is decoded."""
    targets = [Path(out)] + ([nbest_file(out)] if nbest > 1 else [])
    writable(*targets)  # before the decoding, not after it
    dev = choose_device(device)
    state = ckpt.load(model_path)
    vocab.check_model(state, model_path, {"src": spm_src, "tgt": spm_tgt})
    model = ckpt.rebuild(state, device=dev)
    sp_src, sp_tgt = vocab.load(spm_src), vocab.load(spm_tgt)
    src = fit_positions(vocab.to_ids(sp_src, list(read_lines(input_path))), model, str(input_path), log)
    hyps = translate(
        model,
        src,
        beam=decode["beam"],
        alpha=decode["alpha"],
        max_len_a=decode["max_len_a"],
        max_len_b=decode["max_len_b"],
        batch_tokens=batch_tokens,
        nbest=nbest,
        precision=precision,
        progress=progress_lines(len(src), log),
    )
    with atomic_paths(*targets) as temps:
        temps[0].write_text("".join(vocab.to_text(sp_tgt, h[0].tokens if h else []) + "\n" for h in hyps), "utf-8")
        if nbest > 1:
            rows = [
                f"{i}\t{h.score:.6f}\t{h.logprob:.6f}\t{vocab.to_text(sp_tgt, h.tokens)}\n"
                for i, hs in enumerate(hyps)
                for h in hs
            ]
            temps[1].write_text("".join(rows), "utf-8")
