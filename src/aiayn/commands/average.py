"""`python -m aiayn average`: average the last K checkpoints of a run (§6.1: 5 base, 20 big)."""

from __future__ import annotations

from aiayn import checkpoint as ckpt
from aiayn.average import average, last_checkpoints


def add_arguments(parser):
    parser.add_argument("--checkpoints", required=True, help="folder of step checkpoints of one run")
    parser.add_argument("--last", type=int, required=True, help="how many of the newest checkpoints to average")
    parser.add_argument("--out", required=True, help="averaged model to write")


def run(args) -> int:
    paths = last_checkpoints(args.checkpoints, args.last)
    result = average(paths)
    ckpt.save(result, args.out)
    print(f"averaged steps {result['averaged_steps']} -> {args.out}")
    return 0
