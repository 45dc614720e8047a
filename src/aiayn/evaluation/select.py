"""Model selection on the dev set (§6.3: "only dropout, learning rate and beam size were tuned on
section 22"): of the candidates of a `tune` grid, the one with the best dev score is the experiment's
model. Its last checkpoint and metrics become the experiment's own, and `selected.json` says which
it was and what every candidate scored. Pure Python: no torch (files are copied, not loaded).
"""

from __future__ import annotations

import math
import shutil

from aiayn.errors import UserError
from aiayn.io import atomic_paths, readable, zip_damage
from aiayn.runtime import metrics, records


def dev_score(score: dict) -> tuple[str, float]:
    """(metric name, value) of a score file: EVALB F1 for parses, tokenized BLEU for translations."""
    if "all" in score:
        return "f1", float(score["all"]["f1"])
    return "bleu", float(score["tokenized_bleu"]["score"])


def choose(candidates: list[dict]) -> tuple[dict, list[dict]]:
    """The best of [{"name", "score" (a score file's path), "metrics" (optional), ...}] by dev score;
    among equal scores the lower dev perplexity (from its metrics), then the first. Returns it and
    every candidate with its score."""
    scored = []
    for c in candidates:
        metric, value = dev_score(records.read_score(c["score"])[1])
        dev_ppl = metrics.summary(c["metrics"])["dev_ppl"] if c.get("metrics") else None
        scored.append({**c, "metric": metric, "value": value, "dev_ppl": dev_ppl})
    if not scored:
        raise UserError("--candidates: no candidate to select from (an empty list); give the runs to choose among")

    def rank(c: dict) -> tuple[float, float]:
        ppl = c["dev_ppl"]
        return c["value"], -ppl if ppl is not None and math.isfinite(ppl) else float("-inf")

    best = max(scored, key=rank)  # max keeps the first of equals (scores are finite: records.read_score)
    return best, scored


def select(candidates: list[dict], *, out_model: str, out_metrics: str, record: str, log=print) -> dict:
    """Copy the best candidate's model and metrics into place and write the record, all three or
    none (a missing metrics file leaves no copied model behind); return the record."""
    best, scored = choose(candidates)
    sources = [readable(best["model"], "the candidate's model"), readable(best["metrics"], "the candidate's metrics")]
    if (damage := zip_damage(sources[0])) is not None:  # copied, not loaded: checked as a load checks it
        raise UserError(f"{sources[0]}: {damage}; delete it and rerun {best['name']}'s training")
    result = {
        "selected": best["name"],
        "setting": best.get("setting", {}),
        "metric": best["metric"],
        "value": best["value"],
        "candidates": [{k: c.get(k) for k in ("name", "setting", "metric", "value", "dev_ppl")} for c in scored],
    }
    with atomic_paths(out_model, out_metrics) as temps:
        for source, tmp in zip(sources, temps):
            shutil.copyfile(source, tmp)
        records.write(record, "selected", result)
    for c in result["candidates"]:
        log(f"{'*' if c['name'] == result['selected'] else ' '} {c['name']}: dev {c['metric']} {c['value']:.2f}")
    log(f"selected {result['selected']} -> {out_model}")
    return result
