"""`python -m aiayn vocab-info`: a dataset's vocabularies against the sizes asked, as JSON (vocab.json).

sentencepiece makes fewer pieces than asked when the text cannot support more (a small corpus,
few distinct words); this record says so, with the reason, where a reader of the results looks.
"""

from __future__ import annotations

import json

from aiayn.commands import load_json
from aiayn.data import vocab
from aiayn.io import atomic_write_text


def add_arguments(parser):
    parser.add_argument(
        "--vocab", required=True, help='JSON: the dataset\'s vocabulary settings {"model_type", "size", "shared"}'
    )
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model")
    parser.add_argument("--train-src", required=True, help="source training text the models were trained on")
    parser.add_argument("--train-tgt", required=True, help="target training text the models were trained on")
    parser.add_argument("--out", required=True, help="JSON to write: per side, pieces made, pieces asked, reason")


def run(args) -> int:
    settings = load_json(args.vocab, "--vocab", expect=dict)
    info = vocab.describe_pair(settings, args.spm_src, args.spm_tgt, args.train_src, args.train_tgt)
    atomic_write_text(args.out, json.dumps(info, indent=2) + "\n")
    for side, one in info.items():
        print(f"{side}: {one['pieces']} of {one['asked']} pieces{'; ' + one['reason'] if one['reason'] else ''}")
    return 0
