"""`python -m aiayn evalb GOLD TEST`: EVALB with COLLINS.prm (precision, recall, F1, complete match)."""

from __future__ import annotations

from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.parsing.evalb import evalb, format_summary


def add_arguments(parser):
    parser.add_argument("gold", help="gold trees, one per line")
    parser.add_argument("test", help="parsed trees, one per line")


def run(args) -> int:
    gold, test = list(read_lines(args.gold)), list(read_lines(args.test))
    if not any(line.strip() for line in gold):
        raise UserError(f"{args.gold}: no trees to score; give the gold trees, one per line")
    if len(gold) != len(test):
        raise UserError(
            f"{args.test} has {len(test)} lines but {args.gold} has {len(gold)}; they must align line by line"
        )
    result = evalb(gold, test)
    for message in result["errors"]:
        print(message)
    print(format_summary(result))
    return 0
