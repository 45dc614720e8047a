"""`python -m aiayn vocab-info`: a dataset's vocabularies against the sizes asked, as JSON (vocab.json).

sentencepiece makes fewer pieces than asked when the text cannot support more (a small corpus,
few distinct words); this record says so, with the reason, where a reader of the results looks.
"""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data import vocab


def add_arguments(parser):
    parser.add_argument(
        "--vocab", required=True, help='JSON: the dataset\'s vocabulary settings {"model_type", "size", "shared"}'
    )
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model")
    parser.add_argument("--train-src", required=True, help="source training text the models were trained on")
    parser.add_argument("--train-tgt", required=True, help="target training text the models were trained on")
    parser.add_argument("--out", required=True, help="JSON to write: per side, pieces made, pieces asked, reason")


def run(args) -> int:
    vocab.write_info(
        settings(args.vocab, "--vocab", "vocab"),
        args.spm_src,
        args.spm_tgt,
        text_src=args.train_src,
        text_tgt=args.train_tgt,
        out=args.out,
        log=say,
    )
    return 0
