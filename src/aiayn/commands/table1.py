"""`python -m aiayn table1`: Table 1 of the paper (§4), measured: complexity per layer, sequential
operations and maximum path length of the four layer types (`aiayn.report.table1`)."""

from __future__ import annotations

import json

from aiayn.commands import at_least, library_default, say, settings
from aiayn.inventory import OUTPUT, schema
from aiayn.study import config


def add_arguments(add):
    add(
        "--settings",
        type=schema("table1"),
        default="{}",
        help=f"JSON, config key table1; what is not given is its default: {json.dumps(config.defaults('table1'))}",
    )
    add("--out-md", type=OUTPUT, required=True, help="the table as the paper prints it, ours under it (Markdown)")
    add("--out-csv", type=OUTPUT, required=True, help="the table, every column (CSV)")
    add("--out-html", type=OUTPUT, required=True, help="the table as the paper prints it, as an HTML page")
    add("--figure", type=OUTPUT, required=True, help="log-log FLOPs and time against n (PNG)")
    add(
        "--threads",
        type=at_least(0),
        default=library_default("aiayn.report.table1.write", "threads"),
        help="torch threads, 0: torch's own (default %(default)s)",
    )


def run(args) -> None:
    from aiayn.report import table1  # torch: imported when the command runs, not for --help

    table1.write(
        settings(args.settings, "--settings", "table1"),
        out_md=args.out_md,
        out_csv=args.out_csv,
        out_html=args.out_html,
        figure_path=args.figure,
        threads=args.threads,
        log=say,
    )
