"""`python -m aiayn check`: one experiment's own trainer and decoder against the paper written again,
before it trains (`aiayn.check`, its registry `aiayn.check.check.CHECKS`). Writes check.json when
every check passes; exits 2 with the first failure's line otherwise."""

from __future__ import annotations

from aiayn.commands import say, say_to_log
from aiayn.inventory import ENCODED, EXPERIMENT, OUTPUT


def add_arguments(add):
    add("--settings", type=EXPERIMENT, required=True, help="experiment.json written by `aiayn resolve`")
    add("--train", type=ENCODED, required=True, help="encoded training data (.bin): its sizes and a few pairs")
    add("--out", type=OUTPUT, required=True, help="check.json to write (every check's figure)")


def run(args) -> int:
    from aiayn.check.check import check_job  # torch: imported when the command runs, not for --help

    return check_job(args.settings, args.train, args.out, log=say, detail=say_to_log)
