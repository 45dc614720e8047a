"""`python -m aiayn prepare`: a dataset's training corpora -> aligned, cleaned train.src / train.tgt."""

from __future__ import annotations

from aiayn.commands import say, settings, settings_list
from aiayn.data.prepare import prepare_train
from aiayn.inventory import OUTPUT, Check, schema


def add_arguments(add):
    add(
        "--corpora",
        type=Check("settings list", "member_pair"),
        required=True,
        help='JSON list: [{"archive": ..., "src": member, "tgt": member}, ...]',
    )
    add(
        "--archives",
        type=schema("archive_paths"),
        required=True,
        help='JSON: {"archive name": "path of the downloaded archive"}',
    )
    add(
        "--cleaning",
        type=schema("cleaning"),
        default="{}",
        help='JSON: the pairs kept, {"min_len", "max_len", "max_ratio"} (lengths in words per side, ratio of the '
        "longer side to the shorter); what is not given is config.yaml's `cleaning` default",
    )
    add("--src", type=OUTPUT, required=True, help="cleaned source side to write, one sentence per line")
    add("--tgt", type=OUTPUT, required=True, help="cleaned target side to write, aligned with --src")
    add("--report", type=OUTPUT, required=True, help="JSON with the counts kept and removed")


def run(args) -> None:
    prepare_train(
        settings_list(args.corpora, "--corpora", "member_pair"),
        settings(args.archives, "--archives", "archive_paths"),
        settings(args.cleaning, "--cleaning", "cleaning"),
        out_src=args.src,
        out_tgt=args.tgt,
        report_path=args.report,
        log=say,
    )
