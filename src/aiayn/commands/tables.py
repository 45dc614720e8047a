"""`python -m aiayn tables`: the paper's Table 2, 3 or 4 with our numbers, as Markdown, CSV and HTML.

Built from whatever has finished: runs without scores show as pending with their progress.
From the DAG (`snakemake table2`) it waits for every run of the table; by hand,
`python -m aiayn tables --config config.yaml --table 2` writes the partial table now.
"""

from __future__ import annotations

from aiayn.commands import at_least, library_default, load_json, say


def add_arguments(parser):
    parser.add_argument("--table", type=int, choices=[2, 3, 4], required=True, help="the paper's table number")
    parser.add_argument("--experiments", help="JSON list of the table's experiments (what the rule passes)")
    parser.add_argument("--config", help="or: the study config, to build the table from whatever has finished")
    parser.add_argument("--results", help="results folder (default: the config's `results`)")
    parser.add_argument(
        "--bootstrap",
        type=at_least(0),
        default=library_default("aiayn.report.tables.write_table", "bootstrap"),
        help="paired bootstrap samples for Table 3 p-values, 0: none (default %(default)s)",
    )
    parser.add_argument("--baselines", action="store_true", help="add copy / word-by-word / right-branching baselines")
    parser.add_argument("--out-md", help="Markdown table to write (default: the results' tables folder)")
    parser.add_argument("--out-csv", help="CSV of the same rows, every column, to write")
    parser.add_argument("--out-html", help="HTML page of the Markdown's table and notes (default: beside --out-md)")
    parser.add_argument("--study", help="one line naming the config files of the study, printed atop the table")


def run(args) -> int:
    from aiayn.report.tables import write_table  # pandas: imported when the command runs, not for --help

    write_table(
        args.table,
        experiments=load_json(args.experiments, "--experiments", expect=list) if args.experiments else None,
        config=args.config,
        results=args.results,
        bootstrap=args.bootstrap,
        with_baselines=args.baselines,
        study=args.study,
        out_md=args.out_md,
        out_csv=args.out_csv,
        out_html=args.out_html,
        log=say,
    )
    return 0
