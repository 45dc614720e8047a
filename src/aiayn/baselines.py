"""Trivial systems that a trained model must beat by far: copy the source, translate word by word,
parse right-branching. The demo prints them beside its models (config: baselines: true)."""

from __future__ import annotations

from collections import Counter, defaultdict

from aiayn.trees import Tree, parse_trees


def word_by_word(src: list[str], train_src: list[str], train_tgt: list[str]) -> list[str]:
    """Each source word replaced, in place, by the target word that co-occurs with it most (Dice)."""
    co: dict[str, Counter] = defaultdict(Counter)
    count_s, count_t = Counter(), Counter()
    for s, t in zip(train_src, train_tgt):
        sw, tw = set(s.split()), set(t.split())
        count_s.update(sw)
        count_t.update(tw)
        for a in sw:
            co[a].update(tw)
    table = {a: max(c, key=lambda b: 2 * c[b] / (count_s[a] + count_t[b])) for a, c in co.items()}
    return [" ".join(table.get(w, w) for w in line.split()) for line in src]


def right_branching(gold_line: str, label: str = "S") -> str:
    """(TOP (S w1 (S w2 (S ... wn)))) over the gold words and POS tags, every constituent `label`."""
    leaves = parse_trees(gold_line)[0].leaves()
    node = Tree(label, [leaves[-1]]) if leaves else Tree(label)
    for leaf in reversed(leaves[:-1]):
        node = Tree(label, [leaf, node])
    return str(Tree("TOP", [node]))
