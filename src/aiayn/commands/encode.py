"""`python -m aiayn encode`: aligned text -> the encoded corpus the trainer memory-maps."""

from __future__ import annotations

from aiayn.commands import at_least, library_default, say
from aiayn.data.encode import encode_corpus


def add_arguments(parser):
    parser.add_argument("--src", required=True, help="source text, one sentence per line")
    parser.add_argument("--tgt", required=True, help="target text, aligned with --src")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model")
    parser.add_argument("--out", required=True, help="encoded corpus to write (the format of aiayn.data.binary)")
    parser.add_argument(
        "--threads",
        type=at_least(1),
        default=library_default("aiayn.data.encode.encode_corpus", "threads"),
        help="sentencepiece's encoding threads (default %(default)s)",
    )
    parser.add_argument(
        "--chunk",
        type=at_least(1),
        default=library_default("aiayn.data.encode.encode_corpus", "chunk"),
        help="lines encoded at a time, which bounds memory (default %(default)s)",
    )


def run(args) -> int:
    encode_corpus(
        args.src, args.tgt, args.spm_src, args.spm_tgt, out=args.out, threads=args.threads, chunk=args.chunk, log=say
    )
    return 0
