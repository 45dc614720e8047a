"""`python -m aiayn average`: average the last K checkpoints of a run (§6.1: 5 base, 20 big), those
on its checkpoint grid only (`aiayn.training.average`)."""

from __future__ import annotations

from aiayn.commands import at_least, say
from aiayn.inventory import OUTPUT, Check


def add_arguments(add):
    add(
        "--checkpoints",
        type=Check("folder", "aiayn.training.average.newest_on_grid"),
        required=True,
        help="folder of step checkpoints of one run",
    )
    add("--last", type=at_least(1), required=True, help="how many of the newest grid checkpoints to average")
    add("--interval", type=at_least(1), required=True, help="the run's checkpoint_interval (updates)")
    add("--final-step", type=at_least(1), required=True, help="the run's last update (training steps)")
    add("--out", type=OUTPUT, required=True, help="averaged model to write")
    add("--record", type=OUTPUT, help="also write the averaged steps here (JSON), for the tables")


def run(args) -> None:
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
