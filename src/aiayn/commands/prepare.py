"""`python -m aiayn prepare`: a dataset's training corpora -> aligned, cleaned train.src / train.tgt."""

from __future__ import annotations

from aiayn.commands import load_json
from aiayn.data.corpus import prepare_train


def add_arguments(parser):
    parser.add_argument(
        "--corpora", required=True, help='JSON list: [{"archive": ..., "src": member, "tgt": member}, ...]'
    )
    parser.add_argument("--archives", required=True, help='JSON: {"archive name": "path of the downloaded archive"}')
    parser.add_argument(
        "--cleaning",
        default='{"min_len": 1, "max_len": 250, "max_ratio": 1.5}',
        help="JSON: pairs kept (lengths in words per side, ratio of the longer side to the shorter)",
    )
    parser.add_argument("--src", required=True, help="cleaned source side to write, one sentence per line")
    parser.add_argument("--tgt", required=True, help="cleaned target side to write, aligned with --src")
    parser.add_argument("--report", required=True, help="JSON with the counts kept and removed")


def run(args) -> int:
    report = prepare_train(
        load_json(args.corpora, "--corpora"),
        load_json(args.archives, "--archives"),
        load_json(args.cleaning, "--cleaning"),
        args.src,
        args.tgt,
        args.report,
    )
    removed = ", ".join(f"{k} {v:,}" for k, v in report["removed"].items())
    print(
        f"{report['kept']:,} pairs kept; removed: {removed}; line separators replaced: {report['separators_replaced']}"
    )
    return 0
