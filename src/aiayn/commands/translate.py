"""`python -m aiayn translate`: decode a source file with beam search (§6.1), one line out per line in."""

from __future__ import annotations

import torch

from aiayn import checkpoint as ckpt
from aiayn import vocab
from aiayn.commands import load_json
from aiayn.corpus import read_lines
from aiayn.io import atomic_write_text
from aiayn.translate import translate


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint or averaged model")
    parser.add_argument("--input", required=True, help="source text, one segment per line")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model")
    parser.add_argument(
        "--decode", default="{}", help='JSON: {"beam": 4, "alpha": 0.6, "max_len_a": 1, "max_len_b": 50}'
    )
    parser.add_argument("--out", required=True, help="translations, one line per source line")
    parser.add_argument("--nbest", type=int, default=1, help="also write OUT.nbest with this many hypotheses per line")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="source tokens per batch")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")


def run(args) -> int:
    settings = {
        "beam": 4,
        "alpha": 0.6,
        "max_len_a": 1.0,
        "max_len_b": 50,
        **load_json(args.decode, "--decode", expect=dict),
    }
    device = torch.device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    model = ckpt.rebuild(ckpt.load(args.model), device=device)
    sp_src, sp_tgt = vocab.load(args.spm_src), vocab.load(args.spm_tgt)
    lines = list(read_lines(args.input))
    src = vocab.encode(sp_src, lines)
    every = max(1, len(src) // 10)

    def progress(done: int, seconds: float) -> None:
        if done == len(src) or done // every != (done - 1) // every:
            print(f"translated {done}/{len(src)} sentences, {done / max(seconds, 1e-9):.1f} sentences/s", flush=True)

    hyps = translate(
        model,
        src,
        beam=settings["beam"],
        alpha=settings["alpha"],
        max_len_a=settings["max_len_a"],
        max_len_b=settings["max_len_b"],
        batch_tokens=args.batch_tokens,
        nbest=args.nbest,
        precision=args.precision,
        progress=progress,
    )
    atomic_write_text(args.out, "".join(vocab.decode(sp_tgt, h[0].tokens if h else []) + "\n" for h in hyps))
    if args.nbest > 1:
        rows = [
            f"{i}\t{h.score:.6f}\t{h.logprob:.6f}\t{vocab.decode(sp_tgt, h.tokens)}\n"
            for i, hs in enumerate(hyps)
            for h in hs
        ]
        atomic_write_text(args.out + ".nbest", "".join(rows))
    return 0
