"""The paper's Tables 2, 3 and 4 with our numbers beside the paper's, from whatever has finished.

Each table is a list of row dicts, written as CSV and as Markdown from the same values. A run
whose score file is missing shows as pending, with its progress (step / total) if its metrics
exist. Sources: <experiment>/<set>.score.json, <experiment>/metrics.jsonl, the study's config.
Tables read and format; they score nothing (baselines: `aiayn.baselines`, p-values: `aiayn.score`).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from aiayn import metrics
from aiayn.hardware import PEAKS, model_flops, peak_flops

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
BASE_MODEL = {"N": 6, "d_model": 512, "d_ff": 2048, "h": 8, "d_k": 64, "d_v": 64, "P_drop": 0.1}


def paper_cost(hours: float, gpus: int, gpu: str) -> float | None:
    """Footnote 5: training time × number of GPUs × sustained single-precision FLOP/s of the GPU."""
    capacity = peak_flops(gpu, "fp32")
    return hours * 3600 * gpus * capacity if capacity else None


def read_score(results: Path, experiment: str, testset: str) -> dict | None:
    """The score file of `experiment` on `testset`, or None before it exists."""
    path = results / experiment / f"{testset}.score.json"
    return json.loads(path.read_text()) if path.exists() else None


def _status(exp: dict, metrics: dict, scored: bool) -> str:
    if scored:
        return "done"
    if metrics["step"]:
        return f"pending (step {metrics['step']}/{exp['steps']})"
    return "pending"


def table2(results: Path, experiments: list[dict]) -> list[dict]:
    rows = []
    for exp in experiments:
        m = metrics.summary(results / exp["name"] / "metrics.jsonl")
        s = read_score(results, exp["name"], exp["testset"])
        ours = s["tokenized_bleu"]["score"] if s else None
        paper = exp["paper"].get("bleu")
        flops = model_flops(m["params"], m["tgt_tokens"]) if m["params"] else None
        peak = peak_flops(m["device"], m["precision"]) if m["device"] else None  # the run's own arithmetic
        rows.append(
            {
                "experiment": exp["name"],
                "dataset": exp["dataset"],
                "testset": exp["testset"],
                "status": _status(exp, m, bool(s)),
                "paper_bleu": paper,
                "bleu": ours,
                "delta": ours - paper if ours is not None and paper is not None else None,
                "sacrebleu": s["sacrebleu"]["score"] if s else None,
                "lines": s["lines"] if s else None,
                "averaged": exp["average"],
                "gpu": m["device"],
                "gpus": m["gpus"],
                "gpu_hours": m["hours"] * (m["gpus"] or 0),
                "cost_flops_paper_formula": paper_cost(m["hours"], m["gpus"], m["device"]) if m["gpus"] else None,
                "model_flops": flops,
                "mfu": flops / (m["hours"] * 3600 * m["gpus"] * peak) if flops and peak and m["hours"] else None,
                "sacrebleu_signature": s["sacrebleu"]["signature"] if s else None,
            }
        )
    return rows


def table3(results: Path, experiments: list[dict]) -> list[dict]:
    base = next((e for e in experiments if e.get("row") == "base"), None)
    rows = []
    for exp in experiments:
        m = metrics.summary(results / exp["name"] / "metrics.jsonl")
        s = read_score(results, exp["name"], exp["testset"])
        model = exp["model"]
        changed = {
            k: v for k, v in model.items() if k in BASE_MODEL and v != (base or {"model": BASE_MODEL})["model"].get(k)
        }
        if exp["eps_ls"] != (base or {}).get("eps_ls", 0.1):
            changed["eps_ls"] = exp["eps_ls"]
        if model.get("positional") == "learned":
            changed["positional"] = "learned"
        row = {
            "row": exp.get("row"),
            "experiment": exp["name"],
            "status": _status(exp, m, bool(s)),
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
        }
        rows.append(row)
    return rows


def table4(results: Path, experiments: list[dict]) -> list[dict]:
    rows = []
    for exp in experiments:
        m = metrics.summary(results / exp["name"] / "metrics.jsonl")
        s = read_score(results, exp["name"], exp["testset"])
        rows.append(
            {
                "row": exp.get("row"),
                "experiment": exp["name"],
                "status": _status(exp, m, bool(s)),
                "paper_f1": exp["paper"].get("f1"),
                "f1": s["all"]["f1"] if s else None,
                "precision": s["all"]["precision"] if s else None,
                "recall": s["all"]["recall"] if s else None,
                "error_sentences": s["all"]["error_sentences"] if s else None,
            }
        )
    return rows


# -- writing ----------------------------------------------------------------------------------------
def _fmt(value, key: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if "flops" in key or "cost" in key:
            return f"{value:.1e}"
        if key in ("mfu",):
            return f"{value:.1%}"
        if key.startswith("p_value"):
            return f"{value:.4f}"
        return f"{value:.2f}"
    return str(value)


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def to_markdown(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "(no experiments)\n"
    columns = columns or list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r.get(c), c) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


TITLES = {
    2: "Table 2: test-set BLEU (newstest2014 in the paper) and training cost",
    3: "Table 3: variations of the base model (dev set, no checkpoint averaging)",
    4: "Table 4: English constituency parsing (test-set F1, EVALB; WSJ 23 in the paper)",
}


def markdown_document(number: int, rows: list[dict]) -> str:
    parts = [f"# {TITLES[number]}\n"]
    if number == 2:
        cols = [
            "experiment",
            "status",
            "paper_bleu",
            "bleu",
            "delta",
            "sacrebleu",
            "lines",
            "gpu",
            "gpus",
            "gpu_hours",
            "cost_flops_paper_formula",
            "model_flops",
            "mfu",
        ]
        parts.append(to_markdown(rows, cols))
        parts.append(
            "\nbleu: tokenized BLEU as the paper measured it (Moses tokenizer, compound splitting for EN-DE); "
            "sacrebleu: detokenized sacreBLEU; delta = bleu - paper_bleu. Training cost by the paper's footnote 5 "
            "(hours x GPUs x the GPU's FP32 TFLOPS: "
            + ", ".join(f"{k} {v['fp32'] / 1e12:g}" for k, v in PEAKS.items() if "fp32" in v)
            + "); model_flops = 6 x parameters x target tokens.\n"
        )
        sigs = sorted({r["sacrebleu_signature"] for r in rows if r["sacrebleu_signature"]})
        parts += [f"\nsacreBLEU signature: `{sig}`\n" for sig in sigs]
        parts.append(
            "\nThe paper's rows:\n\n"
            + to_markdown(
                [
                    {"model": n, "EN-DE": de, "EN-FR": fr, "cost EN-DE": cde, "cost EN-FR": cfr}
                    for n, de, fr, cde, cfr in PAPER_TABLE2
                ]
            )
        )
    elif number == 3:
        cols = [
            "row",
            "experiment",
            "status",
            "changes",
            "steps",
            "dev_ppl",
            "paper_dev_ppl",
            "dev_bleu",
            "paper_dev_bleu",
            "params_M",
            "paper_params_M",
            "p_value_vs_base",
        ]
        parts.append(to_markdown(rows, cols))
        parts.append(
            "\ndev_ppl: per-piece perplexity on the dev set at the last checkpoint (depends on eps_ls, as the "
            "paper says); dev_bleu: tokenized BLEU of the last checkpoint, no averaging; p_value_vs_base: "
            "sacreBLEU paired bootstrap against the base row.\n"
        )
    else:
        parts.append(
            to_markdown(
                rows, ["row", "experiment", "status", "paper_f1", "f1", "precision", "recall", "error_sentences"]
            )
        )
        parts.append(
            "\nThe paper's rows:\n\n" + to_markdown([{"parser": p, "training": t, "F1": f} for p, t, f in PAPER_TABLE4])
        )
    return "".join(parts)


def build(number: int, results: Path, experiments: list[dict]) -> list[dict]:
    """The rows of Table `number` for `experiments` (one row each, in order)."""
    return {2: table2, 3: table3, 4: table4}[number](results, experiments)


def with_extra_rows(rows: list[dict], extra: list[dict]) -> list[dict]:
    """`rows` followed by `extra` (e.g. baselines), every row with the same columns."""
    columns = list(rows[0]) if rows else []
    return rows + [{**{k: None for k in columns}, **r} for r in extra]
