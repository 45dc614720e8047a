"""`python -m aiayn export`: a trained model as a Hugging Face `MarianMTModel` folder (and, with
--ctranslate2, a CTranslate2 model converted from it), with a model card (`aiayn.evaluation.export`)."""

from __future__ import annotations

from aiayn.commands import say, settings
from aiayn.inventory import CHECKPOINT, OUTPUT_FOLDER, SPM, schema


def add_arguments(add):
    add("--model", type=CHECKPOINT, required=True, help="the checkpoint to export (average.pt or last.pt)")
    add("--spm-src", type=SPM, required=True, help="source sentencepiece model the checkpoint was trained with")
    add("--spm-tgt", type=SPM, required=True, help="target sentencepiece model the checkpoint was trained with")
    add(
        "--decode",
        type=schema("decode"),
        default="{}",
        help="the experiment's decoding settings (JSON), for generation",
    )
    add(
        "--card",
        type=schema("model_card"),
        default="{}",
        help="JSON: name, dataset, pair, paper bleu, score file, metrics file",
    )
    add("--out", type=OUTPUT_FOLDER, required=True, help="the folder to write (replaced whole)")
    add("--ctranslate2", type=OUTPUT_FOLDER, help="also convert the export to a CTranslate2 model in this folder")


def run(args) -> None:
    from aiayn.evaluation.export import export_model  # torch: imported when the command runs, not for --help

    export_model(
        args.model,
        args.spm_src,
        args.spm_tgt,
        args.out,
        decode=settings(args.decode, "--decode", "decode"),
        card=settings(args.card, "--card", "model_card"),
        ctranslate2=args.ctranslate2,
        log=say,
    )
