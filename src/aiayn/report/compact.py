"""The paper's Tables 2, 3 and 4 as the paper prints them, with our rows among the paper's: the
block at the top of each tableN.md (and of its HTML page in the report).

Each of our rows stands right under the paper's row it reproduces, in the paper's columns (Table 2:
model, BLEU EN-DE, EN-FR, training cost EN-DE, EN-FR; Table 3: the variation's N, d_model, d_ff, h,
d_k, d_v, P_drop, eps_ls, steps, dev PPL, dev BLEU, params; Table 4: parser, training, F1), so that
our figure and the paper's are read one above the other. What a cell cannot say (what differs
from the paper's setting, the seeds and their spread, the significance test, the cost details, a
status) is the row's numbered note under the table; the CSV keeps every cell of every row
(aiayn.report.tables). The block fits WIDTH characters a line for the study's own experiment names.
"""

from __future__ import annotations

import re
import textwrap

from aiayn.study import paper
from aiayn.study.paper import NOT_COMPARABLE

WIDTH = 120  # characters a line of the block (and of the notes, wrapped)
OURS = "_ours"  # the key that marks a line of the block as ours (a line of the paper's has none)
NOT_A_RESULT = "✗"  # after a figure of a model that ignores its input (aiayn.evaluation.dependence)
IGNORES_INPUT = "ignores its input"  # the status of a scored model whose output does not depend on its source
PAPER_PAIRS = ("EN-DE", "EN-FR")  # Table 2's columns, in the paper's order

# Table 3's columns: the model's, then training steps and the three figures (dev set), as the paper's
T3_MODEL = ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls")
COLUMNS = {
    3: ["row", *T3_MODEL[:-1], "ε_ls", "steps", "PPL", "BLEU", "params"],
    4: ["parser", "training", "F1"],
}
# the columns of figures, aligned right (Table 2's: every column but the model's name)
FIGURES = {
    2: frozenset({"BLEU", "cost"}),
    3: frozenset(COLUMNS[3][1:]),
    4: frozenset({"F1"}),
}
# the paper's order of Table 3's rows: base, the variations (A)-(E), big last; any other row before big
T3_ORDER = {"base": 0, "A": 1, "B": 2, "C": 3, "D": 4, "E": 5, "big": 7}


def columns(number: int, lines: list[dict]) -> list[str]:
    """The block's columns: its lines' (Table 2's name the language pairs present), less the mark
    `OURS` of our lines."""
    keys = list(lines[0]) if lines else (["model"] if number == 2 else COLUMNS[number])
    return [k for k in keys if k != OURS]


def ours(label: str, numbers: list[int]) -> str:
    """Our line's name with its notes' numbers: "base [1, 2]"."""
    return f"{label} [{', '.join(map(str, numbers))}]"


def right_aligned(number: int, column: str) -> bool:
    """Whether `column` of Table `number`'s block holds figures (aligned right)."""
    return column.split(" ")[0] in FIGURES[number] or column in FIGURES[number]


def pair_label(exp: dict | None, row: dict) -> str:
    """EN-DE for an experiment of the pair (en, de); a row without its experiment: the pair its
    dataset's name ends with (wmt14-en-de), else the dataset's name."""
    pair = (exp or {}).get("pair")
    if pair:
        return "-".join(pair).upper()
    dataset = str(row.get("dataset") or "?")
    named = re.search(r"(?:^|[-_.])([a-z]{2,3})-([a-z]{2,3})$", dataset)
    return "-".join(named.groups()).upper() if named else dataset


def flops(value: float | None) -> str:
    """A cost as the paper prints it, 3.3e18."""
    if value is None:
        return ""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def figure(value: float | None, row: dict) -> str:
    """Our figure's cell: the figure, ✗ after it when the model ignores its input, the status of a
    row without one ("pending"; "at 40 %", a training at step 120,000 of 300,000)."""
    status = row.get("status") or ""
    if value is None:
        if status.startswith("pending (step "):
            done, total = (int(n) for n in re.findall(r"\d+", status)[:2])
            return f"at {100 * done // total} %" if total else "pending"
        return "pending" if status.startswith("pending") else ""
    text = f"{value:.2f}"
    return f"{text} {NOT_A_RESULT}" if no_result(row) else text


def no_result(row: dict) -> bool:
    """Whether a row is of a model that ignores its input: no result, counted nowhere."""
    return str(row.get("status") or "").startswith(IGNORES_INPUT)


def steps_text(steps) -> str:
    """Training steps as Table 3 prints them: 100K."""
    if not isinstance(steps, int):
        return "" if steps is None else str(steps)
    return f"{steps // 1000}K" if steps >= 1000 and steps % 1000 == 0 else str(steps)


def paper_figure(value: float | None, digits: int) -> str:
    """A figure of the paper's with the digits the paper prints (Table 3: PPL with two decimals, BLEU with one)."""
    return "" if value is None else f"{value:.{digits}f}"


def short(value) -> str:
    return "" if value is None else str(value)


# -- the notes: one per row of ours ------------------------------------------------------------------
def seeds_phrase(row: dict, figures: tuple[tuple[str, str], ...]) -> str | None:
    """What a row's figures are over: the mean of its seeds done (of those planned, while some are not)."""
    planned = row.get("seeds") or 0
    done = planned if row.get("seeds_done") is None else row["seeds_done"]
    if done < 2:  # one seed's figure, or none: the status says how many are done
        return None
    spread = [
        f"{label} s_sel {row[f'{key}_s_sel']:.2f}" for key, label in figures if row.get(f"{key}_s_sel") is not None
    ]
    of = f" of {planned}" if done < planned else ""
    return f"mean of {done}{of} seeds" + (f" ({', '.join(spread)})" if spread else "")


def cost_phrase(row: dict) -> str | None:
    said = []
    if row.get("hardware"):
        said.append(row["hardware"])
    if row.get("device_hours"):
        said.append(f"{row['device_hours']:.2f} device-hours")
    if row.get("cost_flops_paper_formula"):
        said.append(f"cost {flops(row['cost_flops_paper_formula'])} FLOPs by footnote 5")
    elif row.get("gpu") == "cpu":
        said.append("no cost by footnote 5 (a CPU run)")
    if row.get("model_flops"):
        said.append(f"{flops(row['model_flops'])} model FLOPs")
    if row.get("mfu"):
        said.append(f"MFU {row['mfu']:.1%}")
    return ", ".join(said) or None


def status_phrase(row: dict) -> str | None:
    """The row's status where it is not "done": "running: step 120 of 200" for a training under way."""
    status = row.get("status") or ""
    if status.startswith("pending (step "):
        done, total = (int(n) for n in re.findall(r"\d+", status)[:2])
        return f"running: step {done:,} of {total:,}"
    return None if status == "done" else status or None


def as_paper_phrase(row: dict) -> str | None:
    """Table 3's verdict against the paper's row, its significance left to `p_value_phrase`."""
    if row.get("as_paper") in (None, "(base)"):
        return None
    return "as the paper: " + re.sub(r"; BLEU (not )?significant$", "", row["as_paper"])


def p_value_phrase(row: dict) -> str | None:
    """Table 3's test against base: "p = 0.0050 against base, significant (the test)"."""
    if row.get("p_value_vs_base") is None:
        return None
    said = {"yes": ", significant", "no": ", not significant"}.get(row.get("significant"), "")
    return f"p = {row['p_value_vs_base']:.4f} against base{said} ({row['test']})"


def reference_phrase(row: dict) -> str | None:
    """Table 2's BLEU against WMT's reference, where the row's BLEU is against another."""
    if row.get("bleu_wmt") is None or row.get("bleu_reference") in (None, "wmt"):
        return None
    ours = paper.REFERENCE[row["bleu_reference"]]
    return f"BLEU {row['bleu']:.2f} against {ours}, {row['bleu_wmt']:.2f} against {paper.REFERENCE['wmt']}"


def delta_phrase(row: dict) -> str | None:
    """Our figure less the paper's, where the row is the paper's setting (Tables 2 and 4's `delta`)."""
    return None if row.get("delta") is None else f"{row['delta']:+.2f} against the paper"


def updates_phrase(row: dict) -> str | None:
    """The updates trained where short of the row's steps, unless the setting already says them."""
    if not row.get("updates") or "updates" in (row.get("setting") or ""):
        return None
    done, _, total = str(row["updates"]).partition(" of ")
    if done == total:
        return None
    return f"updates {row['updates']}"


def setting_phrase(setting: str | None, base: tuple[str, int] | None = None) -> str | None:
    """A row's `setting` cell for its note; with `base` (the base row's setting and note number), the
    departures the base row lists too are counted, not repeated: "not comparable: d_k 96 (paper
    512), and 9 of base's [1]"."""
    if setting == "the paper's":
        return "the paper's setting"
    if not setting or base is None or not setting.startswith(NOT_COMPARABLE) or not base[0].startswith(NOT_COMPARABLE):
        return setting
    shared = set(base[0][len(NOT_COMPARABLE) :].split(", "))
    found = setting[len(NOT_COMPARABLE) :].split(", ")
    own = [d for d in found if d not in shared]
    common = len(found) - len(own)
    if common < 2:
        return setting
    if not own and common == len(shared):
        return f"{NOT_COMPARABLE}as base [{base[1]}]"
    return NOT_COMPARABLE + ", ".join([*own, f"{'and ' if own else ''}{common} of base's [{base[1]}]"])


def changes_phrase(row: dict) -> str | None:
    """Table 3's `changes` from base that no column of the block shows (init, positional)."""
    shown = {*T3_MODEL, "steps"}
    hidden = [c for c in (row.get("changes") or "").split(", ") if "=" in c and c.split("=")[0] not in shown]
    return f"changes {', '.join(hidden)}" if hidden else None


def note(number: int, row: dict, pair: str | None = None, base: tuple[str, int] | None = None) -> str:
    """The one note of one of our rows: what the table's cells leave out, short (Table 3: `base`, the
    base row's setting and note number, whose departures are counted, not repeated)."""
    name = row.get("experiment") or row.get("row") or "?"
    parts: list[str | None] = [status_phrase(row)]
    if number == 2:
        where = f"{pair}, {row.get('testset')}" + (f", {row['lines']:,} lines" if row.get("lines") else "")
        parts += [
            seeds_phrase(row, (("bleu", "BLEU"), ("bleu_wmt", "BLEU on WMT's"), ("sacrebleu", "sacreBLEU"))),
            reference_phrase(row),
            f"sacreBLEU {row['sacrebleu']:.2f}" if row.get("sacrebleu") is not None else None,
            delta_phrase(row),
            setting_phrase(row.get("setting")),
            updates_phrase(row),
            f"averaged {row['averaged_steps']}" if row.get("averaged_steps") else None,
            cost_phrase(row),
        ]
    elif number == 3:
        where = row.get("testset") or ""
        parts += [
            seeds_phrase(row, (("dev_ppl", "PPL"), ("dev_bleu", "BLEU"))),
            setting_phrase(row.get("setting"), base),
            updates_phrase(row),
            changes_phrase(row),
            as_paper_phrase(row),
            p_value_phrase(row),
        ]
    else:
        where = row.get("testset") or ""
        where += f", {row['lines']:,} sentences" if row.get("lines") else ""
        parts += [
            seeds_phrase(row, (("f1", "F1"),)),
            f"selected on dev: {row['selected_on_dev']}" if row.get("selected_on_dev") else None,
            delta_phrase(row),
            setting_phrase(row.get("setting")),
            (
                f"precision {row['precision']:.2f}, recall {row['recall']:.2f}"
                if row.get("precision") is not None and row.get("recall") is not None
                else None
            ),
            f"{row['error_sentences']} EVALB error sentences" if row.get("error_sentences") else None,
            updates_phrase(row),
            row.get("hardware"),
        ]
    if row.get("distinct_outputs"):
        parts.append(f"distinct outputs {row['distinct_outputs']}")
    said = "; ".join(p for p in parts if p)
    return f"{name} ({where}): {said}" if where else f"{name}: {said}"


# -- the blocks -----------------------------------------------------------------------------------
def block(number: int, rows: list[dict], experiments: list[dict] | None = None) -> tuple[list[dict], list[str]]:
    """(the block's lines as cells keyed by column, our rows' notes in their numbers' order)."""
    experiments = list(experiments or [])
    exps = experiments + [None] * (len(rows) - len(experiments))
    return {2: block2, 3: block3, 4: block4}[number](rows, exps)


def block2(rows: list[dict], exps: list[dict | None]) -> tuple[list[dict], list[str]]:
    by_dataset = {e["dataset"]: e for e in exps if e}
    pairs = [pair_label(e or by_dataset.get(r.get("dataset")), r) for r, e in zip(rows, exps)]
    columns = [*PAPER_PAIRS, *(p for p in dict.fromkeys(pairs) if p not in PAPER_PAIRS)]
    # our rows, grouped as the paper's rows are: one model across its pairs (base-en-de, base-en-fr: base)
    groups: list[dict] = []
    for row, exp, pair in zip(rows, exps, pairs):
        name = row.get("experiment") or ""
        label = re.sub(rf"[-_.]{re.escape(pair)}$", "", name, flags=re.I) or name
        after = f"Transformer ({exp['preset']})" if exp and exp.get("preset") in ("base", "big") else None
        group = next((g for g in groups if g["label"] == label and pair not in g["pairs"]), None)
        if group is None:
            group = {"label": label, "after": after, "pairs": {}}
            groups.append(group)
        group["pairs"][pair] = row
    notes: list[str] = []
    lines_after: dict[str | None, list[dict]] = {}
    for g in groups:
        line = {"model": f"ours: {g['label']}" if not g["label"].startswith("baseline") else g["label"]}
        numbers: list[int] = []
        for pair, row in g["pairs"].items():
            line[f"BLEU {pair}"] = figure(row.get("bleu"), row)
            line[f"cost {pair}"] = flops(row.get("cost_flops_paper_formula"))
            notes.append(note(2, row, pair))
            numbers.append(len(notes))
        line["model"] = ours(line["model"], numbers)
        line[OURS] = True
        lines_after.setdefault(g["after"], []).append(line)
    theirs = {name: {"model": name, "BLEU EN-DE": short(de), "BLEU EN-FR": short(fr), "cost EN-DE": flops(cost_de),
                     "cost EN-FR": flops(cost_fr)} for name, de, fr, cost_de, cost_fr in paper.TABLE2}  # fmt: skip
    keys = ["model", *(f"BLEU {p}" for p in columns), *(f"cost {p}" for p in columns), OURS]
    return interleaved(theirs, lines_after, keys), notes


def interleaved(theirs: dict, ours_after: dict, keys) -> list[dict]:
    """The paper's lines (`theirs`, by key) each followed by our lines placed after it (`ours_after`,
    by the same key), then ours placed after no line of the paper's; each line's cells as `keys`."""
    out = []
    for key, line in theirs.items():
        out += [line, *ours_after.pop(key, [])]
    out += [line for lines in ours_after.values() for line in lines]
    return [{k: line.get(k, "") for k in keys} for line in out]


def paper_t3(exp: dict) -> dict | None:
    """The paper's Table 3 row an experiment stands for: the paper's model of its row (the nearest
    variation of its letter), the paper's steps, and the paper's figures from its `paper:`."""
    figures = exp.get("paper") or {}
    if exp.get("preset") not in ("base", "big") or not any(k in figures for k in ("dev_ppl", "dev_bleu")):
        return None
    have = {**exp["model"], "eps_ls": exp.get("eps_ls")}
    models = paper.paper_models(3, exp)
    model = min(models, key=lambda m: sum(have.get(k) != v for k, v in m.items()))
    return {
        "model": model,
        "steps": paper.TRAIN[exp["preset"]]["steps"],
        "dev_ppl": figures.get("dev_ppl"),
        "dev_bleu": figures.get("dev_bleu"),
        "params_M": figures.get("params_m"),
    }


def t3_cells(model: dict, base: dict | None, whole: bool) -> dict:
    """The model columns and steps of a Table 3 line: every value on a base or big line (`whole`),
    on a variation only those that differ from its `base` (the paper's "blank: as base")."""
    cells = {}
    for key in (*T3_MODEL, "steps"):
        value = model.get(key)
        if not whole and base is not None and base.get(key) == value:
            continue
        cells["ε_ls" if key == "eps_ls" else key] = steps_text(value) if key == "steps" else short(value)
    return cells


def params_text(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}"


def t3_label(name: str, model: dict) -> str:
    """A Table 3 line's name, with what no column shows: (E)'s learned positions, as the paper's row says."""
    return f"{name} learned" if model.get("positional") == "learned" else name


def block3(rows: list[dict], exps: list[dict | None]) -> tuple[list[dict], list[str]]:
    ours_row = next((r for r in rows if r.get("row") == "base"), None)
    ours_base = {k: ours_row.get(k) for k in (*T3_MODEL, "steps")} if ours_row else None
    base_note: tuple[str, int] | None = None  # the base row's setting and note number, once noted
    paper_base = {**{k: paper.MODEL["base"][k] for k in T3_MODEL}, "steps": paper.TRAIN["base"]["steps"]}
    order = sorted(range(len(rows)), key=lambda i: T3_ORDER.get(rows[i].get("row") or "", 6))
    out, notes = [], []
    for i in order:
        row, exp = rows[i], exps[i]
        letter = row.get("row") or ""
        whole = letter in ("base", "big")
        theirs = paper_t3(exp) if exp else None
        if theirs is not None:
            label = letter if whole else f"({letter})"
            model = {**theirs["model"], "steps": theirs["steps"]}
            out.append({
                "row": t3_label(f"paper {label}", model), **t3_cells(model, paper_base, whole),
                "PPL": paper_figure(theirs["dev_ppl"], 2), "BLEU": paper_figure(theirs["dev_bleu"], 1),
                "params": params_text(theirs["params_M"]),
            })  # fmt: skip
        model = {k: row.get(k) for k in (*T3_MODEL, "steps")}
        notes.append(note(3, row, base=base_note))
        if row is ours_row and row.get("setting"):
            base_note = (row["setting"], len(notes))
        ppl = figure(row.get("dev_ppl"), row)
        cells = t3_cells(model, ours_base, whole or ours_base is None)
        out.append({
            "row": ours(row.get("experiment") or "", [len(notes)]), **cells,
            "PPL": ppl, "BLEU": "" if ppl.startswith("at ") else figure(row.get("dev_bleu"), row),
            "params": params_text(row.get("params_M")), OURS: True,
        })  # fmt: skip
    return [{k: line.get(k, "") for k in (*COLUMNS[3], OURS)} for line in out], notes


def block4(rows: list[dict], exps: list[dict | None]) -> tuple[list[dict], list[str]]:
    notes: list[str] = []
    lines_after: dict[int | None, list[dict]] = {}
    for row, exp in zip(rows, exps):
        training = row.get("row") or (exp or {}).get("dataset") or ""
        baseline = training.startswith("baseline")
        notes.append(note(4, row))
        line = {
            "parser": ours(training if baseline else f"ours: {row.get('experiment')}", [len(notes)]),
            "training": "" if baseline else training,
            "F1": figure(row.get("f1"), row),
            OURS: True,
        }
        after = next(
            (i for i, (name, kind, _) in enumerate(paper.TABLE4)
             if name.startswith("Transformer") and training and kind.lower().startswith(training.lower())),
            None,
        )  # fmt: skip
        lines_after.setdefault(after, []).append(line)
    theirs = {i: {"parser": name, "training": kind, "F1": short(f1)} for i, (name, kind, f1) in enumerate(paper.TABLE4)}
    return interleaved(theirs, lines_after, (*COLUMNS[4], OURS)), notes


def fill(text: str, lead: str = "") -> str:
    """One paragraph wrapped to WIDTH, after `lead` (its later lines indented as far); words and
    hyphenated names (t3-A-h1) never broken."""
    return textwrap.fill(text, WIDTH, initial_indent=lead, subsequent_indent=" " * len(lead),
                         break_on_hyphens=False, break_long_words=False)  # fmt: skip


def numbered(notes: list[str]) -> str:
    """The notes as a numbered list, each wrapped to WIDTH."""
    return "".join(fill(text, f"{i}. ") + "\n" for i, text in enumerate(notes, 1))
