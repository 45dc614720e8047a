"""`python -m aiayn export`: a trained model as a Hugging Face `MarianMTModel` folder (and, with
--ctranslate2, a CTranslate2 model converted from it), with a model card (`aiayn.evaluation.export`)."""

from __future__ import annotations

from aiayn.commands import say, settings


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="the checkpoint to export (average.pt or last.pt)")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model the checkpoint was trained with")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model the checkpoint was trained with")
    parser.add_argument("--decode", default="{}", help="the experiment's decoding settings (JSON), for generation")
    parser.add_argument("--card", default="{}", help="JSON: name, dataset, pair, paper bleu, score file, metrics file")
    parser.add_argument("--out", required=True, help="the folder to write (replaced whole)")
    parser.add_argument("--ctranslate2", help="also convert the export to a CTranslate2 model in this folder")


def run(args) -> int:
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
    return 0
