"""`python -m aiayn generate`: the offline demo's archives (a made-up language pair or treebank)."""

from __future__ import annotations

from pathlib import Path

from aiayn.commands import load_json
from aiayn.data import demo
from aiayn.errors import UserError


def add_arguments(parser):
    parser.add_argument(
        "--spec", required=True, help='JSON: {"kind": "translation"|"treebank", "seed": 1, "sizes": {...}}'
    )
    parser.add_argument("--out", required=True, help="path of the archive to write (.tgz)")


WRITERS = {"translation": demo.write_translation_archive, "treebank": demo.write_treebank_archive}


def run(args) -> int:
    spec = load_json(args.spec, "--spec", expect=dict)
    if spec.get("kind") not in WRITERS:
        raise UserError(f"--spec: kind must be 'translation' or 'treebank', not {spec.get('kind')!r}")
    sizes = spec.get("sizes")
    if not isinstance(sizes, dict) or not sizes or not all(isinstance(n, int) and n > 0 for n in sizes.values()):
        raise UserError(f"--spec: sizes must map each split to a positive number of sentences, not {sizes!r}")
    seed = spec.get("seed", 1)
    if not isinstance(seed, int):
        raise UserError(f"--spec: seed must be a whole number, not {seed!r}")
    WRITERS[spec["kind"]](Path(args.out), seed, sizes)
    print(f"generated {spec['kind']} archive {args.out}: {spec['sizes']}")
    return 0
