"""`python -m aiayn vocab`: sentencepiece vocabularies (§5.1: shared 37k BPE EN-DE, 32k EN-FR).

With a shared vocabulary one model is trained on both sides and written under both names
(three-way weight tying needs one vocabulary); otherwise one model per side.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.commands import load_json
from aiayn.data import vocab
from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.io import atomic_copy


def add_arguments(parser):
    parser.add_argument(
        "--vocab",
        required=True,
        help='JSON: {"model_type": "bpe", "size": 37000, "shared": true, "input_sentence_size": N}',
    )
    parser.add_argument("--train-src", required=True, help="source training text, one sentence per line")
    parser.add_argument("--train-tgt", required=True, help="target training text, aligned with --train-src")
    parser.add_argument(
        "--out-src", required=True, help="source sentencepiece model to write (.model; a .vocab beside it)"
    )
    parser.add_argument(
        "--out-tgt", required=True, help="target sentencepiece model to write (a copy of --out-src when shared)"
    )
    parser.add_argument("--threads", type=int, default=1, help="sentencepiece trainer threads")


def run(args) -> int:
    settings = {**vocab.SETTINGS, **load_json(args.vocab, "--vocab", expect=dict)}
    common = dict(
        model_type=settings["model_type"],
        size=settings["size"],
        input_sentence_size=settings["input_sentence_size"],
        threads=args.threads,
    )
    for path in (args.train_src, args.train_tgt):
        if not Path(path).is_file():
            raise UserError(f"{path}: training text not found")
        if not any(line.strip() for line in read_lines(path)):
            raise UserError(f"{path}: no sentences to train a vocabulary on; rerun the prepare step")
    if settings["shared"]:
        vocab.train([args.train_src, args.train_tgt], args.out_src, **common)
        atomic_copy(args.out_src, args.out_tgt)
    else:
        vocab.train([args.train_src], args.out_src, **common)
        vocab.train([args.train_tgt], args.out_tgt, **common)
    for side, info in vocab.describe_pair(settings, args.out_src, args.out_tgt, args.train_src, args.train_tgt).items():
        print(f"{side} vocabulary: {info['pieces']} pieces -> {info['model']}")
        if info["reason"]:
            print(f"{side} vocabulary: {info['reason']}")
    return 0
