"""`python -m aiayn score`: score one decoded test set; writes one JSON.

translation: sacreBLEU (signature), chrF and the paper's tokenized (compound-split) BLEU.
parsing: EVALB (COLLINS.prm) of the restored parses against the gold trees (--ref: <set>.gold).
"""

from __future__ import annotations

from aiayn.commands import at_least, evaluation_chain, say, settings
from aiayn.evaluation.score import score_file
from aiayn.inventory import OUTPUT, TEXT, schema, text


def add_arguments(add):
    add(
        "--task",
        choices=["translation", "parsing"],
        default="translation",
        help="translation: both BLEU protocols; parsing: EVALB F1 of linearized trees",
    )
    add("--hyp", type=TEXT, required=True, help="system output, one line per source line")
    add("--ref", type=TEXT, required=True, help="reference, aligned with --hyp")
    add(
        "--scoring",
        type=schema("scoring+pair_scoring"),
        default="{}",
        help='JSON: {"moses_lang": "de", "compound_split": true, "sacrebleu_tokenize": "13a"} (config.yaml\'s '
        "`scoring` and a dataset's; what is not given is the schema's default)",
    )
    add("--expect-lines", type=at_least(1), help="the test set's number of lines (guards against a partial set)")
    add(
        "--paper-row",
        type=text("aiayn.commands.evaluation_chain"),
        default="null",
        help="JSON: the row's evaluation chain (table, preset, task, pair, decode, average, scoring; "
        "Study.evaluation_chain): one log line says where it departs from the paper's row (null: no row)",
    )
    add("--out", type=OUTPUT, required=True, help="scores (JSON)")


def run(args) -> None:
    score_file(
        args.task,
        args.hyp,
        args.ref,
        args.out,
        scoring=settings(args.scoring, "--scoring", ("scoring", "pair_scoring")),
        expect_lines=args.expect_lines,
        chain=evaluation_chain(args.paper_row, "--paper-row"),
        log=say,
    )
