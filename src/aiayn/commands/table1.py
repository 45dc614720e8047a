"""`python -m aiayn table1`: Table 1 of the paper (§4), measured: complexity per layer, sequential
operations and maximum path length of the four layer types (`aiayn.table1`)."""

from __future__ import annotations

import torch

from aiayn.commands import load_json
from aiayn.errors import UserError
from aiayn.io import atomic_write_text
from aiayn.report import table1
from aiayn.report.tables import to_csv


def add_arguments(parser):
    parser.add_argument(
        "--settings",
        default="{}",
        help='JSON: {"d_model": 512, "n": [16, ..., 4096], "d": [128, ..., 1024], "k": 3, "r": 16, '
        '"path_n": [8, 16, 32, 64], "repeats": 3} (config key table1)',
    )
    parser.add_argument("--out-md", required=True, help="the table as Markdown")
    parser.add_argument("--out-csv", required=True, help="the table as CSV")
    parser.add_argument("--figure", required=True, help="log-log FLOPs and time against n (PNG)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")


DEFAULTS = {"d_model": 512, "n": [16, 64, 256, 1024, 4096], "d": [128, 256, 512], "k": 3, "r": 16,
            "path_n": [8, 16, 32, 64], "repeats": 3}  # fmt: skip


def run(args) -> int:
    settings = {**DEFAULTS, **load_json(args.settings, "--settings", expect=dict)}
    if len(settings["n"]) < 2 or len(settings["d"]) < 2:
        raise UserError("--settings: n and d need at least two values each (the exponents are slopes)")
    if settings["d_model"] % 8 or any(w % 8 for w in settings["d"]):
        raise UserError("--settings: d_model and every d must be multiples of 8 (8 attention heads)")
    if args.threads:
        torch.set_num_threads(args.threads)
    result = table1.measure(
        d=settings["d_model"],
        ns=sorted(settings["n"]),
        ds=sorted(settings["d"]),
        k=settings["k"],
        r=settings["r"],
        path_ns=settings["path_n"],
        repeats=settings["repeats"],
    )
    atomic_write_text(args.out_md, table1.markdown(result, {**settings, "n": sorted(settings["n"])}))
    atomic_write_text(args.out_csv, to_csv(result.rows))
    table1.figure(result, args.figure)
    for row in result.rows:
        print(
            f"{row['layer']}: n-exponent {row['n_exponent_flops']} (paper {row['paper_n_exponent']}), "
            f"d-exponent {row['d_exponent_flops']} (paper {row['paper_d_exponent']}), path {row['path_length']}"
        )
    return 0
