"""`python -m aiayn select`: the best candidate of a tuning grid on the dev set (§6.3) becomes the
experiment's model (`aiayn.evaluation.select`)."""

from __future__ import annotations

from aiayn.commands import say, settings_list
from aiayn.evaluation.select import select


def add_arguments(parser):
    parser.add_argument(
        "--candidates",
        required=True,
        help='JSON list: [{"name", "setting": {...}, "score": dev score file, "model": last.pt, "metrics": jsonl}]',
    )
    parser.add_argument(
        "--out-model", required=True, help="where the selected model is copied (the experiment's last.pt)"
    )
    parser.add_argument("--out-metrics", required=True, help="where its metrics.jsonl is copied")
    parser.add_argument("--record", required=True, help="selected.json: which candidate, and every candidate's score")


def run(args) -> int:
    select(
        settings_list(args.candidates, "--candidates", "candidate"),
        out_model=args.out_model,
        out_metrics=args.out_metrics,
        record=args.record,
        log=say,
    )
    return 0
