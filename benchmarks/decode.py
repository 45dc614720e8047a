"""Beam-4 decoding speed, side by side in one process: our batched KV-cached beam search vs
HuggingFace MarianMTModel.generate (same dimensions, random weights) and vs our own decoder
without the cache (each step reruns the decoder over the whole prefix).

Outputs are forced to --length tokens (EOS masked until then, as `min_new_tokens` does for
Marian), so all three do the same amount of decoding work.

    python benchmarks/decode.py --size base --sentences 32 --length 50 --json benchmarks/decode.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.data.binary import BOS, EOS  # noqa: E402
from aiayn.model.beam import BeamState, beam_search  # noqa: E402
from aiayn.model.hparams import ModelConfig  # noqa: E402
from aiayn.model.transformer import Transformer  # noqa: E402

SIZES = {
    "demo": dict(N=2, d_model=96, d_ff=384, h=4, d_k=24, d_v=24),
    "base": dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64),
}
VOCAB = 32000


def no_eos_before(logp: torch.Tensor, step: int, length: int) -> torch.Tensor:
    if step < length:
        logp[:, EOS] = float("-inf")
    return logp


@torch.no_grad()
def ours(model: Transformer, src: torch.Tensor, length: int, beam: int, cached: bool) -> float:
    start = time.perf_counter()
    memory, mask = model.encode(src)
    if cached:  # as aiayn.evaluation.translate: the memory's keys/values once per sentence, shared by its beam
        state = BeamState(model, memory, mask, max_len=length + 1, group=beam)
        step_no = [0]

        def step(tokens):
            step_no[0] += 1
            return no_eos_before(F.log_softmax(model.decode_step(tokens, state), -1), step_no[0], length + 1)

        reorder = state.reorder
    else:
        memory, mask = memory.repeat_interleave(beam, 0), mask.repeat_interleave(beam, 0)
        box = {"prefix": None, "memory": memory, "mask": mask}

        def step(tokens):
            p = tokens[:, None] if box["prefix"] is None else torch.cat([box["prefix"], tokens[:, None]], 1)
            box["prefix"] = p
            logits = model.decode(p, box["memory"], box["mask"])[:, -1]  # the whole prefix, every step
            return no_eos_before(F.log_softmax(logits, -1), p.size(1), length + 1)

        def reorder(rows):
            box["prefix"], box["memory"], box["mask"] = box["prefix"][rows], box["memory"][rows], box["mask"][rows]

    beam_search(step, reorder, max_steps=[length + 1] * src.size(0), beam=beam, alpha=0.6, bos=BOS, eos=EOS)
    return time.perf_counter() - start


@torch.no_grad()
def marian(src: torch.Tensor, size: dict, length: int, beam: int) -> float | None:
    try:
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        return None
    cfg = MarianConfig(
        vocab_size=VOCAB,
        d_model=size["d_model"],
        encoder_layers=size["N"],
        decoder_layers=size["N"],
        encoder_attention_heads=size["h"],
        decoder_attention_heads=size["h"],
        encoder_ffn_dim=size["d_ff"],
        decoder_ffn_dim=size["d_ff"],
        activation_function="relu",
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
    )
    model = MarianMTModel(cfg).eval()
    start = time.perf_counter()
    model.generate(
        src,
        attention_mask=src != 0,
        num_beams=beam,
        max_new_tokens=length + 1,
        min_new_tokens=length,
        length_penalty=0.6,
        early_stopping=True,
        do_sample=False,
    )
    return time.perf_counter() - start


def main() -> None:
    from aiayn.commands import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="base", choices=list(SIZES))
    parser.add_argument("--sentences", type=at_least(1), default=32)
    parser.add_argument("--src-len", type=at_least(1), default=30)
    parser.add_argument("--length", type=at_least(1), default=50, help="output tokens per sentence")
    parser.add_argument("--beam", type=at_least(1), default=4)
    parser.add_argument("--repeats", type=at_least(1), default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Transformer(ModelConfig(src_vocab=VOCAB, tgt_vocab=VOCAB, P_drop=0.0, **SIZES[args.size])).eval()
    src = torch.randint(4, VOCAB, (args.sentences, args.src_len))
    src[:, -1] = EOS
    ours(model, src[:2], 5, args.beam, cached=True)  # warm-up
    # alternate ours and Marian, best of --repeats each, so that both meet the machine's noise alike
    cached, marians = [], []
    for _ in range(args.repeats):
        cached.append(ours(model, src, args.length, args.beam, cached=True))
        marians.append(marian(src, SIZES[args.size], args.length, args.beam))
    t_cached, t_marian = min(cached), (min(marians) if marians[0] is not None else None)
    t_uncached = ours(model, src, args.length, args.beam, cached=False)
    n = args.sentences
    print(
        f"{args.size}, beam {args.beam}, {n} sentences of {args.src_len} -> {args.length} tokens, "
        f"{torch.get_num_threads()} threads, best of {args.repeats}"
    )
    print(f"  ours (KV cache):    {n / t_cached:8.2f} sentences/s")
    if t_marian:
        print(
            f"  Marian generate:    {n / t_marian:8.2f} sentences/s   "
            f"ours / Marian   = {t_marian / t_cached:.2f}x (target >= 2)"
        )
    else:
        print("  Marian generate:    skipped (pip install transformers)")
    print(
        f"  ours without cache: {n / t_uncached:8.2f} sentences/s   "
        f"cached / uncached = {t_uncached / t_cached:.2f}x (target >= 5)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "size": args.size,
                    "sentences": n,
                    "length": args.length,
                    "beam": args.beam,
                    "ours_s": t_cached,
                    "marian_s": t_marian,
                    "uncached_s": t_uncached,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "decode")
