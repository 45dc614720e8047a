"""`python -m aiayn score`: score one decoded test set; writes one JSON.

translation: sacreBLEU (signature), chrF and the paper's tokenized (compound-split) BLEU.
parsing: EVALB (COLLINS.prm) of the restored parses against the gold trees (--ref: <set>.gold).
"""

from __future__ import annotations

from aiayn.commands import load_json
from aiayn.data.corpus import read_lines
from aiayn.evaluation.score import bleu_scores, check_lines
from aiayn.io import write_json
from aiayn.parsing.treebank import score_parses


def add_arguments(parser):
    parser.add_argument(
        "--task",
        choices=["translation", "parsing"],
        default="translation",
        help="translation: both BLEU protocols; parsing: EVALB F1 of linearized trees",
    )
    parser.add_argument("--hyp", required=True, help="system output, one line per source line")
    parser.add_argument("--ref", required=True, help="reference, aligned with --hyp")
    parser.add_argument(
        "--scoring",
        default="{}",
        help='JSON: {"moses_lang": "de", "compound_split": true, "sacrebleu_tokenize": "13a"}',
    )
    parser.add_argument(
        "--expect-lines", type=int, help="the test set's number of lines (guards against a partial set)"
    )
    parser.add_argument("--out", required=True, help="scores (JSON)")


def run(args) -> int:
    scoring = load_json(args.scoring, "--scoring", expect=dict)
    hyp, ref = list(read_lines(args.hyp)), list(read_lines(args.ref))
    check_lines(hyp, ref, args.hyp, args.ref, args.expect_lines)
    if args.task == "parsing":
        scores = score_parses(hyp, ref)
        scores.update(hyp=args.hyp, ref=args.ref, lines=len(hyp))
        write_json(args.out, scores)
        s = scores["all"]
        print(
            f"{args.hyp}: EVALB F1 {s['f1']:.2f} (P {s['precision']:.2f}, R {s['recall']:.2f}), "
            f"{s['error_sentences']} error sentence(s)"
        )
        return 0
    scores = bleu_scores(
        hyp,
        ref,
        moses_lang=scoring.get("moses_lang", "en"),
        compound_split=bool(scoring.get("compound_split", False)),
        sacrebleu_tokenize=scoring.get("sacrebleu_tokenize", "13a"),
    )
    scores.update(hyp=args.hyp, ref=args.ref)
    write_json(args.out, scores)
    print(
        f"{args.hyp}: tokenized BLEU {scores['tokenized_bleu']['score']:.2f}, "
        f"sacreBLEU {scores['sacrebleu']['score']:.2f} ({scores['sacrebleu']['signature']}), {scores['lines']} lines"
    )
    return 0
