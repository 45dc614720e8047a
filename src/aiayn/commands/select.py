"""`python -m aiayn select`: the best candidate of a tuning grid on the dev set (§6.3) becomes the
experiment's model (`aiayn.evaluation.select`)."""

from __future__ import annotations

from aiayn.commands import say, settings_list
from aiayn.evaluation.select import select
from aiayn.inventory import OUTPUT, Check


def add_arguments(add):
    add(
        "--candidates",
        type=Check("settings list", "candidate"),
        required=True,
        help='JSON list: [{"name", "setting": {...}, "score": dev score file, "model": last.pt, "metrics": jsonl}]',
    )
    add("--out-model", type=OUTPUT, required=True, help="where the selected model is copied (the experiment's last.pt)")
    add("--out-metrics", type=OUTPUT, required=True, help="where its metrics.jsonl is copied")
    add("--record", type=OUTPUT, required=True, help="selected.json: which candidate, and every candidate's score")


def run(args) -> None:
    select(
        settings_list(args.candidates, "--candidates", "candidate"),
        out_model=args.out_model,
        out_metrics=args.out_metrics,
        record=args.record,
        log=say,
    )
