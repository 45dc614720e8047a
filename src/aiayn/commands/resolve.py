"""`python -m aiayn resolve`: write the resolved training settings of one experiment (experiment.json).

The Snakemake rule passes the settings (preset ← experiment diff, resolved by `aiayn.study.grid`)
as JSON; the file it writes is the training job's input (`aiayn.study.resolve`).
"""

from __future__ import annotations

from aiayn.commands import load_json
from aiayn.inventory import OUTPUT, Check
from aiayn.study import resolve


def add_arguments(add):
    add(
        "--settings",
        type=Check("experiment settings", "aiayn.study.resolve.write"),
        required=True,
        help="resolved settings as a JSON object",
    )
    add("--out", type=OUTPUT, required=True, help="experiment.json to write")


def run(args) -> None:
    resolve.write(load_json(args.settings, "--settings", expect=dict), args.out)
