"""`python -m aiayn prepare-eval`: one dev/test set (plain text or WMT SGML) -> aligned text."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data.prepare import prepare_eval
from aiayn.inventory import OUTPUT, file, schema, text


def add_arguments(add):
    add("--spec", type=schema("eval_set"), required=True, help='JSON: {"src": member, "tgt": member, "lines": N}')
    add("--name", type=text("aiayn.data.prepare.prepare_eval"), required=True, help="name of the set (for messages)")
    add("--archive", type=file("archive"), default="", help="the downloaded archive holding it (none: files on disk)")
    add(
        "--dataset",
        type=text("aiayn.data.prepare.prepare_eval"),
        help="the dataset's name (messages name its config keys)",
    )
    add("--src", type=OUTPUT, required=True, help="source side to write, one segment per line")
    add("--tgt", type=OUTPUT, required=True, help="reference side to write, aligned with --src")


def run(args) -> None:
    prepare_eval(
        settings(args.spec, "--spec", "eval_set"),
        args.name,
        args.archive or None,
        out_src=args.src,
        out_tgt=args.tgt,
        dataset=args.dataset,
        log=say,
    )
