"""`python -m aiayn vocab`: sentencepiece vocabularies (§5.1: shared 37k BPE EN-DE, 32k EN-FR)."""

from __future__ import annotations

from aiayn.commands import at_least, library_default, say, settings
from aiayn.data import vocab


def add_arguments(parser):
    parser.add_argument(
        "--vocab",
        required=True,
        help='JSON: {"model_type": "bpe", "size": 37000, "shared": true, "input_sentence_size": N} '
        "(a dataset's `vocab:` settings; what is not given is the schema's default)",
    )
    parser.add_argument("--train-src", required=True, help="source training text, one sentence per line")
    parser.add_argument("--train-tgt", required=True, help="target training text, aligned with --train-src")
    parser.add_argument(
        "--out-src", required=True, help="source sentencepiece model to write (.model; a .vocab beside it)"
    )
    parser.add_argument(
        "--out-tgt", required=True, help="target sentencepiece model to write (a copy of --out-src when shared)"
    )
    parser.add_argument(
        "--threads",
        type=at_least(1),
        default=library_default("aiayn.data.vocab.train_pair", "threads"),
        help="sentencepiece trainer threads (default %(default)s)",
    )


def run(args) -> int:
    vocab.train_pair(
        settings(args.vocab, "--vocab", "vocab"),
        args.train_src,
        args.train_tgt,
        out_src=args.out_src,
        out_tgt=args.out_tgt,
        threads=args.threads,
        log=say,
    )
    return 0
