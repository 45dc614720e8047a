"""`python -m aiayn figures`: one experiment's learning curves, gradient norm, learning-rate schedule,
throughput, the encoder self-attention of a dev sentence (last layer, first heads; the paper's
Figures 3-5) and, given the dev targets, the encoder-decoder attention of every layer on a dev pair
with each layer's distance from the diagonal (figure and JSON)."""

from __future__ import annotations


def add_arguments(parser):
    parser.add_argument("--name", required=True, help="experiment name (titles)")
    parser.add_argument("--metrics", required=True, help="the run's metrics.jsonl")
    parser.add_argument(
        "--seed-metrics",
        nargs="*",
        default=[],
        help="metrics.jsonl of the row's other seeds: their dev perplexity is drawn beside the run's",
    )
    parser.add_argument("--model", required=True, help="checkpoint whose attention is drawn")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--dev-src", required=True, help="dev source text; its first sentence of 5-25 pieces is shown")
    parser.add_argument("--curves", required=True, help="learning-curves image to write (PNG)")
    parser.add_argument("--lr-plot", required=True, help="learning-rate schedule image to write (PNG)")
    parser.add_argument("--attention", required=True, help="attention-map image to write (PNG)")
    parser.add_argument("--spm-tgt", help="target sentencepiece model (with --dev-tgt)")
    parser.add_argument("--dev-tgt", help="dev target text, aligned with --dev-src: the encoder-decoder attention")
    parser.add_argument("--cross-attention", help="encoder-decoder attention image to write (PNG; with --dev-tgt)")
    parser.add_argument("--diagonal", help="each decoder layer's distance from the diagonal to write (JSON)")


def run(args) -> int:
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
    return 0
