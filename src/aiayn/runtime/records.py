"""The JSON records one step writes and another reads back, each with its JSON schema: the one
reader (`read`) and the one writer (`write`) of every kind.

A record read back is checked before any of it is used: UTF-8, JSON, a JSON object, every field it
must have, of its type and range, and no NaN or infinity where a figure is meant (Python's json
would read `NaN` as a float, and a table would print it as done). What is wrong is one line naming
the file, the field and the step to rerun. A record is checked when written too, so a writer of
ours that breaks its own kind fails at once, not at the reader. metrics.jsonl's lines have kinds of
their own, read by `aiayn.runtime.metrics` through `check`.
"""

from __future__ import annotations

import math
import os

import jsonschema

from aiayn.errors import UserError
from aiayn.io import parse_json, readable, write_json

COUNT = {"type": "integer", "minimum": 0}
FIGURE = {"type": "number"}  # finite: NaN and infinities are refused when the JSON is parsed
# BLEU, chrF, F1: a score of 150 is no score (sacreBLEU's perfect 100 may come 1e-14 above it)
PERCENT = {"type": "number", "minimum": 0, "maximum": 100 + 1e-9}
STEP = {"type": "integer", "minimum": 0}
AMOUNT = {"type": "number", "minimum": 0}  # tokens, FLOPs, seconds, a rate: no figure below 0
TEXT = {"type": "string"}


def added(values) -> float:
    """The sum of `values`, added left to right in plain float arithmetic as perl adds and as
    Python 3.11's sum() did: the same bits on every Python. (Python 3.12's sum() compensates its
    rounding, so a figure summed with it differs in its last bits between 3.11 and 3.13, and so do
    the records and tables that hold it.) Every sum of floats that a record or table holds uses it."""
    total = 0.0
    for value in values:
        total += value
    return total


def record(required: dict, optional: dict | None = None) -> dict:
    """The schema of a JSON object with `required` and `optional` fields (others are allowed: a
    newer writer may add some)."""
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}


# a tokenized BLEU of a translation score (aiayn.evaluation.score.bleu_scores)
TOKENIZED_BLEU = record({"score": PERCENT}, {"hyp_len": COUNT, "ref_len": COUNT, "reference": TEXT})
SCHEMAS = {
    # metrics.jsonl, a line per record (aiayn.runtime.metrics)
    "metrics start": record(
        {
            "event": {"const": "start"},
            "step": STEP,
            "world_size": {"type": "integer", "minimum": 1},
            "device_name": TEXT,
            "params": COUNT,
            "precision": TEXT,
            "wall": FIGURE,
        },
        {
            "aiayn": TEXT,
            "agents": {"type": "integer", "minimum": 1},
            "hosts": {"type": "array", "items": TEXT},
            "accumulation": {"type": "integer", "minimum": 1},
            "budget": COUNT,
            "threads": COUNT,
            "omp_wait_policy": {"type": ["string", "null"]},
            "run": {"type": "object"},  # the run's identity (aiayn.training.train.identity)
        },
    ),  # fmt: skip
    "metrics progress": record(
        {
            "step": {"type": "integer", "minimum": 1},
            "loss": {"type": "number"},
            "lr": AMOUNT,
            "tgt_tokens_per_update": AMOUNT,
            "flops_per_update": AMOUNT,
            "tgt_tokens_per_s": AMOUNT,
            "wall": AMOUNT,
        },
        {
            "src_tokens_per_update": AMOUNT,
            "tflops": AMOUNT,
            "mfu": {"type": ["number", "null"]},
            "eta_s": FIGURE,
            "grad_norm": {"type": ["number", "null"]},
            "grad_norm_max": {"type": ["number", "null"]},
            "job_s": AMOUNT,
        },
    ),  # fmt: skip
    "metrics dev": record(
        {"step": STEP, "dev_ppl": {"type": "number", "minimum": 1}}, {"dev_nll": AMOUNT, "dev_loss": AMOUNT}
    ),
    "metrics diverging": record(
        {"event": {"const": "diverging"}, "step": STEP, "loss": {"type": "number"}, "wall": FIGURE},
        {
            "mean": {"type": "number"},
            "lowest": {"type": "number"},
            "lr": {"type": "number"},
            "grad_norm": {"type": "number"},
        },
    ),
    "metrics stalling": record(
        {
            "event": {"const": "stalling"},
            "step": STEP,
            "on": TEXT,
            "value": {"type": "number"},
            "floor": {"type": "number"},
            "lr": {"type": "number"},
            "wall": FIGURE,
        },
        {"grad_norm": {"type": ["number", "null"]}},
    ),  # fmt: skip
    "metrics stop": record(
        {"event": {"const": "stop"}, "step": STEP, "reason": TEXT, "wall": FIGURE}, {"job_s": AMOUNT}
    ),
    # check.json (aiayn.check.check), written when every check passed
    "check": record(
        {
            "experiment": TEXT,
            "passed": {"const": True},
            "checks": {
                "type": "array",
                "minItems": 1,
                "items": record({"name": TEXT, "passed": {"type": "boolean"}, "figure": TEXT}),
            },
        },
        {"aiayn": TEXT, "model": {"type": "object"}, "pairs": COUNT},
    ),  # fmt: skip
    # figures/diagonal.json (aiayn.report.figures): the encoder-decoder attention's distance from the diagonal
    "diagonal": record(
        {
            "pairs": {"type": "integer", "minimum": 1},
            "layers": {
                "type": "array",
                "minItems": 1,
                "items": record({"layer": STEP, "distance": FIGURE}, {"position": FIGURE}),
            },
        },
        {"uniform": FIGURE, "monotone": FIGURE, "drawn_line": COUNT},
    ),
    # average.json (aiayn.training.average)
    "average": record(
        {"steps": {"type": "array", "items": STEP, "minItems": 1}},
        {"interval": {"type": "integer", "minimum": 1}, "checkpoints": {"type": "array", "items": TEXT}},
    ),
    # train.report.json (aiayn.data.prepare)
    "train report": record(
        {"kept": COUNT},
        {
            "removed": {"type": "object", "additionalProperties": COUNT},
            "separators_replaced": COUNT,
            "corpora": {"type": "array", "items": record({"pairs": COUNT, "kept": COUNT})},
        },
    ),  # fmt: skip
    # <testset>.score.json (aiayn.evaluation.score)
    "translation score": record(
        {
            "lines": {"type": "integer", "minimum": 1},
            "tokenized_bleu": TOKENIZED_BLEU,
            "sacrebleu": record({"score": PERCENT, "signature": TEXT}),
        },
        {"chrf": record({"score": PERCENT}), "hyp": TEXT, "ref": TEXT, "tokenized_bleu_wmt": TOKENIZED_BLEU},
    ),  # fmt: skip
    "parsing score": record(
        {
            "all": record(
                {"f1": PERCENT, "precision": PERCENT, "recall": PERCENT, "sentences": COUNT, "error_sentences": COUNT}
            )
        },
        {"lines": COUNT, "gold_errors": {"type": "array", "items": COUNT}},
    ),  # fmt: skip
    # selected.json (aiayn.evaluation.select)
    "selected": record(
        {
            "selected": TEXT,
            "setting": {"type": "object"},
            "metric": {"enum": ["bleu", "f1"]},
            "value": PERCENT,
            "candidates": {"type": "array", "items": record({"name": TEXT, "value": PERCENT})},
        },
    ),  # fmt: skip
}
WRITTEN_BY = {  # the step to rerun when a record is damaged
    "check": "check",
    "diagonal": "figures",
    "average": "average",
    "train report": "prepare",
    "translation score": "score",
    "parsing score": "score",
    "selected": "select",
    "score": "score",
}


def problem(value, kind: str) -> str | None:
    """What is wrong with `value` as a record of `kind` ("field: message"), or None."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMAS[kind]).iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "the record"
    message = error.message if len(error.message) < 200 else error.message[:200] + "..."
    return f"{where}: {message}"


def check(value, kind: str, label: str) -> dict:
    """`value` if it is a record of `kind`, else a UserError naming `label` (a file, a file's line)."""
    said = problem(value, kind)
    if said:
        step = WRITTEN_BY.get(kind, "the step that writes it")
        raise UserError(f"{label}: not a {kind} record ({said}); remove it and rerun {step}")
    return value


def read(path: str | os.PathLike, kind: str) -> dict:
    """The record of `kind` in the file `path`, checked whole."""
    return check(_parsed(path, kind), kind, str(path))


def _parsed(path: str | os.PathLike, kind: str):
    """The JSON a record file of `kind` holds, or one line naming it and the step to rerun."""
    path = readable(path, f"a {kind} record")
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # (a UnicodeDecodeError is one)
        step = WRITTEN_BY.get(kind, "the step that writes it")
        raise UserError(f"{path}: not a readable {kind} record ({exc}); remove it and rerun {step}") from None


def write(path: str | os.PathLike, kind: str, value: dict) -> None:
    """Write a record of `kind` atomically, checked first (a figure that is not finite included)."""
    said = problem(value, kind) or _not_finite(value)
    if said:
        raise ValueError(f"a {kind} record to write to {path} is wrong: {said}")
    write_json(path, value)


def _not_finite(value, where: str = "the record") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        said = _not_finite(v, f"{where}.{k}" if where != "the record" else str(k))
        if said:
            return said
    return None


def read_score(path: str | os.PathLike) -> tuple[str, dict]:
    """(kind, record) of a score file: a parsing score (EVALB's "all") or a translation score."""
    value = _parsed(path, "score")
    kind = "parsing score" if isinstance(value, dict) and "all" in value else "translation score"
    return kind, check(value, kind, str(path))
