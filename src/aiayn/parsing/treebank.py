"""The parsing branch's data and scoring (§6.3): treebank splits to sequences, parses back to EVALB."""

from __future__ import annotations

import tarfile
from pathlib import Path

from aiayn.data.corpus import atomic_pair, read_lines
from aiayn.errors import UserError
from aiayn.io import atomic_write_text, scratch_dir
from aiayn.parsing.evalb import COLLINS, evalb
from aiayn.parsing.trees import Tree, delinearize, linearize, parse_trees, preprocess, read_sections, with_top


def split_trees(dataset: dict, split: str) -> list[Tree]:
    """Preprocessed gold trees (real POS tags) of `split`: "train" (+ extra corpora) or an eval set."""
    if not dataset.get("treebank"):
        raise UserError(
            "datasets.<parsing dataset>.treebank is not set: the parsing experiments need your licensed "
            "Penn Treebank 3 (LDC99T42); set it to the folder holding parsed/mrg/wsj/00..24"
        )
    sections = dataset["train_sections"] if split == "train" else dataset["eval_sets"][split]["sections"]
    trees = [preprocess(t) for t in read_sections(dataset["treebank"], sections)]
    if split == "train":
        for path in dataset.get("extra_corpora", []):
            if not Path(path).is_file():
                raise UserError(f"{path}: extra parsed corpus not found (datasets.<name>.extra_corpora)")
            trees += [preprocess(t) for line in read_lines(path) if line.strip() for t in parse_trees(line, path)]
    return [t for t in trees if t is not None]


def write_split(dataset: dict, split: str, out_src, out_tgt, out_gold, archive: str | None = None) -> int:
    """src: the words; tgt: the linearized tree (POS per `pos_tags`); gold: the tree under TOP.
    With `archive`, the treebank is read from that (safely extracted) archive."""
    pos = dataset.get("pos_tags", "XX")
    if archive:
        Path(out_src).parent.mkdir(parents=True, exist_ok=True)
        with scratch_dir(out_src) as tmp:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            trees = split_trees({**dataset, "treebank": str(tmp)}, split)
    else:
        trees = split_trees(dataset, split)
    with atomic_pair(out_src, out_tgt) as (fs, ft):
        for tree in trees:
            fs.write(" ".join(tree.words()) + "\n")
            ft.write(linearize(preprocess(tree, pos)) + "\n")
    atomic_write_text(out_gold, "".join(str(with_top(t)) + "\n" for t in trees))
    return len(trees)


def restore(sequence: str, gold: Tree) -> Tree:
    """The model's linearized output as a tree over the gold words; XX leaves take the gold POS tags
    (the words and their tags are the parser's input, as in Vinyals & Kaiser et al. 2014)."""
    tree = delinearize(sequence, gold.words())
    for leaf, gold_leaf in zip(tree.leaves(), gold.leaves()):
        if leaf.label == "XX":
            leaf.label = gold_leaf.label
    return tree


def score_parses(hyp: list[str], gold_lines: list[str]) -> dict:
    golds = [parse_trees(line)[0] for line in gold_lines]
    tests = [str(restore(h, g)) for h, g in zip(hyp, golds)]
    result = evalb(gold_lines, tests, COLLINS)
    result.pop("sentences")
    return result
