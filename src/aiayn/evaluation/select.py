"""Model selection on the dev set (§6.3: "only dropout, learning rate and beam size were tuned on
section 22"): of the candidates of a `tune` grid, the one with the best dev score is the experiment's
model. Its last checkpoint and metrics become the experiment's own, and `selected.json` says which
it was and what every candidate scored. Pure Python: no torch (files are copied, not loaded).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import atomic_copy, write_json
from aiayn.runtime import metrics


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
        path = Path(c["score"])
        try:
            metric, value = dev_score(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as exc:
            raise UserError(f"{path}: not a readable score file ({exc}); rerun its score step") from None
        dev_ppl = metrics.summary(c["metrics"])["dev_ppl"] if c.get("metrics") else None
        scored.append({**c, "metric": metric, "value": value, "dev_ppl": dev_ppl})
    if not scored:
        raise UserError("no candidates to select from")
    finite = [c for c in scored if math.isfinite(c["value"])]  # a NaN score is no score: never the best
    if not finite:
        raise UserError(
            f"no candidate has a finite dev score ({', '.join(c['score'] for c in scored)}); check their training"
        )

    def rank(c: dict) -> tuple[float, float]:
        ppl = c["dev_ppl"]
        return c["value"], -ppl if ppl is not None and math.isfinite(ppl) else float("-inf")

    best = max(finite, key=rank)  # max keeps the first of equals
    return best, scored


def select(candidates: list[dict], *, out_model: str, out_metrics: str, record: str, log=print) -> dict:
    """Copy the best candidate's model and metrics into place; write the record; return it."""
    best, scored = choose(candidates)
    atomic_copy(best["model"], out_model)
    atomic_copy(best["metrics"], out_metrics)
    result = {
        "selected": best["name"],
        "setting": best.get("setting", {}),
        "metric": best["metric"],
        "value": best["value"],
        "candidates": [{k: c.get(k) for k in ("name", "setting", "metric", "value", "dev_ppl")} for c in scored],
    }
    write_json(record, result)
    for c in result["candidates"]:
        log(f"{'*' if c['name'] == result['selected'] else ' '} {c['name']}: dev {c['metric']} {c['value']:.2f}")
    log(f"selected {result['selected']} -> {out_model}")
    return result
