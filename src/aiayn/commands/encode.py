"""`python -m aiayn encode`: aligned text -> the encoded corpus the trainer memory-maps."""

from __future__ import annotations

from aiayn.commands import at_least, library_default, say
from aiayn.data.encode import encode_corpus
from aiayn.inventory import OUTPUT, SPM, TEXT


def add_arguments(add):
    add("--src", type=TEXT, required=True, help="source text, one sentence per line")
    add("--tgt", type=TEXT, required=True, help="target text, aligned with --src")
    add("--spm-src", type=SPM, required=True, help="source sentencepiece model")
    add("--spm-tgt", type=SPM, required=True, help="target sentencepiece model")
    add("--out", type=OUTPUT, required=True, help="encoded corpus to write (the format of aiayn.data.binary)")
    add(
        "--threads",
        type=at_least(1),
        default=library_default("aiayn.data.encode.encode_corpus", "threads"),
        help="sentencepiece's encoding threads (default %(default)s)",
    )
    add(
        "--chunk",
        type=at_least(1),
        default=library_default("aiayn.data.encode.encode_corpus", "chunk"),
        help="lines encoded at a time, which bounds memory (default %(default)s)",
    )


def run(args) -> None:
    encode_corpus(
        args.src, args.tgt, args.spm_src, args.spm_tgt, out=args.out, threads=args.threads, chunk=args.chunk, log=say
    )
