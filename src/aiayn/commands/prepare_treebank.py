"""`python -m aiayn prepare-treebank`: one WSJ split -> words, linearized trees, gold trees (§6.3)."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.inventory import OUTPUT, file, schema, text
from aiayn.parsing.prepare_treebank import write_split


def add_arguments(add):
    add("--dataset", type=schema("dataset"), required=True, help="the parsing dataset's settings (JSON)")
    add(
        "--split",
        type=text("aiayn.parsing.prepare_treebank.write_split"),
        required=True,
        help='"train" or the name of an eval set',
    )
    add("--src", type=OUTPUT, required=True, help="words, one sentence per line")
    add("--tgt", type=OUTPUT, required=True, help="linearized trees")
    add("--gold", type=OUTPUT, required=True, help="preprocessed gold trees under TOP, for EVALB")
    add(
        "--treebank-archive",
        type=file("archive"),
        default="",
        help="read the treebank from this archive instead of datasets.<name>.treebank",
    )


def run(args) -> None:
    write_split(
        settings(args.dataset, "--dataset", "dataset", partial=True),
        args.split,
        out_src=args.src,
        out_tgt=args.tgt,
        out_gold=args.gold,
        archive=args.treebank_archive or None,
        log=say,
    )
