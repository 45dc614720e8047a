"""The paper's Tables 2, 3 and 4 with our numbers beside the paper's, from whatever has finished.

Each table is a list of row dicts, written as CSV and as Markdown from the same values. A run
whose score file is missing shows as pending, with its progress (step / total) if its metrics
exist. Sources, all named by `Layout`: each experiment's score file, metrics.jsonl, average.json
and selected.json, its dataset's train.report.json (or training text), and the table's spec
(`Study.table_spec`: the experiments and the paper's numbers from the config). Tables read and
format; what they score is scored elsewhere (baselines: `aiayn.evaluation.baselines`, p-values:
`aiayn.evaluation.score`).
"""

from __future__ import annotations

from pathlib import Path

from aiayn.errors import UserError
from aiayn.evaluation import baselines
from aiayn.evaluation.replicates import SIGNIFICANCE, mean_and_spread, stratified_ar_p
from aiayn.evaluation.score import paired_bootstrap_p
from aiayn.io import atomic_paths, readable
from aiayn.report.format import footer, to_csv, to_markdown
from aiayn.runtime import metrics, records
from aiayn.runtime.hardware import PEAKS, gpu_model, peak_flops
from aiayn.runtime.lines import read_lines
from aiayn.study import config as cfg
from aiayn.study import paper
from aiayn.study.grid import TABLE_SPEC_KEYS, Study
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
# the base model's columns of Table 3, the fallback when a table has no base row
BASE_MODEL = {k: paper.MODEL["base"][k] for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "init")}


def paper_cost(hours: float, gpus: int, gpu: str) -> float | None:
    """Footnote 5: training time × number of GPUs × sustained single-precision FLOP/s of the GPU."""
    capacity = peak_flops(gpu, "fp32")
    return hours * 3600 * gpus * capacity if capacity else None


def averaged_steps(layout: Layout, experiment: str) -> str | None:
    """The steps average.pt averaged (from average.json), e.g. "5: 96000..100000 every 1000"."""
    path = Path(layout.average_record(experiment))
    if not path.exists():
        return None
    steps = records.read(path, "average")["steps"]
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    if len(steps) > 2 and len(gaps) == 1:
        return f"{len(steps)}: {steps[0]}..{steps[-1]} every {gaps.pop()}"
    return f"{len(steps)}: " + ", ".join(map(str, steps))


def selected_candidate(layout: Layout, experiment: str) -> str | None:
    """What the dev-set selection (§6.3) took, from selected.json: "P_drop 0.2, lr_scale 0.5 (dev f1
    88.10, best of 6)"."""
    path = Path(layout.selected(experiment))
    if not path.exists():
        return None
    record = records.read(path, "selected")
    setting = ", ".join(f"{k} {v:g}" for k, v in record["setting"].items())
    return f"{setting} (dev {record['metric']} {record['value']:.2f}, best of {len(record['candidates'])})"


def train_pairs(layout: Layout, exp: dict) -> int | None:
    """Training pairs (sentences for parsing) the run's dataset kept, or None before it is prepared."""
    report = Path(layout.train_report(exp["dataset"]))
    if report.exists():
        return records.read(report, "train report")["kept"]
    text = Path(layout.text(exp["dataset"], "train", "src"))
    if exp.get("task") == "parsing" and text.exists():
        with open(readable(text, "the training text"), "rb") as f:
            return sum(1 for _ in f)
    return None


def what_was_run(table: int, exp: dict, m: dict, score: dict | None, layout: Layout, figure: str) -> dict:
    """The cells that say what a row's run was, and whether it is the paper's setting (`comparable`)."""
    lines = score.get("lines", score.get("all", {}).get("sentences")) if score else None
    comparable, text = paper.setting(
        table, exp, figure, updates=m["step"], lines=lines, train_pairs=train_pairs(layout, exp)
    )
    hardware = None
    if m["device"]:
        hardware = "CPU" if m["device"] == "cpu" else f"{m['gpus']} x {m['device']}"
    return {
        "setting": text,
        "comparable": comparable,
        "preset": exp["preset"],
        "updates": f"{m['step']:,} of {exp['train']['steps']:,}",
        "tgt_tokens_per_update": m["tgt_tokens"] / m["step"] if m["step"] else None,
        "hardware": hardware,
    }


def read_score(layout: Layout, experiment: str, testset: str, task: str = "translation") -> dict | None:
    """The score file of `experiment` on `testset`, checked as a score of `task`, or None before it exists."""
    path = Path(layout.score(experiment, testset))
    if not path.exists() and not path.is_symlink():
        return None
    kind, record = records.read_score(path)
    if kind != f"{task} score":
        raise UserError(f"{path}: a {kind}, where the {task} score of {experiment} is meant; rerun its score step")
    return record


def read_metrics(layout: Layout, experiment: str) -> dict:
    return metrics.summary(layout.metrics(experiment))


def _status(exp: dict, metrics: dict, scored: bool) -> str:
    if scored:
        return "done"
    if metrics["step"]:
        return f"pending (step {metrics['step']}/{exp['steps']})"
    return "pending"


# the figures of a row that are averaged over its seeds (each with its spread, `<key>_s_sel`)
SEED_METRICS = {2: ("bleu", "sacrebleu"), 3: ("dev_ppl", "dev_bleu"), 4: ("f1", "precision", "recall")}
# the figure a row's delta against the paper is taken of
DELTA_OF = {2: ("bleu", "bleu"), 4: ("f1", "f1")}


def runs(exp: dict) -> list[tuple[int | None, dict]]:
    """(seed, spec) of each run of a row: its `replicates` (Study.table_spec), the row's own spec
    renamed for each; a spec without replicates is one run."""
    replicates = exp.get("replicates") or [{"seed": None, "name": exp["name"]}]
    return [(r["seed"], {**exp, "name": r["name"]}) for r in replicates]


def over_seeds(table: int, exp: dict, one) -> dict:
    """The row of `exp` over its seeds: `one(spec)` is the row of one run. The figures of
    SEED_METRICS are the mean over the scored runs, each with its spread over them (`_s_sel`, the
    sample standard deviation; None for one run); every other cell is the row's own run's; `seeds`
    counts the runs, and `per_seed` keeps each run's row (the CSV's extra lines)."""
    each = [(seed, one(spec)) for seed, spec in runs(exp)]
    own = next(r for _, r in each if r["experiment"] == exp["name"])
    done = [r for _, r in each if r["status"] == "done"]
    row = {}
    for key, value in own.items():
        row[key] = value
        if key in SEED_METRICS[table]:
            values = [r[key] for r in done if r[key] is not None]
            row[key], row[f"{key}_s_sel"] = mean_and_spread(values) if len(each) > 1 and values else (value, None)
    if len(each) > 1 and len(done) < len(each):
        row["status"] = f"pending ({len(done)} of {len(each)} seeds done)"
    if table in DELTA_OF and row["delta"] is not None:
        key, figure = DELTA_OF[table]
        row["delta"] = row[key] - exp["paper"][figure]
    row["seeds"] = len(each)
    row["seed"] = each[0][0] if len(each) == 1 else None
    row["replicate_of"] = None
    row["per_seed"] = (
        [{**r, "seeds": 1, "seed": seed, "replicate_of": exp["name"]} for seed, r in each] if len(each) > 1 else []
    )
    return row


def table2(layout: Layout, experiments: list[dict]) -> list[dict]:
    return [over_seeds(2, exp, lambda spec: row2(layout, spec)) for exp in experiments]


def row2(layout: Layout, exp: dict) -> dict:
    m = read_metrics(layout, exp["name"])
    s = read_score(layout, exp["name"], exp["testset"])
    ours = s["tokenized_bleu"]["score"] if s else None
    theirs = exp["paper"].get("bleu")
    flops = m["flops"]
    peak = peak_flops(m["device"], m["precision"]) if m["device"] else None  # the run's own arithmetic
    run = what_was_run(2, exp, m, s, layout, "bleu")
    return {
        "experiment": exp["name"],
        "dataset": exp["dataset"],
        "testset": exp["testset"],
        "status": _status(exp, m, bool(s)),
        "paper_bleu": theirs,
        "bleu": ours,
        "delta": ours - theirs if ours is not None and run["comparable"] else None,
        **run,
        "sacrebleu": s["sacrebleu"]["score"] if s else None,
        "lines": s["lines"] if s else None,
        "averaged": exp["average"],
        "averaged_steps": averaged_steps(layout, exp["name"]) if exp["average"] > 1 else None,
        "gpu": m["device"],
        "gpus": m["gpus"],
        "device_hours": m["hours"] * (m["gpus"] or 0),
        "cost_flops_paper_formula": paper_cost(m["hours"], m["gpus"], m["device"]) if m["gpus"] else None,
        "model_flops": flops,
        "mfu": flops / (m["hours"] * 3600 * m["gpus"] * peak) if flops and peak and m["hours"] else None,
        "sacrebleu_signature": s["sacrebleu"]["signature"] if s else None,
    }


def table3(layout: Layout, experiments: list[dict]) -> list[dict]:
    base = next((e for e in experiments if e.get("row") == "base"), None)
    return [over_seeds(3, exp, lambda spec: row3(layout, spec, base)) for exp in experiments]


def row3(layout: Layout, exp: dict, base: dict | None) -> dict:
    m = read_metrics(layout, exp["name"])
    s = read_score(layout, exp["name"], exp["testset"])
    model = exp["model"]
    changed = {
        k: v for k, v in model.items() if k in BASE_MODEL and v != (base or {"model": BASE_MODEL})["model"].get(k)
    }
    if exp["eps_ls"] != (base or {}).get("eps_ls", 0.1):
        changed["eps_ls"] = exp["eps_ls"]
    if model.get("positional") == "learned":
        changed["positional"] = "learned"
    return {
        "row": exp.get("row"),
        "experiment": exp["name"],
        "status": _status(exp, m, bool(s)),
        **what_was_run(3, exp, m, s, layout, "dev_bleu"),
        "changes": ", ".join(f"{k}={v}" for k, v in changed.items()) if exp.get("row") != "base" else "(base)",
        **{k: model[k] for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop")},
        "eps_ls": exp["eps_ls"],
        "steps": exp["steps"],
        "dev_ppl": m["dev_ppl"],
        "paper_dev_ppl": exp["paper"].get("dev_ppl"),
        "dev_bleu": s["tokenized_bleu"]["score"] if s else None,
        "paper_dev_bleu": exp["paper"].get("dev_bleu"),
        "params_M": m["params"] / 1e6 if m["params"] else None,
        "paper_params_M": exp["paper"].get("params_m"),
        "p_value_vs_base": None,
        "test": None,
        "significant": None,
        "as_paper": None,
    }


# Table 3's figures compared with base: the figure, and whether lower is better
DIRECTIONS = (("dev_ppl", "ppl", True), ("dev_bleu", "BLEU", False))


def direction(value: float | None, base: float | None, lower_is_better: bool) -> str | None:
    """ "better", "worse" or "same" of `value` against `base` (None when either is missing)."""
    if value is None or base is None:
        return None
    if abs(value - base) < 1e-9:
        return "same"
    return "better" if (value < base) == lower_is_better else "worse"


def add_directions(rows: list[dict], experiments: list[dict]) -> None:
    """Table 3's `as_paper`: for each variation, whether it moved dev perplexity and dev BLEU against
    the base row the way the paper's row moved against the paper's base (worse or better), and
    whether the test finds its BLEU difference significant. "yes" when every figure the paper moved
    moved the same way here, "no" when none did, "partly" otherwise; the CSV has each direction
    (`<figure>_vs_base`, `paper_<figure>_vs_base`)."""
    pairs = list(zip(experiments, rows))
    base = next(((e, r) for e, r in pairs if e.get("row") == "base"), None)
    for exp, row in pairs:
        for key, _, lower in DIRECTIONS:
            row[f"{key}_vs_base"] = row[f"paper_{key}_vs_base"] = None
        row["moves_as_paper"] = None
        if base is None or exp is base[0]:
            row["as_paper"] = "(base)" if base is not None else None
            continue
        said, agree, compared = [], 0, 0
        for key, label, lower in DIRECTIONS:
            ours = direction(row[key], base[1][key], lower)
            theirs = direction(exp["paper"].get(key), base[0]["paper"].get(key), lower)
            row[f"{key}_vs_base"], row[f"paper_{key}_vs_base"] = ours, theirs
            if ours is None or theirs is None:
                continue
            if theirs == "same":
                said.append(f"{label} {ours} (paper: no change)")
                continue
            compared += 1
            agree += ours == theirs
            said.append(f"{label} {ours}" + (" as paper" if ours == theirs else f" (paper {theirs})"))
        if not compared:
            row["as_paper"] = None
            continue
        verdict = "yes" if agree == compared else "no" if agree == 0 else "partly"
        row["moves_as_paper"] = verdict
        significance = {"yes": "; BLEU significant", "no": "; BLEU not significant"}.get(row.get("significant"), "")
        row["as_paper"] = f"{verdict}: {', '.join(said)}{significance}"


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


def table4(layout: Layout, experiments: list[dict]) -> list[dict]:
    return [over_seeds(4, exp, lambda spec: row4(layout, spec)) for exp in experiments]


def row4(layout: Layout, exp: dict) -> dict:
    m = read_metrics(layout, exp["name"])
    s = read_score(layout, exp["name"], exp["testset"], "parsing")
    run = what_was_run(4, exp, m, s, layout, "f1")
    f1 = s["all"]["f1"] if s else None
    return {
        "row": exp.get("row"),
        "experiment": exp["name"],
        "status": _status(exp, m, bool(s)),
        "paper_f1": exp["paper"].get("f1"),
        "f1": f1,
        "delta": f1 - exp["paper"]["f1"] if f1 is not None and run["comparable"] else None,
        "testset": exp["testset"],
        "lines": s["all"]["sentences"] if s else None,
        "selected_on_dev": selected_candidate(layout, exp["name"]),
        **run,
        "precision": s["all"]["precision"] if s else None,
        "recall": s["all"]["recall"] if s else None,
        "error_sentences": s["all"]["error_sentences"] if s else None,
    }


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
    parts += [papers_rows(number), SETTING_NOTE, footer()]
    return "".join(parts)


OUTSIDE_RUN = " (outside run:)"  # the mark of a finished row of an experiment the study's `run:` left out


def shown(number: int, layout: Layout, experiments: list[dict]) -> tuple[list[dict], list[dict]]:
    """(experiments, rows) of Table `number`: a row per experiment, in order, but of an experiment
    outside the study's `run:` only when one of its runs is scored, its status marked so."""
    rows = {2: table2, 3: table3, 4: table4}[number](layout, experiments)
    kept = [(e, r) for e, r in zip(experiments, rows) if not e.get("outside_run") or scored_runs(layout, e)]
    for exp, row in kept:
        if exp.get("outside_run"):
            row["status"] += OUTSIDE_RUN
    return [e for e, _ in kept], [r for _, r in kept]


def build(number: int, results: str | Path, experiments: list[dict]) -> list[dict]:
    """The rows of Table `number` for `experiments` (one row each, in order; of one outside `run:`
    only when finished) from the study's outputs under `results`."""
    experiments, rows = shown(number, Layout(str(results)), experiments)
    if number == 3:
        add_directions(rows, experiments)
    return rows


def with_extra_rows(rows: list[dict], extra: list[dict]) -> list[dict]:
    """`rows` followed by `extra` (e.g. baselines), every row with the same columns."""
    columns = list(rows[0]) if rows else []
    return rows + [{**{k: None for k in columns}, **r} for r in extra]


def scored_runs(layout: Layout, exp: dict) -> list[dict]:
    """The score records of a row's runs that are scored, in seed order."""
    task = exp.get("task", "translation")
    return [sc for _, spec in runs(exp) if (sc := read_score(layout, spec["name"], spec["testset"], task))]


def add_p_values(rows: list[dict], layout: Layout, experiments: list[dict], samples: int) -> None:
    """Table 3's p_value_vs_base, `test` and `significant`: each scored row against the base row,
    over every seed where both rows have several (aiayn.evaluation.replicates.stratified_ar_p),
    else the two rows' own runs by sacreBLEU's paired bootstrap."""
    base = next((e for e in experiments if e.get("row") == "base"), None)
    base_runs = scored_runs(layout, base) if base else []
    if not base_runs:
        return
    ref = list(read_lines(base_runs[0]["ref"]))
    hyps = lambda records: [list(read_lines(r["hyp"])) for r in records]  # noqa: E731
    base_own = read_score(layout, base["name"], base["testset"])
    for exp, row in zip(experiments, rows):
        if exp is base:
            continue
        ours = scored_runs(layout, exp)
        own = read_score(layout, exp["name"], exp["testset"])
        if len(ours) > 1 and len(base_runs) > 1:
            k = min(len(ours), len(base_runs))
            row["p_value_vs_base"] = stratified_ar_p(ref, hyps(base_runs[:k]), hyps(ours[:k]), samples)
            row["test"] = f"stratified approximate randomization, {k} seeds each"
        elif own and base_own:
            row["p_value_vs_base"] = paired_bootstrap_p(ref, *hyps([base_own, own]), samples)
            row["test"] = "paired bootstrap, one run each (test-set noise only)"
        else:
            continue
        row["significant"] = "yes" if row["p_value_vs_base"] < SIGNIFICANCE else "no"


def csv_rows(rows: list[dict]) -> list[dict]:
    """The CSV's lines: each row (without its `per_seed`), followed by its runs' own rows when it has
    several seeds."""
    out = []
    for row in rows:
        out.append({k: v for k, v in row.items() if k != "per_seed"})
        out += row.get("per_seed") or []
    return out


def check_spec(experiments: list) -> None:
    """--experiments is what `Study.table_spec` writes; name what a hand-made one lacks."""
    for i, exp in enumerate(experiments):
        missing = [k for k in TABLE_SPEC_KEYS if not isinstance(exp, dict) or k not in exp]
        if missing:
            name = exp.get("name", f"#{i + 1}") if isinstance(exp, dict) else f"#{i + 1}"
            raise UserError(
                f"--experiments: experiment {name} lacks {', '.join(missing)}; "
                "use --config (or what `snakemake table<n>` passes)"
            )


def write_table(
    number: int,
    *,
    experiments: list | None = None,
    config=None,
    results=None,
    bootstrap: int = 0,
    with_baselines: bool = False,
    study: str | None = None,
    out_md=None,
    out_csv=None,
    log=print,
) -> list[dict]:
    """Table `number` as Markdown and CSV (default: the study's tables folder) for `experiments`
    (`Study.table_spec`'s, under `results`), or for the study `config` (its results, its
    baselines setting), from whatever has finished. Table 3 gets paired-bootstrap p-values with
    `bootstrap` samples; Tables 2 and 4 the trivial baselines with `with_baselines`."""
    if experiments is not None:
        check_spec(experiments)
        layout = Layout(str(results or "results"))
    elif config is not None:
        loaded = cfg.load(config)
        experiments = Study(loaded).table_spec(number)
        layout = Layout(str(results or loaded["results"]))
        with_baselines = with_baselines or loaded["baselines"]
    else:
        raise UserError("give --experiments (JSON) or --config (the study config)")
    experiments, rows = shown(number, layout, experiments)
    if number == 3 and bootstrap:
        add_p_values(rows, layout, experiments, bootstrap)
    if number == 3:
        add_directions(rows, experiments)
    if with_baselines and number in (2, 4):
        rows = with_extra_rows(rows, baselines.table_rows(number, layout, experiments))
    md = Path(out_md or layout.table(number, "md"))
    csv_path = Path(out_csv or md.with_suffix(".csv"))
    with atomic_paths(md, csv_path) as (tmp_md, tmp_csv):
        notes = cleaning_note(layout, experiments) if number == 2 else ""
        tmp_md.write_text(markdown_document(number, rows, study, notes), encoding="utf-8")
        tmp_csv.write_text(to_csv(csv_rows(rows)), encoding="utf-8")
    ours = [r for e, r in zip(experiments, rows) if not e.get("outside_run")]
    outside = len(experiments) - len(ours)
    more = f", and {outside} finished outside run:" if outside else ""
    done = sum(r["status"] == "done" for r in ours)
    log(f"table {number}: {done}/{len(ours)} experiments done{more} -> {md}, {csv_path}")
    return rows
