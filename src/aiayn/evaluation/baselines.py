"""Trivial systems that a trained model must beat by far: copy the source, translate word by word,
parse right-branching. The demo prints them beside its models (config: baselines: true)."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from aiayn.evaluation.score import bleu_scores, reference_cells
from aiayn.parsing.evalb import evalb
from aiayn.parsing.trees import Tree, parse_trees
from aiayn.runtime.lines import read_lines
from aiayn.study.layout import Layout


def word_by_word(src: list[str], train_src: list[str], train_tgt: list[str]) -> list[str]:
    """Each source word replaced, in place, by the target word that co-occurs with it most (Dice);
    a tie goes to the alphabetically first word, so that the result does not depend on the order of
    Python's string hashing (which varies between processes: the demo's baseline BLEU did)."""
    co: dict[str, Counter] = defaultdict(Counter)
    count_s, count_t = Counter(), Counter()
    for s, t in zip(train_src, train_tgt):
        sw, tw = set(s.split()), set(t.split())
        count_s.update(sw)
        count_t.update(tw)
        for a in sw:
            co[a].update(tw)
    table = {a: min(c, key=lambda b: (-2 * c[b] / (count_s[a] + count_t[b]), b)) for a, c in co.items()}
    return [" ".join(table.get(w, w) for w in line.split()) for line in src]


def right_branching(gold_line: str, label: str = "S") -> str:
    """(TOP (S w1 (S w2 (S ... wn)))) over the gold words and POS tags, every constituent `label`."""
    leaves = parse_trees(gold_line)[0].leaves()
    node = Tree(label, [leaves[-1]]) if leaves else Tree(label)
    for leaf in reversed(leaves[:-1]):
        node = Tree(label, [leaf, node])
    return str(Tree("TOP", [node]))


# what each trivial system is, in its row's setting cell (a row explains itself)
SETTINGS = {
    "baseline: copy the source": "no model: the source sentence as its own translation",
    "baseline: word by word": "no model: each source word replaced, in place, by the target word that co-occurs "
    "with it most in the training data (Dice); no reordering",
    "baseline: right-branching": "no model: the gold words and tags, every constituent branching right",
}


def table_rows(number: int, layout: Layout, experiments: list[dict]) -> list[dict]:
    """Rows for Table 2 (copy, word by word) or Table 4 (right-branching), scored on each test set of
    the table's experiments, as the models are (`experiments`: `Study.table_spec`)."""
    rows, seen = [], set()
    for exp in experiments:
        key = (exp["dataset"], exp["testset"])
        if key in seen:
            continue
        seen.add(key)
        rows += (translation_rows if number == 2 else parsing_rows)(layout, exp)
    return rows


def translation_rows(layout: Layout, exp: dict) -> list[dict]:
    ds, testset = exp["dataset"], exp["testset"]
    src_path, ref_path = Path(layout.text(ds, testset, "src")), Path(layout.text(ds, testset, "tgt"))
    train_src, train_tgt = Path(layout.text(ds, "train", "src")), Path(layout.text(ds, "train", "tgt"))
    if not (src_path.exists() and train_src.exists()):
        return []
    src, ref = list(read_lines(src_path)), list(read_lines(ref_path))
    systems = {
        "baseline: copy the source": src,
        "baseline: word by word": word_by_word(src, list(read_lines(train_src)), list(read_lines(train_tgt))),
    }
    rows = []
    for name, hyp in systems.items():
        s = bleu_scores(hyp, ref, **exp["scoring"])
        rows.append(
            {
                "experiment": name,
                "dataset": ds,
                "testset": testset,
                "status": "done",
                "setting": SETTINGS[name],
                "bleu": s["tokenized_bleu"]["score"],
                **reference_cells(s),
                "sacrebleu": s["sacrebleu"]["score"],
                "lines": s["lines"],
            }
        )
    return rows


def parsing_rows(layout: Layout, exp: dict) -> list[dict]:
    gold_path = Path(layout.text(exp["dataset"], exp["testset"], "gold"))
    if not gold_path.exists():
        return []
    gold = list(read_lines(gold_path))
    f1 = evalb(gold, [right_branching(g) for g in gold])["all"]["f1"]
    name = "baseline: right-branching"
    return [{"row": name, "experiment": "", "status": "done", "setting": SETTINGS[name], "f1": f1}]
