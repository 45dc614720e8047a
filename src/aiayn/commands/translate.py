"""`python -m aiayn translate`: decode a source file with beam search (§6.1), one line out per line in."""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn.commands import load_json
from aiayn.data import vocab
from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.evaluation.translate import translate
from aiayn.io import atomic_write_text, file_sha256
from aiayn.training import checkpoint as ckpt
from aiayn.training.distributed import parse_device


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
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (a GPU if there is one)")
    parser.add_argument(
        "--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="arithmetic of the search (default fp32)"
    )


DECODE = {"beam": 4, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 50}  # §6.1


def decode_settings(text: str) -> dict:
    """--decode over the defaults, each value checked (a beam of 0 or a string alpha fails here,
    not deep in the search)."""
    given = load_json(text, "--decode", expect=dict)
    for key, value in given.items():
        if key not in DECODE:
            raise UserError(f"--decode: unknown key {key!r}; known: {', '.join(DECODE)}")
        whole = key in ("beam", "max_len_b")
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            raise UserError(f"--decode: {key} must be a {'whole number' if whole else 'number'}, not {value!r}")
        low = 1 if key == "beam" else 0
        if value < low:
            raise UserError(f"--decode: {key} must be a {'whole number' if whole else 'number'} >= {low}, not {value}")
    return {**DECODE, **given}


def check_vocabularies(state: dict, args) -> None:
    """The sentencepiece models must be those the model was trained with (its checkpoint says which)."""
    for side, path in (("src", args.spm_src), ("tgt", args.spm_tgt)):
        want = (state.get("vocab") or {}).get(side)
        if want and file_sha256(path) != want:
            name = "source" if side == "src" else "target"
            raise UserError(
                f"{path} is not the {name} vocabulary {args.model} was trained with; give that dataset's spm models"
            )


def run(args) -> int:
    settings = decode_settings(args.decode)
    for option, value in (("--nbest", args.nbest), ("--batch-tokens", args.batch_tokens)):
        if value < 1:
            raise UserError(f"{option} must be >= 1, not {value}")
    device = parse_device(
        "cuda"
        if args.device == "auto" and torch.cuda.is_available()
        else ("cpu" if args.device == "auto" else args.device)
    )
    state = ckpt.load(args.model)
    for path in (args.spm_src, args.spm_tgt):
        if not Path(path).is_file():
            raise UserError(f"{path}: sentencepiece model not found")
    check_vocabularies(state, args)
    model = ckpt.rebuild(state, device=device)
    sp_src, sp_tgt = vocab.load(args.spm_src), vocab.load(args.spm_tgt)
    lines = list(read_lines(args.input))
    src = vocab.encode(sp_src, lines)
    if model.cfg.positional == "learned":  # learned positions end at max_positions (EOS included)
        cap = model.cfg.max_positions - 1
        for i, ids in enumerate(src):
            if len(ids) > cap:
                print(f"{args.input}, line {i + 1}: {len(ids)} tokens, cut to the model's {cap} positions", flush=True)
                src[i] = ids[:cap]
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
