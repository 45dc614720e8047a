"""`python -m aiayn table1`: Table 1 of the paper (§4), measured: complexity per layer, sequential
operations and maximum path length of the four layer types (`aiayn.report.table1`)."""

from __future__ import annotations

from aiayn.commands import at_least, say, settings


def add_arguments(parser):
    parser.add_argument(
        "--settings",
        default="{}",
        help='JSON: {"d_model": 512, "n": [16, ..., 4096], "d": [128, ..., 1024], "k": 3, "r": 16, '
        '"path_n": [8, 16, 32, 64], "repeats": 3} (config key table1; what is not given is its default)',
    )
    parser.add_argument("--out-md", required=True, help="the table as Markdown")
    parser.add_argument("--out-csv", required=True, help="the table as CSV")
    parser.add_argument("--figure", required=True, help="log-log FLOPs and time against n (PNG)")
    parser.add_argument("--threads", type=at_least(0), default=0, help="torch threads (0: torch's default)")


def run(args) -> int:
    from aiayn.report import table1  # torch: imported when the command runs, not for --help

    table1.write(
        settings(args.settings, "--settings", "table1"),
        out_md=args.out_md,
        out_csv=args.out_csv,
        figure_path=args.figure,
        threads=args.threads,
        log=say,
    )
    return 0
