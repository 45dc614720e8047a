"""What the paper's Tables 2, 3 and 4 say in words around our numbers: each table's title, the
notes under it (what its columns mean, what cleaning removed, why a cost cell is blank, Table 3's
verdict on the paper's findings, what the CSV's columns mean), and a table's document as parts
(`document`), written as Markdown and as an HTML page (aiayn.report.format). The numbers are
`aiayn.report.tables`'; the table as the paper prints it, our rows in it, is `aiayn.report.compact`'s.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.evaluation.replicates import SIGNIFICANCE
from aiayn.report.compact import IGNORES_INPUT, NOT_A_RESULT, block, columns, no_result, right_aligned
from aiayn.report.format import footer, paragraphs
from aiayn.runtime import records
from aiayn.runtime.hardware import PEAKS, gpu_model
from aiayn.study import paper
from aiayn.study.layout import Layout


def findings_line(rows: list[dict]) -> str:
    """The sum of Table 3's `as_paper`: how many variations move as in the paper, how many significantly;
    a row that ignores its input counts in none of them, and is named as left out."""
    judged = [r for r in rows if r.get("moves_as_paper") and not no_result(r)]
    if not judged:
        return ""
    yes = [r for r in judged if r["moves_as_paper"] == "yes"]
    partly = sum(r["moves_as_paper"] == "partly" for r in judged)
    significant = sum(r.get("significant") == "yes" for r in yes)
    tested = any(r.get("significant") for r in judged)
    line = (
        f"\nDoes this study reproduce the paper's findings? {len(yes)} of {len(judged)} variations move as in the "
        f"paper (dev perplexity and dev BLEU against base{f'; {partly} partly' if partly else ''})"
    )
    line += (
        f", {significant} of them significantly (BLEU, p < {SIGNIFICANCE:g})"
        if tested
        else ", none tested for significance"
    )
    waiting = sum(1 for r in rows if r.get("as_paper") is None and not no_result(r))
    if waiting:
        line += f"; {waiting} row(s) pending or without the paper's figures"
    ignoring = [r["experiment"] for r in rows if no_result(r)]
    if ignoring:
        line += f"; left out, no result: {', '.join(ignoring)} ({IGNORES_INPUT})"
    return line + ".\n"


TITLES = {
    2: "Table 2: test-set BLEU (newstest2014 in the paper) and training cost",
    3: "Table 3: variations of the base model (dev set, no checkpoint averaging)",
    4: "Table 4: English constituency parsing (test-set F1, EVALB; WSJ 23 in the paper)",
}


SEEDS_NOTE = (
    "seeds: the training runs of the row, one per seed (`seeds:` in the config); with several, each figure "
    "is the mean of those done (seeds_done), *_s_sel the sample standard deviation over them (the training "
    "noise), and the CSV has one more line per seed (seed, replicate_of)."
)

INPUTS_NOTE = (
    '\ndistinct_outputs: the distinct outputs among the test set\'s lines; "ignores its input" (as the status '
    "too) when one output covers 90 % of them or more where no reference covers more than half "
    "(aiayn.evaluation.dependence): such a model is no result, whatever its score, and gets no delta.\n"
)

SETTING_NOTE = (
    "\nsetting: \"the paper's\" when the run is the paper's setting of its row (model, updates and tokens per "
    "update, decoding, checkpoint averaging, BLEU's tokenization and reference, test set and its size, training data "
    "size, aiayn.study.paper); otherwise what differs, and no delta against the paper is printed.\n"
)


def hardware_note(rows: list[dict]) -> str:
    """Why a Table 2 row's cost or MFU cell is blank, when it is."""
    notes = []
    if any(r.get("gpu") == "cpu" for r in rows):
        notes.append(
            "CPU runs (hardware CPU) leave cost_flops_paper_formula and mfu blank: the paper's cost formula "
            "(footnote 5: hours x GPUs x the GPU's FP32 FLOP/s) and MFU apply to GPUs."
        )
    unknown = sorted({r["gpu"] for r in rows if r.get("gpu") not in (None, "cpu") and gpu_model(r["gpu"]) is None})
    if unknown:
        notes.append(
            f"No peak FLOP/s is known for {', '.join(unknown)} (aiayn.runtime.hardware.PEAKS), so its rows "
            "have no cost and no MFU."
        )
    return "".join(f"\n{n}\n" for n in notes)


def cleaning_note(layout: Layout, experiments: list[dict]) -> str:
    """What cleaning removed from the training data of each dataset of `experiments` (its
    train.report.json), as a line under Table 2: a corpus the cleaning cut by 3 % is a row's setting too."""
    said = []
    for dataset in dict.fromkeys(e["dataset"] for e in experiments):
        path = Path(layout.train_report(dataset))
        if not path.exists():
            continue
        record = records.read(path, "train report")
        kept = int(record["kept"])
        removed = {k: int(v) for k, v in record.get("removed", {}).items() if v}
        total = sum(int(c.get("pairs", 0)) for c in record.get("corpora", [])) or kept + sum(removed.values())
        why = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in removed.items())
        share = f"{(total - kept) / total:.1%} removed" + (f": {why}" if why else "") if total else "none given"
        said.append(f"{dataset} kept {kept:,} of {total:,} pairs ({share})")
    if not said:
        return ""
    where = layout.train_report("<dataset>")
    return f"\nTraining data after cleaning ({where}): " + "; ".join(said) + ".\n"


def column_note(number: int) -> str:
    """What the columns of Table `number` mean."""
    if number == 2:
        peaks = ", ".join(f"{k} {v['fp32'] / 1e12:g}" for k, v in PEAKS.items() if "fp32" in v)
        return (
            "\nbleu: tokenized BLEU as the paper measured it (Moses tokenizer, compound splitting for EN-DE), "
            'against the reference bleu_reference names: "t2t", the test set\'s with every „ “ ” made " (as '
            "tensor2tensor's released newstest2014 reference has them, which the paper's EN-DE figures were scored "
            'against: tensorflow/tensor2tensor#317); "wmt", as WMT distributes it. bleu_wmt: the same BLEU against '
            "WMT's reference; sacrebleu: detokenized sacreBLEU, against WMT's reference; delta = bleu - paper_bleu. "
            f"tgt_tokens_per_update: the target tokens "
            "of an update as trained, on the mean (the paper's §5.1 batch: about 25,000 source and 25,000 target "
            f"tokens). {SEEDS_NOTE} Training cost by the "
            f"paper's footnote 5 (hours x GPUs x the GPU's FP32 TFLOPS: {peaks}); device_hours: wall hours trained "
            "x the devices training (GPUs, or CPU processes), those of the hardware column; model_flops: the "
            "training FLOPs counted from every update's batches (encoder on source, decoder on target tokens, "
            "attention products at the real lengths, output projection; aiayn.runtime.hardware.training_flops). "
            f"The paper's Table 2 gives {paper.FIGURES['big-en-fr']['bleu']} for big EN-FR; its §6.1 text and "
            "abstract say 41.0.\n"
        )
    if number == 3:
        return (
            "\ndev_ppl: per-piece perplexity on the dev set at the last checkpoint (depends on eps_ls, as the "
            f"paper says); dev_bleu: tokenized BLEU of the last checkpoint, no averaging. {SEEDS_NOTE} "
            "p_value_vs_base: the difference of sacreBLEU's BLEU (13a) to the base row's, tested as `test` "
            "says, over the runs it names, those the two rows' figures are the means of (scored, and not "
            "ignoring their input): where either row has several seeds, MultEval's stratified approximate "
            "randomization (Clark et al. 2011) over every run's translations, replicate j paired with base's "
            "replicate j (every run of one with every run of the other where the rows have not as many), which "
            "accounts for training noise; one run each, sacreBLEU's paired bootstrap (Koehn 2004), which measures "
            f'test-set sampling only. significant: p < {SIGNIFICANCE:g}; a "no" row\'s difference to base may be '
            "noise. as_paper: whether the variation moved dev perplexity and dev "
            "BLEU against the base row the way the paper's row moved against the paper's base (better or worse; "
            "yes, partly or no), and whether its BLEU difference is significant; where the paper's figure did not "
            "move, ours is said and not judged.\n"
        )
    return f"\n{SEEDS_NOTE}\n"


def legend(number: int) -> str:
    """How to read the block: which rows are ours, what a mark means."""
    where = {
        2: "each under the paper's Transformer row it reproduces (others at the end), the experiments of one "
        'model over both pairs on one line (base-en-de and base-en-fr: "ours: base"); cost: training FLOPs by '
        "the paper's footnote 5",
        3: 'each under the paper\'s row it stands for ("paper base", "paper (A)", ...), in the paper\'s order; '
        "on a variation's line only what differs from its base is printed, as in the paper; PPL per piece and BLEU "
        "tokenized, of the last checkpoint on the dev set; params in millions",
        4: "each under the paper's Transformer row of its training (others at the end)",
    }[number]
    return (
        f"Our rows are named by experiment, {where}; [n]: the number of a row's note below. A figure is the "
        f"mean over the row's seeds where it has several; {NOT_A_RESULT} after it: the model ignores its input "
        '(no result, whatever its score); "pending": not scored yet, "at 40 %": training that far. '
        f"`table{number}.csv` has every column of every row (the columns below)."
    )


def document(
    number: int, rows: list[dict], *, study: str | None = None, notes: str = "", experiments: list[dict] | None = None
) -> list[tuple[str, object]]:
    """Table `number` as parts, (kind, content), in the order they are read: the title, `study`
    (which config files made it), the paper's table with our rows in it (aiayn.report.compact:
    kind "table", content (lines, columns, right-aligned columns)), how to read it, our rows'
    numbered notes ("ol"), then what the CSV's columns mean and `notes` (e.g. the cleaning's),
    aiayn's version last. `experiments` (Study.table_spec's, aligned with `rows`) give each row its
    language pair and preset. `format.markdown_of` and `format.html_of` write the same parts."""
    lines, row_notes = block(number, rows, experiments)
    parts: list[tuple[str, object]] = [("title", TITLES[number])]
    if study:
        parts.append(("p", study))
    cols = columns(number, lines)
    parts += [("table", (lines, cols, {c for c in cols if right_aligned(number, c)})), ("p", legend(number))]
    if row_notes:
        parts.append(("ol", row_notes))
    if number == 3:
        parts += paragraphs(findings_line(rows))
    parts.append(("h2", f"The CSV's columns (table{number}.csv)"))
    parts += paragraphs(column_note(number))
    if number == 2:
        parts += paragraphs(hardware_note(rows)) + paragraphs(notes)
        signatures = sorted({r["sacrebleu_signature"] for r in rows if r.get("sacrebleu_signature")})
        parts += [("p", f"sacreBLEU signature: `{sig}`") for sig in signatures]
    parts += paragraphs(SETTING_NOTE) + paragraphs(INPUTS_NOTE) + paragraphs(footer())
    return parts
