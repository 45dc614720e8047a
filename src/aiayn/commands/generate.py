"""`python -m aiayn generate`: the offline demo's archives (a made-up language pair or treebank)."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.data import generate
from aiayn.inventory import OUTPUT, schema


def add_arguments(add):
    add(
        "--spec",
        type=schema("generate"),
        required=True,
        help='JSON: {"kind": "translation"|"treebank", "seed": 1, "sizes": {...}}',
    )
    add("--out", type=OUTPUT, required=True, help="path of the archive to write (.tgz)")


def run(args) -> None:
    generate.write_archive(settings(args.spec, "--spec", "generate"), args.out, log=say)
