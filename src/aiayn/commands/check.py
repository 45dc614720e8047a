"""`python -m aiayn check`: the paper's known failure modes, measured on one experiment's model
before it trains (`aiayn.training.check`): future leakage, padding, attention logits and scale,
embedding scale, shifted target input, tied weights, the §5.3 schedule, label smoothing. Writes
check.json when every check passes; exits 2 with the first failure's line otherwise."""

from __future__ import annotations

from aiayn.commands import say, say_to_log


def add_arguments(parser):
    parser.add_argument("--settings", required=True, help="experiment.json written by `aiayn resolve`")
    parser.add_argument("--train", required=True, help="encoded training data (.bin): its sizes and a few pairs")
    parser.add_argument("--out", required=True, help="check.json to write (every check's figure)")


def run(args) -> int:
    from aiayn.training.check import check_job  # torch: imported when the command runs, not for --help

    return check_job(args.settings, args.train, args.out, log=say, detail=say_to_log)
