"""What the paper's Tables 2, 3 and 4 say in words around our numbers: each table's title, the
notes under it (what its columns mean, what cleaning removed, why a cost cell is blank, Table 3's
verdict on the paper's findings), the paper's own rows of the other systems, and the Markdown
document of a table (`markdown_document`). The numbers are `aiayn.report.tables`'.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.evaluation.replicates import SIGNIFICANCE
from aiayn.report.format import footer, to_markdown
from aiayn.runtime import records
from aiayn.runtime.hardware import PEAKS, gpu_model
from aiayn.study.layout import Layout

# Table 2 of the paper: the other systems, kept for context (BLEU EN-DE, EN-FR; cost EN-DE, EN-FR).
PAPER_TABLE2 = [
    ("ByteNet", 23.75, None, None, None),
    ("Deep-Att + PosUnk", None, 39.2, None, 1.0e20),
    ("GNMT + RL", 24.6, 39.92, 2.3e19, 1.4e20),
    ("ConvS2S", 25.16, 40.46, 9.6e18, 1.5e20),
    ("MoE", 26.03, 40.56, 2.0e19, 1.2e20),
    ("Deep-Att + PosUnk Ensemble", None, 40.4, None, 8.0e20),
    ("GNMT + RL Ensemble", 26.30, 41.16, 1.8e20, 1.1e21),
    ("ConvS2S Ensemble", 26.36, 41.29, 7.7e19, 1.2e21),
    ("Transformer (base)", 27.3, 38.1, 3.3e18, 3.3e18),
    ("Transformer (big)", 28.4, 41.8, 2.3e19, 2.3e19),
]
# Table 4 of the paper: the other parsers (WSJ section 23 F1).
PAPER_TABLE4 = [
    ("Vinyals & Kaiser et al. (2014)", "WSJ only, discriminative", 88.3),
    ("Petrov et al. (2006)", "WSJ only, discriminative", 90.4),
    ("Zhu et al. (2013)", "WSJ only, discriminative", 90.4),
    ("Dyer et al. (2016)", "WSJ only, discriminative", 91.7),
    ("Transformer (4 layers)", "WSJ only, discriminative", 91.3),
    ("Zhu et al. (2013)", "semi-supervised", 91.3),
    ("Huang & Harper (2009)", "semi-supervised", 91.3),
    ("McClosky et al. (2006)", "semi-supervised", 92.1),
    ("Vinyals & Kaiser et al. (2014)", "semi-supervised", 92.1),
    ("Transformer (4 layers)", "semi-supervised", 92.7),
    ("Luong et al. (2015)", "multi-task", 93.0),
    ("Dyer et al. (2016)", "generative", 93.3),
]


def findings_line(rows: list[dict]) -> str:
    """The sum of Table 3's `as_paper`: how many variations move as in the paper, how many significantly."""
    judged = [r for r in rows if r.get("moves_as_paper")]
    if not judged:
        return ""
    yes = [r for r in judged if r["moves_as_paper"] == "yes"]
    partly = sum(r["moves_as_paper"] == "partly" for r in judged)
    significant = sum(r.get("significant") == "yes" for r in yes)
    tested = any(r.get("significant") for r in judged)
    line = (
        f"\nDoes this study reproduce the paper's findings? {len(yes)} of {len(judged)} variations move as in the paper"
    )
    line += (
        f" (dev perplexity and dev BLEU against base; {partly} partly)"
        if partly
        else " (dev perplexity and dev BLEU against base)"
    )
    line += (
        f", {significant} of them significantly (BLEU, p < {SIGNIFICANCE:g})"
        if tested
        else ", none tested for significance"
    )
    waiting = sum(1 for r in rows if r.get("as_paper") is None)
    if waiting:
        line += f"; {waiting} row(s) pending or without the paper's figures"
    return line + ".\n"


TITLES = {
    2: "Table 2: test-set BLEU (newstest2014 in the paper) and training cost",
    3: "Table 3: variations of the base model (dev set, no checkpoint averaging)",
    4: "Table 4: English constituency parsing (test-set F1, EVALB; WSJ 23 in the paper)",
}


SEEDS_NOTE = (
    "seeds: the training runs of the row, one per seed (`seeds:` in the config); with several, each figure "
    "is their mean, *_s_sel the sample standard deviation over them (the training noise), and the CSV has "
    "one more line per seed (seed, replicate_of)."
)

INPUTS_NOTE = (
    '\ndistinct_outputs: the distinct outputs among the test set\'s lines; "ignores its input" (as the status '
    "too) when one output covers 90 % of them or more where no reference covers more than half "
    "(aiayn.evaluation.dependence): such a model is no result, whatever its score, and gets no delta.\n"
)

SETTING_NOTE = (
    "\nsetting: \"the paper's\" when the run is the paper's setting of its row (model, updates and tokens per "
    "update, decoding, checkpoint averaging, test set and its size, training data size, aiayn.study.paper); "
    "otherwise "
    "what differs, and no delta against the paper is printed.\n"
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
            "have no cost "
            "and no MFU."
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


# the columns of each table's Markdown (the CSV has every cell)
COLUMNS = {
    2: ["experiment", "status", "paper_bleu", "bleu", "bleu_s_sel", "seeds", "delta", "sacrebleu", "setting",
        "dataset", "testset", "lines", "preset", "updates", "tgt_tokens_per_update", "hardware", "averaged_steps",
        "device_hours", "cost_flops_paper_formula", "model_flops", "mfu"],
    3: ["row", "experiment", "status", "changes", "setting", "updates", "seeds", "dev_ppl", "dev_ppl_s_sel",
        "paper_dev_ppl", "dev_bleu", "dev_bleu_s_sel", "paper_dev_bleu", "as_paper", "params_M", "paper_params_M",
        "p_value_vs_base", "significant", "test"],
    4: ["row", "experiment", "status", "paper_f1", "f1", "f1_s_sel", "seeds", "delta", "setting", "selected_on_dev",
        "testset", "lines", "updates", "hardware", "precision", "recall", "error_sentences"],
}  # fmt: skip


def column_note(number: int) -> str:
    """What the columns of Table `number` mean."""
    if number == 2:
        peaks = ", ".join(f"{k} {v['fp32'] / 1e12:g}" for k, v in PEAKS.items() if "fp32" in v)
        return (
            "\nbleu: tokenized BLEU as the paper measured it (Moses tokenizer, compound splitting for EN-DE); "
            f"sacrebleu: detokenized sacreBLEU; delta = bleu - paper_bleu. tgt_tokens_per_update: the target tokens "
            "of an update as trained, on the mean (the paper's §5.1 batch: about 25,000 source and 25,000 target "
            f"tokens). {SEEDS_NOTE} Training cost by the "
            f"paper's footnote 5 (hours x GPUs x the GPU's FP32 TFLOPS: {peaks}); device_hours: wall hours trained "
            "x the devices training (GPUs, or CPU processes), those of the hardware column; model_flops: the "
            "training FLOPs counted from every update's batches (encoder on source, decoder on target tokens, "
            "attention products at the real lengths, output projection; aiayn.runtime.hardware.training_flops). "
            "The paper's Table 2 gives 41.8 for big EN-FR; its §6.1 text and abstract say 41.0.\n"
        )
    if number == 3:
        return (
            "\ndev_ppl: per-piece perplexity on the dev set at the last checkpoint (depends on eps_ls, as the "
            f"paper says); dev_bleu: tokenized BLEU of the last checkpoint, no averaging. {SEEDS_NOTE} "
            "p_value_vs_base: the difference of sacreBLEU's BLEU (13a) to the base row's, tested as `test` "
            "says: where both rows have several seeds, MultEval's stratified approximate randomization (Clark "
            "et al. 2011) over every seed's translations, replicate j paired with base's replicate j, which "
            "accounts for training noise; where either has one seed, sacreBLEU's paired bootstrap (Koehn 2004) "
            f'of the two runs, which measures test-set sampling only. significant: p < {SIGNIFICANCE:g}; a "no" '
            "row's difference to base may be noise. as_paper: whether the variation moved dev perplexity and dev "
            "BLEU against the base row the way the paper's row moved against the paper's base (better or worse; "
            "yes, partly or no), and whether its BLEU difference is significant; where the paper's figure did not "
            "move, ours is said and not judged.\n"
        )
    return f"\n{SEEDS_NOTE}\n"


PAPERS_COLUMNS = {2: ["model", "EN-DE", "EN-FR", "cost EN-DE", "cost EN-FR"], 4: ["parser", "training", "F1"]}


def papers_rows(number: int) -> str:
    """The paper's own rows of Table `number` (the other systems), for context."""
    if number not in PAPERS_COLUMNS:
        return ""
    rows = [dict(zip(PAPERS_COLUMNS[number], row)) for row in {2: PAPER_TABLE2, 4: PAPER_TABLE4}[number]]
    return "\nThe paper's rows:\n\n" + to_markdown(rows)


def markdown_document(number: int, rows: list[dict], study: str | None = None, notes: str = "") -> str:
    """Table `number` as Markdown: `study` (which config files made it) on top, `notes` (e.g. the
    cleaning's) under the table's own, aiayn's version below."""
    parts = [f"# {TITLES[number]}\n", f"\n{study}\n\n" if study else "", to_markdown(rows, COLUMNS[number])]
    if number == 3:
        parts.append(findings_line(rows))
    parts.append(column_note(number))
    if number == 2:
        parts += [hardware_note(rows), notes]
        signatures = sorted({r["sacrebleu_signature"] for r in rows if r.get("sacrebleu_signature")})
        parts += [f"\nsacreBLEU signature: `{sig}`\n" for sig in signatures]
    parts += [papers_rows(number), SETTING_NOTE, INPUTS_NOTE, footer()]
    return "".join(parts)
