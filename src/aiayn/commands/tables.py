"""`python -m aiayn tables`: the paper's Table 2, 3 or 4 with our numbers, as Markdown and CSV.

Built from whatever has finished: runs without scores show as pending with their progress.
From the DAG (`snakemake table2`) it waits for every run of the table; by hand,
`python -m aiayn tables --config config.yaml --table 2` writes the partial table now.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.commands import load_json
from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.evaluation import baselines
from aiayn.evaluation.score import paired_bootstrap_p
from aiayn.io import atomic_write_text
from aiayn.report import tables
from aiayn.study import config as cfg
from aiayn.study.grid import Study


def add_arguments(parser):
    parser.add_argument("--table", type=int, choices=[2, 3, 4], required=True, help="the paper's table number")
    parser.add_argument("--experiments", help="JSON list of the table's experiments (what the rule passes)")
    parser.add_argument("--config", help="or: the study config, to build the table from whatever has finished")
    parser.add_argument("--results", help="results folder (default: the config's `results`)")
    parser.add_argument(
        "--bootstrap", type=int, default=0, help="paired bootstrap samples for Table 3 p-values (0: none)"
    )
    parser.add_argument("--baselines", action="store_true", help="add copy / word-by-word / right-branching baselines")
    parser.add_argument("--out-md", help="Markdown table to write (default: print it)")
    parser.add_argument("--out-csv", help="CSV of the same rows to write")
    parser.add_argument("--study", help="one line naming the config files of the study, printed atop the table")


SPEC_KEYS = ("name", "row", "dataset", "testset", "model", "steps", "average", "paper", "preset", "task", "train")


def check_experiments(experiments: list) -> None:
    """--experiments is what `Study.table_spec` writes; name what a hand-made one lacks."""
    for i, exp in enumerate(experiments):
        missing = [k for k in SPEC_KEYS if not isinstance(exp, dict) or k not in exp]
        if missing:
            name = exp.get("name", f"#{i + 1}") if isinstance(exp, dict) else f"#{i + 1}"
            raise UserError(
                f"--experiments: experiment {name} lacks {', '.join(missing)}; "
                "use --config (or what `snakemake table<n>` passes)"
            )


def run(args) -> int:
    if args.experiments:
        experiments = load_json(args.experiments, "--experiments", expect=list)
        check_experiments(experiments)
        results = Path(args.results or "results")
    elif args.config:
        config = cfg.load(args.config)
        experiments = Study(config).table_spec(args.table)
        results = Path(args.results or config["results"])
        args.baselines = args.baselines or config["baselines"]
    else:
        raise UserError("give --experiments (JSON) or --config (the study config)")
    rows = tables.build(args.table, results, experiments)
    if args.table == 3 and args.bootstrap:
        add_p_values(rows, results, experiments, args.bootstrap)
    if args.baselines and args.table in (2, 4):
        rows = tables.with_extra_rows(rows, baselines.table_rows(args.table, results, experiments))
    md = Path(args.out_md or results / "tables" / f"table{args.table}.md")
    csv = Path(args.out_csv or md.with_suffix(".csv"))
    atomic_write_text(md, tables.markdown_document(args.table, rows, args.study))
    atomic_write_text(csv, tables.to_csv(rows))
    names = {e["name"] for e in experiments}
    done = sum(r["status"] == "done" for r in rows if r.get("experiment") in names)
    print(f"table {args.table}: {done}/{len(experiments)} experiments done -> {md}, {csv}")
    return 0


def add_p_values(rows: list[dict], results: Path, experiments: list[dict], samples: int) -> None:
    """Table 3's p_value_vs_base: each scored row's dev-set translations against the base row's."""
    base = next((e for e in experiments if e.get("row") == "base"), None)
    base_score = base and tables.read_score(results, base["name"], base["testset"])
    if not base_score:
        return
    ref, base_hyp = list(read_lines(base_score["ref"])), list(read_lines(base_score["hyp"]))
    for exp, row in zip(experiments, rows):
        score = tables.read_score(results, exp["name"], exp["testset"])
        if score and exp is not base:
            row["p_value_vs_base"] = paired_bootstrap_p(ref, base_hyp, list(read_lines(score["hyp"])), samples)
