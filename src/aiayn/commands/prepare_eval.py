"""`python -m aiayn prepare-eval`: one dev/test set (plain text or WMT SGML) -> aligned text."""

from __future__ import annotations

from aiayn.commands import load_json
from aiayn.corpus import prepare_eval


def add_arguments(parser):
    parser.add_argument("--spec", required=True, help='JSON: {"src": member, "tgt": member, "lines": N}')
    parser.add_argument("--name", required=True, help="name of the set (for messages)")
    parser.add_argument("--archive", required=True, help="the downloaded archive holding it")
    parser.add_argument("--src", required=True)
    parser.add_argument("--tgt", required=True)


def run(args) -> int:
    n = prepare_eval(load_json(args.spec, "--spec"), args.name, args.archive, args.src, args.tgt)
    print(f"{args.name}: {n} segments -> {args.src}, {args.tgt}")
    return 0
