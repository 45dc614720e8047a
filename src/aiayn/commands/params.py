"""`python -m aiayn params`: counted parameters of every experiment's model beside the paper's
(`aiayn.report.plan`: no training, no data)."""

from __future__ import annotations

from aiayn.commands import say


def add_arguments(parser):
    parser.add_argument("--config", default="config.yaml", help="study configuration (default: config.yaml)")
    parser.add_argument("--experiment", action="append", help="only this experiment (repeatable)")


def run(args) -> int:
    from aiayn.report.plan import print_parameters  # torch: imported when the command runs, not for --help

    print_parameters(args.config, args.experiment, log=say)
    return 0
