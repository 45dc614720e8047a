"""`python -m aiayn prepare-treebank`: one WSJ split -> words, linearized trees, gold trees (§6.3)."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.parsing.prepare_treebank import write_split


def add_arguments(parser):
    parser.add_argument("--dataset", required=True, help="the parsing dataset's settings (JSON)")
    parser.add_argument("--split", required=True, help='"train" or the name of an eval set')
    parser.add_argument("--src", required=True, help="words, one sentence per line")
    parser.add_argument("--tgt", required=True, help="linearized trees")
    parser.add_argument("--gold", required=True, help="preprocessed gold trees under TOP, for EVALB")
    parser.add_argument(
        "--treebank-archive", default="", help="read the treebank from this archive instead of datasets.<name>.treebank"
    )


def run(args) -> int:
    write_split(
        settings(args.dataset, "--dataset", "dataset", partial=True),
        args.split,
        out_src=args.src,
        out_tgt=args.tgt,
        out_gold=args.gold,
        archive=args.treebank_archive or None,
        log=say,
    )
    return 0
