"""`python -m aiayn vocab`: sentencepiece vocabularies (§5.1: shared 37k BPE EN-DE, 32k EN-FR)."""

from __future__ import annotations

from aiayn.commands import at_least, library_default, say, settings
from aiayn.data import vocab
from aiayn.inventory import OUTPUT, TEXT, schema


def add_arguments(add):
    add(
        "--vocab",
        type=schema("vocab"),
        required=True,
        help='JSON: {"model_type": "bpe", "size": 37000, "shared": true, "input_sentence_size": N} '
        "(a dataset's `vocab:` settings; what is not given is the schema's default)",
    )
    add("--train-src", type=TEXT, required=True, help="source training text, one sentence per line")
    add("--train-tgt", type=TEXT, required=True, help="target training text, aligned with --train-src")
    add(
        "--out-src", type=OUTPUT, required=True, help="source sentencepiece model to write (.model; a .vocab beside it)"
    )
    add(
        "--out-tgt",
        type=OUTPUT,
        required=True,
        help="target sentencepiece model to write (a copy of --out-src when shared)",
    )
    add(
        "--threads",
        type=at_least(1),
        default=library_default("aiayn.data.vocab.train_pair", "threads"),
        help="sentencepiece trainer threads (default %(default)s)",
    )


def run(args) -> None:
    vocab.train_pair(
        settings(args.vocab, "--vocab", "vocab"),
        args.train_src,
        args.train_tgt,
        out_src=args.out_src,
        out_tgt=args.out_tgt,
        threads=args.threads,
        log=say,
    )
