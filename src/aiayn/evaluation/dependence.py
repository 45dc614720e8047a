"""Whether a model's output depends on its input: measured on its decoded test set, beside its
score, so that a model that ignores its source (a constant parser writing one tree for every
sentence, a translation model writing one sentence) is said and never counted as a result.

The figures: how many distinct outputs it wrote, and the share of the sentences its most common
output covers, next to the same figures of the references (for parsing the gold trees' bracket
structure, words left out: the shapes a parser could write). A model ignores its input when one
output covers at least IGNORES of the sentences where no reference covers more than REFERENCES_AT_MOST.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

IGNORES = 0.9  # one output for this share of the sentences or more ...
REFERENCES_AT_MOST = 0.5  # ... where the references' most common one covers at most this share
WORD = re.compile(r"\(([^\s()]+) [^\s()]+\)")  # a preterminal with its word: (DT the) -> (DT)


def shape(tree: str) -> str:
    """A bracketed tree without its words: its labels and brackets."""
    return WORD.sub(r"(\1)", tree.strip())


def measure(outputs: list[str], references: list[str], parsing: bool = False) -> dict:
    """The figures of the module docstring for aligned output and reference lines."""
    refs = [shape(r) for r in references] if parsing else [r.strip() for r in references]
    outs = [o.strip() for o in outputs]
    n = len(outs)
    if not n:
        return {"lines": 0, "ignores_input": False}
    common, count = Counter(outs).most_common(1)[0]
    ref_count = Counter(refs).most_common(1)[0][1] if refs else 0
    modal, ref_modal = count / n, ref_count / max(len(refs), 1)
    return {
        "lines": n,
        "distinct_outputs": len(set(outs)),
        "distinct_references": len(set(refs)),
        "modal_share": modal,
        "reference_modal_share": ref_modal,
        "most_common_output": common[:200],
        "ignores_input": modal >= IGNORES and ref_modal <= REFERENCES_AT_MOST,
    }


def said(d: dict, what: str) -> str:
    """One line for a model that ignores its input."""
    return (
        f"{what}: the model ignores its input: one output for {d['modal_share']:.0%} of the {d['lines']} sentences "
        f"({d['distinct_outputs']} distinct; the references' most common covers {d['reference_modal_share']:.0%}, "
        f"{d['distinct_references']} distinct): not a result, whatever its score"
    )


def of_score(score: dict | None, task: str) -> dict | None:
    """The score record's input dependence, or, for a record written before it was measured, the
    same figures from the files it names (None where they are gone)."""
    if not score:
        return None
    if "input_dependence" in score:
        return score["input_dependence"]
    try:
        hyp = Path(score["hyp"]).read_text(encoding="utf-8").splitlines()
        ref = Path(score["ref"]).read_text(encoding="utf-8").splitlines()
    except (KeyError, OSError, UnicodeDecodeError):
        return None
    return measure(hyp, ref, parsing=task == "parsing")


def cell(d: dict | None) -> str | None:
    """The table's cell: distinct outputs of the lines, and the verdict when it ignores its input."""
    if not d or not d.get("lines"):
        return None
    text = f"{d['distinct_outputs']} of {d['lines']}"
    return text + " (ignores its input)" if d["ignores_input"] else text
