"""`python -m aiayn generate`: the offline demo's archives (a made-up language pair or treebank)."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data import generate


def add_arguments(parser):
    parser.add_argument(
        "--spec", required=True, help='JSON: {"kind": "translation"|"treebank", "seed": 1, "sizes": {...}}'
    )
    parser.add_argument("--out", required=True, help="path of the archive to write (.tgz)")


def run(args) -> int:
    generate.write_archive(settings(args.spec, "--spec", "generate"), args.out, log=say)
    return 0
