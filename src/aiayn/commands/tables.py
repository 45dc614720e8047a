"""`python -m aiayn tables`: the paper's Table 2, 3 or 4 with our numbers, as Markdown, CSV and HTML.

Built from whatever has finished: runs without scores show as pending with their progress.
From the DAG (`snakemake table2`) it waits for every run of the table; by hand,
`python -m aiayn tables --config config.yaml --table 2` writes the partial table now.
"""

from __future__ import annotations

from aiayn.commands import at_least, library_default, load_json, say
from aiayn.inventory import OUTPUT, Check, file, text


def add_arguments(add):
    add("--table", type=int, choices=[2, 3, 4], required=True, help="the paper's table number")
    add(
        "--experiments",
        type=text("aiayn.report.tables.check_spec"),
        help="JSON list of the table's experiments (what the rule passes)",
    )
    add(
        "--config",
        type=file("study config"),
        help="or: the study config, to build the table from whatever has finished",
    )
    add(
        "--results",
        type=Check("run folder", "aiayn.report.tables.write_table", ".*\\.jsonl?"),
        help="results folder (default: the config's `results`)",
    )
    add(
        "--bootstrap",
        type=at_least(0),
        default=library_default("aiayn.report.tables.write_table", "bootstrap"),
        help="paired bootstrap samples for Table 3 p-values, 0: none (default %(default)s)",
    )
    add("--baselines", action="store_true", help="add copy / word-by-word / right-branching baselines")
    add("--out-md", type=OUTPUT, help="Markdown table to write (default: the results' tables folder)")
    add("--out-csv", type=OUTPUT, help="CSV of the same rows, every column, to write")
    add("--out-html", type=OUTPUT, help="HTML page of the Markdown's table and notes (default: beside --out-md)")
    add(
        "--study",
        type=text("aiayn.report.notes.document"),
        help="one line naming the config files of the study, printed atop the table",
    )


def run(args) -> None:
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
