"""`python -m aiayn vocab-info`: a dataset's vocabularies against the sizes asked, as JSON (vocab.json).

sentencepiece makes fewer pieces than asked when the text cannot support more (a small corpus,
few distinct words); this record says so, with the reason, where a reader of the results looks.
"""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data import vocab
from aiayn.inventory import OUTPUT, SPM, TEXT, schema


def add_arguments(add):
    add(
        "--vocab",
        type=schema("vocab"),
        required=True,
        help='JSON: the dataset\'s vocabulary settings {"model_type", "size", "shared"}',
    )
    add("--spm-src", type=SPM, required=True, help="source sentencepiece model")
    add("--spm-tgt", type=SPM, required=True, help="target sentencepiece model")
    add("--train-src", type=TEXT, required=True, help="source training text the models were trained on")
    add("--train-tgt", type=TEXT, required=True, help="target training text the models were trained on")
    add("--out", type=OUTPUT, required=True, help="JSON to write: per side, pieces made, pieces asked, reason")


def run(args) -> None:
    vocab.write_info(
        settings(args.vocab, "--vocab", "vocab"),
        args.spm_src,
        args.spm_tgt,
        text_src=args.train_src,
        text_tgt=args.train_tgt,
        out=args.out,
        log=say,
    )
