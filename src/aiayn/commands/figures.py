"""`python -m aiayn figures`: one experiment's learning curves, gradient norm, learning-rate schedule,
throughput, the encoder self-attention of a dev sentence (last layer, first heads; the paper's
Figures 3-5) and, given the dev targets, the encoder-decoder attention of every layer on a dev pair
with each layer's distance from the diagonal (figure and JSON)."""

from __future__ import annotations

from aiayn.inventory import CHECKPOINT, OUTPUT, SPM, TEXT, file, text


def add_arguments(add):
    add("--name", type=text("aiayn.report.figures.write_figures"), required=True, help="experiment name (titles)")
    add("--metrics", type=file("metrics"), required=True, help="the run's metrics.jsonl")
    add(
        "--seed-metrics",
        type=file("metrics"),
        nargs="*",
        default=[],
        help="metrics.jsonl of the row's other seeds: their dev perplexity is drawn beside the run's",
    )
    add("--model", type=CHECKPOINT, required=True, help="checkpoint whose attention is drawn")
    add("--spm-src", type=SPM, required=True, help="source sentencepiece model")
    add("--dev-src", type=TEXT, required=True, help="dev source text; its first sentence of 5-25 pieces is shown")
    add("--curves", type=OUTPUT, required=True, help="learning-curves image to write (PNG)")
    add("--lr-plot", type=OUTPUT, required=True, help="learning-rate schedule image to write (PNG)")
    add("--attention", type=OUTPUT, required=True, help="attention-map image to write (PNG)")
    add("--spm-tgt", type=SPM, help="target sentencepiece model (with --dev-tgt)")
    add("--dev-tgt", type=TEXT, help="dev target text, aligned with --dev-src: the encoder-decoder attention")
    add("--cross-attention", type=OUTPUT, help="encoder-decoder attention image to write (PNG; with --dev-tgt)")
    add("--diagonal", type=OUTPUT, help="each decoder layer's distance from the diagonal to write (JSON)")


def run(args) -> None:
    from aiayn.report.figures import write_figures  # torch: imported when the command runs, not for --help

    write_figures(
        args.name,
        args.metrics,
        args.model,
        args.spm_src,
        dev_src=args.dev_src,
        curves=args.curves,
        lr_plot=args.lr_plot,
        attention=args.attention,
        spm_tgt=args.spm_tgt,
        dev_tgt=args.dev_tgt,
        cross=args.cross_attention,
        diagonal=args.diagonal,
        seeds=tuple(args.seed_metrics),
    )
