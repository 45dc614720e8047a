"""`python -m aiayn evalb GOLD TEST`: EVALB with COLLINS.prm (precision, recall, F1, complete match)."""

from __future__ import annotations

from aiayn.commands import say
from aiayn.inventory import file
from aiayn.parsing.evalb import evalb_files


def add_arguments(add):
    add("gold", type=file("trees"), help="gold trees, one per line")
    add("test", type=file("trees"), help="parsed trees, one per line")


def run(args) -> None:
    evalb_files(args.gold, args.test, log=say)
