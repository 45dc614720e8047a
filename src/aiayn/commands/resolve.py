"""`python -m aiayn resolve`: write the resolved training settings of one experiment.

The Snakemake rule passes the settings (preset ← experiment diff, resolved by `aiayn.study`) as
JSON; the file it writes is the training job's input, so changing one experiment's settings
retrains only that experiment.
"""

from __future__ import annotations

from aiayn.commands import load_json
from aiayn.errors import UserError
from aiayn.io import write_json

REQUIRED = ("name", "dataset", "task", "model", "train", "vocab")


def add_arguments(parser):
    parser.add_argument("--settings", required=True, help="resolved settings as a JSON object")
    parser.add_argument("--out", required=True, help="experiment.json to write")


def run(args) -> int:
    settings = load_json(args.settings, "--settings", expect=dict)
    missing = [k for k in REQUIRED if k not in settings]
    if missing:
        raise UserError(f"--settings lacks {', '.join(missing)}")
    write_json(args.out, settings)
    return 0
