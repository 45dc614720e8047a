"""`python -m aiayn params`: counted parameters of every experiment's model beside the paper's
(`aiayn.report.plan`: no training, no data)."""

from __future__ import annotations

from aiayn.commands import say
from aiayn.inventory import file, text


def add_arguments(add):
    add("--config", type=file("study config"), default="config.yaml", help="study configuration (default: config.yaml)")
    add(
        "--experiment",
        type=text("aiayn.study.grid.Study.experiment"),
        action="append",
        help="only this experiment (repeatable)",
    )


def run(args) -> None:
    from aiayn.report.plan import print_parameters  # torch: imported when the command runs, not for --help

    print_parameters(args.config, args.experiment, log=say)
