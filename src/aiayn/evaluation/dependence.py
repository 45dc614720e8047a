"""Whether a model's output depends on its input: measured on its decoded test set, beside its
score, so that a model that ignores its source (a constant parser writing one tree for every
sentence, a translation model writing one sentence) is said and never counted as a result.

The figures: how many distinct outputs it wrote, and the share of the sentences its most common
output covers, next to the same figures of the references. For parsing both sides are compared as
bracket structures, every leaf XX (the linearization of aiayn.parsing.trees with POS replaced): a
parser that writes other tags over one bracketing (singular or plural nouns) reads its sentence no
more than a constant one, for EVALB's F1. A model ignores its input when one
output covers at least IGNORES of the sentences where no reference covers more than REFERENCES_AT_MOST.
"""

from __future__ import annotations

import re
from collections import Counter

from aiayn.errors import UserError
from aiayn.runtime.lines import read_lines

IGNORES = 0.9  # one output for this share of the sentences or more ...
REFERENCES_AT_MOST = 0.5  # ... where the references' most common one covers at most this share
PRETERMINAL = re.compile(r"\([^\s()]+ [^\s()]+\)")  # (DT the)


def bracketing(line: str) -> str:
    """A parse as its bracket structure, every leaf XX: a linearized output ("(S (NP DT NN )NP ...")
    or a bracketed gold tree ("(TOP (S (NP (DT the) (NN cat)) ...") alike, the gold's outer TOP left out."""
    text = line.strip()
    if PRETERMINAL.search(text):  # a bracketed tree: linearize it as the model's target is
        tokens, open_labels = [], []  # a ")" closes the innermost constituent still open
        for token in re.findall(r"\(\S*|\)|[^\s()]+", PRETERMINAL.sub(" XX ", text)):
            if token.startswith("("):
                open_labels.append(token[1:])
            elif token == ")":
                token = ")" + (open_labels.pop() if open_labels else "")
            tokens.append(token)
    else:
        tokens = text.split()
    tokens = [t if t.startswith(("(", ")")) else "XX" for t in tokens]
    if tokens[:1] == ["(TOP"] and tokens[-1:] == [")TOP"]:
        tokens = tokens[1:-1]
    return " ".join(tokens)


def measure(outputs: list[str], references: list[str], parsing: bool = False) -> dict:
    """The figures of the module docstring for aligned output and reference lines."""
    refs = [bracketing(r) for r in references] if parsing else [r.strip() for r in references]
    outs = [bracketing(o) for o in outputs] if parsing else [o.strip() for o in outputs]
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
    try:  # lines split on "\n" only, as the score read them (a WMT line may hold U+2028 or U+0085)
        hyp, ref = (list(read_lines(score[key])) for key in ("hyp", "ref"))
    except (KeyError, OSError, UserError):
        return None
    return measure(hyp, ref, parsing=task == "parsing")


def cell(d: dict | None) -> str | None:
    """The table's cell: distinct outputs of the lines, and the verdict when it ignores its input."""
    if not d or not d.get("lines"):
        return None
    text = f"{d['distinct_outputs']} of {d['lines']}"
    return text + " (ignores its input)" if d["ignores_input"] else text
