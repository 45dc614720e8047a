"""`python -m aiayn average`: average the last K checkpoints of a run (§6.1: 5 base, 20 big), those
on its checkpoint grid only (`aiayn.training.average`)."""

from __future__ import annotations

from aiayn.commands import at_least, say


def add_arguments(parser):
    parser.add_argument("--checkpoints", required=True, help="folder of step checkpoints of one run")
    parser.add_argument(
        "--last", type=at_least(1), required=True, help="how many of the newest grid checkpoints to average"
    )
    parser.add_argument("--interval", type=at_least(1), required=True, help="the run's checkpoint_interval (updates)")
    parser.add_argument("--final-step", type=at_least(1), required=True, help="the run's last update (training steps)")
    parser.add_argument("--out", required=True, help="averaged model to write")
    parser.add_argument("--record", help="also write the averaged steps here (JSON), for the tables")


def run(args) -> int:
    from aiayn.training.average import average_run  # torch: imported when the command runs, not for --help

    average_run(
        args.checkpoints,
        args.out,
        k=args.last,
        interval=args.interval,
        final=args.final_step,
        record=args.record,
        log=say,
    )
    return 0
