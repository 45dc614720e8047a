"""`python -m aiayn prepare`: a dataset's training corpora -> aligned, cleaned train.src / train.tgt."""

from __future__ import annotations

from aiayn.commands import say, settings, settings_list
from aiayn.data.prepare import prepare_train


def add_arguments(parser):
    parser.add_argument(
        "--corpora", required=True, help='JSON list: [{"archive": ..., "src": member, "tgt": member}, ...]'
    )
    parser.add_argument("--archives", required=True, help='JSON: {"archive name": "path of the downloaded archive"}')
    parser.add_argument(
        "--cleaning",
        default="{}",
        help='JSON: the pairs kept, {"min_len", "max_len", "max_ratio"} (lengths in words per side, ratio of the '
        "longer side to the shorter); what is not given is config.yaml's `cleaning` default",
    )
    parser.add_argument("--src", required=True, help="cleaned source side to write, one sentence per line")
    parser.add_argument("--tgt", required=True, help="cleaned target side to write, aligned with --src")
    parser.add_argument("--report", required=True, help="JSON with the counts kept and removed")


def run(args) -> int:
    prepare_train(
        settings_list(args.corpora, "--corpora", "member_pair"),
        settings(args.archives, "--archives", "archive_paths"),
        settings(args.cleaning, "--cleaning", "cleaning"),
        out_src=args.src,
        out_tgt=args.tgt,
        report_path=args.report,
        log=say,
    )
    return 0
