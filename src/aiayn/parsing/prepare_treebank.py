"""The parsing branch's data (§6.3): one treebank split as sentences, linearized trees and gold trees.

The treebank is the user's licensed copy (a folder), or an archive (the demo's generated one),
taken out with the data stage's safe extractor.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.data.prepare import atomic_pair, extract_members, read_lines
from aiayn.errors import UserError
from aiayn.io import atomic_write_text, scratch_dir, together
from aiayn.parsing.trees import Tree, linearize, parse_trees, preprocess, read_sections, with_top


def split_trees(dataset: dict, split: str) -> list[Tree]:
    """Preprocessed gold trees (real POS tags) of `split`: "train" (+ extra corpora) or an eval set."""
    if not dataset.get("treebank"):
        raise UserError(
            "datasets.<parsing dataset>.treebank is not set: the parsing experiments need your licensed "
            "Penn Treebank 3 (LDC99T42); set it to the folder holding parsed/mrg/wsj/00..24"
        )
    if split not in (known := ["train", *dataset.get("eval_sets", {})]):
        raise UserError(f"--split {split}: not a split of this dataset; known: {', '.join(known)}")
    sections = dataset["train_sections"] if split == "train" else dataset["eval_sets"][split]["sections"]
    trees = [preprocess(t) for t in read_sections(dataset["treebank"], sections)]
    if split != "train" and dataset["eval_sets"][split].get("first"):
        trees = trees[: dataset["eval_sets"][split]["first"]]
    if split == "train":
        for path in dataset.get("extra_corpora", []):
            if not Path(path).is_file():
                raise UserError(f"{path}: extra parsed corpus not found (datasets.<name>.extra_corpora)")
            trees += [preprocess(t) for line in read_lines(path) if line.strip() for t in parse_trees(line, path)]
    return [t for t in trees if t is not None]


def write_split(dataset: dict, split: str, *, out_src, out_tgt, out_gold, archive: str | None = None, log=print) -> int:
    """src: the words; tgt: the linearized tree (POS per `pos_tags`); gold: the tree under TOP.
    With `archive`, the treebank's .mrg files are read from that archive."""
    pos = dataset.get("pos_tags", "XX")
    if archive:
        with scratch_dir(out_src) as tmp:
            extract_members(archive, lambda name: name.endswith(".mrg"), tmp)
            trees = split_trees({**dataset, "treebank": str(tmp)}, split)
    else:
        trees = split_trees(dataset, split)
    with together(), atomic_pair(out_src, out_tgt) as (fs, ft):  # the three in place, or none
        for tree in trees:
            fs.write(" ".join(tree.words()) + "\n")
            ft.write(linearize(preprocess(tree, pos)) + "\n")
        atomic_write_text(out_gold, "".join(str(with_top(t)) + "\n" for t in trees))
    log(f"{split}: {len(trees)} trees -> {out_src}, {out_tgt}, {out_gold}")
    return len(trees)
