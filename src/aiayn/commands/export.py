"""`python -m aiayn export`: a trained model as a Hugging Face `MarianMTModel` folder (and, with
--ctranslate2, a CTranslate2 model converted from it), with a model card (`aiayn.export`)."""

from __future__ import annotations

import json
from pathlib import Path

from aiayn.commands import load_json
from aiayn.commands.translate import decode_settings
from aiayn.errors import UserError
from aiayn.training import metrics


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="the checkpoint to export (average.pt or last.pt)")
    parser.add_argument("--spm-src", required=True, help="source sentencepiece model the checkpoint was trained with")
    parser.add_argument("--spm-tgt", required=True, help="target sentencepiece model the checkpoint was trained with")
    parser.add_argument("--decode", default="{}", help="the experiment's decoding settings (JSON), for generation")
    parser.add_argument("--card", default="{}", help="JSON: name, dataset, pair, paper bleu, score file, metrics file")
    parser.add_argument("--out", required=True, help="the folder to write (replaced whole)")
    parser.add_argument("--ctranslate2", help="also convert the export to a CTranslate2 model in this folder")


def model_card(info: dict, decode: dict) -> str:
    """README.md of the export: what was trained on what, how well, at what cost, beside the paper."""
    score = json.loads(Path(info["score"]).read_text()) if info.get("score") and Path(info["score"]).exists() else {}
    m = metrics.summary(info["metrics"]) if info.get("metrics") else {}
    bleu = score.get("tokenized_bleu", {}).get("score")
    sacre = score.get("sacrebleu", {})
    pair = "-".join(info.get("pair") or []) or "?"
    signature = str(sacre.get("signature")).replace("|", "&#124;")  # a | would split the table cell
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: translation",
        "tags: [translation, transformer, attention-is-all-you-need, aiayn]",
        "---",
        f"# {info.get('name', 'aiayn model')} ({pair})",
        "",
        'The Transformer of "Attention Is All You Need" (Vaswani et al. 2017), trained by the aiayn pipeline '
        f"on {info.get('dataset', '?')}, exported as a `MarianMTModel` whose logits equal the trained model's "
        "(the residual dimensions are permuted so that Marian's [sin | cos] position table is our interleaved one).",
        "",
        "| | |",
        "|---|---|",
        f"| test set | {info.get('testset', '?')} ({score.get('lines', '?')} lines) |",
        f"| BLEU, tokenized as the paper measured it | {bleu:.2f} |" if bleu is not None else "| BLEU | not scored |",
        f"| sacreBLEU | {sacre['score']:.2f} (`{signature}`) |" if sacre else "| sacreBLEU | - |",
        f"| the paper's BLEU | {info['paper_bleu']} |" if info.get("paper_bleu") is not None else "| the paper | - |",
        f"| training | {m.get('step', '?')} updates, {m.get('hours', 0):.1f} h on {m.get('gpus', '?')} x "
        f"{m.get('device', '?')} ({m.get('precision', '?')}) |",
        f"| parameters | {m.get('params') or '?'} |",
        "",
        "## Decoding",
        f"The pipeline decodes with beam {decode['beam']} and GNMT's length penalty ((5 + |Y|) / 6)^alpha, alpha "
        f"{decode['alpha']}, up to input length + {decode['max_len_b']} tokens (§6.1). `generation_config.json` "
        "sets the same beam and alpha, but Hugging Face's `length_penalty` divides the score by |Y|^alpha instead: "
        "greedy output (num_beams=1) is ours token for token; beam output can differ where the two penalties rank "
        "finished hypotheses differently.",
        "",
        "```python",
        "from transformers import MarianMTModel, MarianTokenizer",
        "tok = MarianTokenizer.from_pretrained(path)",
        "model = MarianMTModel.from_pretrained(path)",
        'out = model.generate(**tok(["..."], return_tensors="pt", padding=True))',
        "print(tok.batch_decode(out, skip_special_tokens=True))",
        "```",
        "",
    ]
    return "\n".join(lines)


def run(args) -> int:
    try:
        from aiayn.evaluation.export import export, to_ctranslate2  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        raise UserError(f"export needs {exc.name!r}: pip install -e '.[export]' (or use envs/export.yaml)") from None
    decode = decode_settings(args.decode)
    info = load_json(args.card, "--card", expect=dict)
    out = export(args.model, args.spm_src, args.spm_tgt, args.out, decode=decode, card=model_card(info, decode))
    print(f"exported {args.model} -> {out} (transformers MarianMTModel)")
    if args.ctranslate2:
        to_ctranslate2(out, args.ctranslate2)
        print(f"converted {out} -> {args.ctranslate2} (CTranslate2)")
    return 0
