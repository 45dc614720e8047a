"""`python -m aiayn generate`: the offline demo's archives (a made-up language pair or treebank)."""

from __future__ import annotations

from pathlib import Path

from aiayn import demo
from aiayn.commands import load_json


def add_arguments(parser):
    parser.add_argument(
        "--spec", required=True, help='JSON: {"kind": "translation"|"treebank", "seed": 1, "sizes": {...}}'
    )
    parser.add_argument("--out", required=True)


def run(args) -> int:
    spec = load_json(args.spec, "--spec")
    write = demo.write_translation_archive if spec["kind"] == "translation" else demo.write_treebank_archive
    write(Path(args.out), spec.get("seed", 1), spec["sizes"])
    print(f"generated {spec['kind']} archive {args.out}: {spec['sizes']}")
    return 0
