"""`python -m aiayn translate`: decode a source file with beam search (§6.1), one line out per line in."""

from __future__ import annotations

from aiayn.commands import at_least, library_default, say, settings
from aiayn.inventory import CHECKPOINT, DEVICE, OUTPUT, SPM, TEXT, schema


def add_arguments(add):
    add("--model", type=CHECKPOINT, required=True, help="checkpoint or averaged model")
    add("--input", type=TEXT, required=True, help="source text, one segment per line")
    add("--spm-src", type=SPM, required=True, help="source sentencepiece model")
    add("--spm-tgt", type=SPM, required=True, help="target sentencepiece model")
    add(
        "--decode",
        type=schema("decode"),
        default="{}",
        help='JSON: {"beam": 4, "alpha": 0.6, "max_len_a": 1, "max_len_b": 50} (what is not given is the '
        "schema's `decode` default, §6.1)",
    )
    add("--out", type=OUTPUT, required=True, help="translations, one line per source line")
    add(
        "--nbest",
        type=at_least(1),
        default=library_default("aiayn.evaluation.translate.translate_file", "nbest"),
        help="also write OUT.nbest with this many hypotheses per line (default %(default)s)",
    )
    add(
        "--batch-tokens",
        type=at_least(1),
        default=library_default("aiayn.evaluation.translate.translate_file", "batch_tokens"),
        help="source tokens per batch (default %(default)s)",
    )
    add(
        "--device",
        type=DEVICE,
        default=library_default("aiayn.evaluation.translate.translate_file", "device"),
        help="cpu, cuda, cuda:N or auto, a GPU if there is one (default %(default)s)",
    )
    add(
        "--precision",
        choices=["fp32", "bf16", "fp16"],
        default=library_default("aiayn.evaluation.translate.translate_file", "precision"),
        help="arithmetic of the search (default %(default)s)",
    )


def run(args) -> None:
    from aiayn.evaluation.translate import translate_file  # torch: imported when the command runs, not for --help

    translate_file(
        args.model,
        args.input,
        args.spm_src,
        args.spm_tgt,
        out=args.out,
        decode=settings(args.decode, "--decode", "decode"),
        nbest=args.nbest,
        batch_tokens=args.batch_tokens,
        device=args.device,
        precision=args.precision,
        log=say,
    )
