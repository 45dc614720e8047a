"""`python -m aiayn evalb GOLD TEST`: EVALB with COLLINS.prm (precision, recall, F1, complete match)."""

from __future__ import annotations

from aiayn.corpus import read_lines
from aiayn.evalb import evalb, format_summary


def add_arguments(parser):
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parsed trees, one per line")


def run(args) -> int:
    result = evalb(list(read_lines(args.gold)), list(read_lines(args.test)))
    for message in result["errors"]:
        print(message)
    print(format_summary(result))
    return 0
