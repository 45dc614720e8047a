"""`python -m aiayn prepare-eval`: one dev/test set (plain text or WMT SGML) -> aligned text."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data.prepare import prepare_eval


def add_arguments(parser):
    parser.add_argument("--spec", required=True, help='JSON: {"src": member, "tgt": member, "lines": N}')
    parser.add_argument("--name", required=True, help="name of the set (for messages)")
    parser.add_argument("--archive", default="", help="the downloaded archive holding it (none: files on disk)")
    parser.add_argument("--dataset", help="the dataset's name (messages name its config keys)")
    parser.add_argument("--src", required=True, help="source side to write, one segment per line")
    parser.add_argument("--tgt", required=True, help="reference side to write, aligned with --src")


def run(args) -> int:
    prepare_eval(
        settings(args.spec, "--spec", "eval_set"),
        args.name,
        args.archive or None,
        out_src=args.src,
        out_tgt=args.tgt,
        dataset=args.dataset,
        log=say,
    )
    return 0
