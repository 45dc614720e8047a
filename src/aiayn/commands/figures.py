"""`python -m aiayn figures`: one experiment's learning curves, learning-rate schedule, throughput
and the encoder self-attention of a dev sentence (last layer, first heads; the paper's Figures 3-5)."""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn.data import vocab
from aiayn.data.binary import EOS
from aiayn.data.corpus import read_lines
from aiayn.errors import UserError
from aiayn.report import figures
from aiayn.training import checkpoint as ckpt


def add_arguments(parser):
    parser.add_argument("--name", required=True, help="experiment name (titles)")
    parser.add_argument("--metrics", required=True, help="the run's metrics.jsonl")
    parser.add_argument("--model", required=True, help="checkpoint whose attention is drawn")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--dev-src", required=True, help="dev source text; its first sentence of 5-25 pieces is shown")
    parser.add_argument("--curves", required=True, help="learning-curves image to write (PNG)")
    parser.add_argument("--lr-plot", required=True, help="learning-rate schedule image to write (PNG)")
    parser.add_argument("--attention", required=True, help="attention-map image to write (PNG)")


@torch.no_grad()
def encoder_attention(model, ids: list[int]) -> torch.Tensor:
    layer = model.encoder[-1].self_attn
    layer.recorded = []
    model.encode(torch.tensor([ids + [EOS]]))
    weights = layer.recorded[0][0]  # (h, S, S)
    layer.recorded = None
    return weights


def run(args) -> int:
    if not Path(args.metrics).is_file():
        raise UserError(f"{args.metrics}: no metrics file; the run's training writes it")
    for path in (args.curves, args.lr_plot, args.attention):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    figures.learning_curves(args.metrics, args.curves, f"{args.name}: training")
    figures.learning_rate(args.metrics, args.lr_plot, f"{args.name}: learning rate (§5.3)")
    model = ckpt.rebuild(ckpt.load(args.model)).eval()
    sp = vocab.load(args.spm_src)
    lines = list(read_lines(args.dev_src))
    ids = next((x for x in vocab.encode(sp, lines) if 5 <= len(x) <= 25), vocab.encode(sp, lines[:1])[0])
    pieces = [sp.IdToPiece(i) for i in ids] + ["</s>"]
    figures.attention_maps(
        encoder_attention(model, ids), pieces, args.attention, f"{args.name}: encoder self-attention, last layer"
    )
    return 0
