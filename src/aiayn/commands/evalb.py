"""`python -m aiayn evalb GOLD TEST`: EVALB with COLLINS.prm (precision, recall, F1, complete match)."""

from __future__ import annotations

from aiayn.commands import say
from aiayn.parsing.evalb import evalb_files


def add_arguments(parser):
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parsed trees, one per line")


def run(args) -> int:
    evalb_files(args.gold, args.test, log=say)
    return 0
