"""`python -m aiayn translate`: decode a source file with beam search (§6.1), one line out per line in."""

from __future__ import annotations

from aiayn.commands import at_least, say, settings


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint or averaged model")
    parser.add_argument("--input", required=True, help="source text, one segment per line")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model")
    parser.add_argument(
        "--decode",
        default="{}",
        help='JSON: {"beam": 4, "alpha": 0.6, "max_len_a": 1, "max_len_b": 50} (what is not given is the '
        "schema's `decode` default, §6.1)",
    )
    parser.add_argument("--out", required=True, help="translations, one line per source line")
    parser.add_argument(
        "--nbest", type=at_least(1), default=1, help="also write OUT.nbest with this many hypotheses per line"
    )
    parser.add_argument("--batch-tokens", type=at_least(1), default=4096, help="source tokens per batch")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (a GPU if there is one)")
    parser.add_argument(
        "--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="arithmetic of the search (default fp32)"
    )


def run(args) -> int:
    from aiayn.evaluation.translate import translate_file  # torch: imported when the command runs, not for --help

    translate_file(
        args.model,
        args.input,
        args.spm_src,
        args.spm_tgt,
        args.out,
        decode=settings(args.decode, "--decode", "decode"),
        nbest=args.nbest,
        batch_tokens=args.batch_tokens,
        device=args.device,
        precision=args.precision,
        log=say,
    )
    return 0
