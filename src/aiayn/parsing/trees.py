"""Penn Treebank trees for the parsing transfer (§6.3): reading, preprocessing, linearization, repair.

Preprocessing is the standard one for constituency parsing: function tags and co-indices are
stripped (NP-SBJ-1 -> NP; labels that start with "-", such as -LRB-, stay), -NONE- elements and
the constituents they leave empty are removed, and POS tags are kept or replaced by one symbol
(`pos="XX"`, as Vinyals & Kaiser et al. 2014 do). A tree is linearized into a sequence of
"(LABEL", POS-or-XX leaves and ")LABEL" tokens; `delinearize` reads any such sequence, balanced or
not, back into a valid tree over exactly the given words, and `restore` gives a parser's output
the gold POS tags of its sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from aiayn.errors import UserError
from aiayn.io import readable

TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass
class Tree:
    label: str
    children: list["Tree"] = field(default_factory=list)
    word: str | None = None  # set on preterminals (POS nodes) only

    @property
    def is_leaf(self) -> bool:
        return self.word is not None

    def leaves(self) -> list["Tree"]:
        return [self] if self.is_leaf else [leaf for c in self.children for leaf in c.leaves()]

    def words(self) -> list[str]:
        return [leaf.word for leaf in self.leaves()]

    def __str__(self) -> str:
        if self.is_leaf:
            return f"({self.label} {self.word})"
        return f"({self.label} {' '.join(str(c) for c in self.children)})"


# -- reading ------------------------------------------------------------------------------------------
def parse_trees(text: str, source: str = "<text>") -> list[Tree]:
    """All trees of a bracketed text (one or many, over one or many lines), outer brackets kept."""
    tokens = TOKEN.findall(text)
    trees, pos = [], 0
    while pos < len(tokens):
        tree, pos = _parse(tokens, pos, source)
        trees.append(tree)
    return trees


def _parse(tokens: list[str], pos: int, source: str) -> tuple[Tree, int]:
    if tokens[pos] != "(":
        raise UserError(f"{source}: expected '(' but found {tokens[pos]!r} (token {pos})")
    pos += 1
    label = ""
    if pos < len(tokens) and tokens[pos] not in "()":
        label, pos = tokens[pos], pos + 1
    if pos + 1 < len(tokens) and tokens[pos] not in "()" and tokens[pos + 1] == ")":
        return Tree(label, word=tokens[pos]), pos + 2
    node = Tree(label)
    while pos < len(tokens) and tokens[pos] != ")":
        child, pos = _parse(tokens, pos, source)
        node.children.append(child)
    if pos >= len(tokens):
        raise UserError(f"{source}: unbalanced brackets (a tree is not closed)")
    return node, pos + 1


def read_mrg(path: str | Path) -> list[Tree]:
    """Trees of one .mrg file, each as its sentence's tree (the unlabeled outer bracket removed). The
    file is UTF-8 (the Penn Treebank's files are ASCII): another encoding is refused naming the line
    and the byte, never read with replacement characters."""
    data = readable(path, "a treebank file (.mrg)").read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UserError(
            f"{path}, line {line}: not UTF-8 ({exc.reason} at byte {exc.start}; a Latin-1 file?): convert it "
            f"first, e.g. iconv -f latin1 -t utf-8 {path} > the new file"
        ) from None
    return [_unwrap(t) for t in parse_trees(text, str(path))]


def _unwrap(tree: Tree) -> Tree:
    while tree.label in ("", "ROOT", "TOP") and len(tree.children) == 1 and not tree.is_leaf:
        tree = tree.children[0]
    return tree


def section_files(treebank: str | Path, section: str) -> list[Path]:
    """The .mrg files of WSJ section `section` ("02"), in the LDC layout (parsed/mrg/wsj/02/) or flat."""
    root = Path(treebank)
    if not root.is_dir():
        raise UserError(
            f"{root}: treebank folder not found; set datasets.<name>.treebank to your copy of the "
            "Penn Treebank 3 (LDC99T42), the folder holding parsed/mrg/wsj/00..24"
        )
    return sorted(root.rglob(f"wsj_{section}[0-9][0-9].mrg"))


def read_sections(treebank: str | Path, sections: list[str]) -> Iterator[Tree]:
    for section in sections:
        files = section_files(treebank, section)
        if not files:
            raise UserError(
                f"{treebank}: no wsj_{section}NN.mrg files for section {section}; is it the Penn Treebank 3 "
                "(LDC99T42) folder holding parsed/mrg/wsj/?"
            )
        for path in files:
            yield from read_mrg(path)


# -- preprocessing -------------------------------------------------------------------------------------------
def base_label(label: str) -> str:
    """NP-SBJ-1 -> NP, NP=2 -> NP; labels that start with '-' (-NONE-, -LRB-) stay."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def preprocess(tree: Tree, pos: str = "keep") -> Tree | None:
    """Strip function tags, drop -NONE- and emptied constituents; POS kept or replaced by `pos`."""
    if tree.is_leaf:
        if tree.label == "-NONE-":
            return None
        return Tree(tree.label if pos == "keep" else pos, word=tree.word)
    children = [c for c in (preprocess(ch, pos) for ch in tree.children) if c is not None]
    if not children:
        return None
    return Tree(base_label(tree.label), children)


# -- linearization ------------------------------------------------------------------------------------------------
def linearize(tree: Tree) -> str:
    """(S (NP NNP )NP (VP VBZ )VP . )S : brackets with labels, one token per word (its POS or XX)."""
    if tree.is_leaf:
        return tree.label
    return f"({tree.label} {' '.join(linearize(c) for c in tree.children)} ){tree.label}"


def delinearize(sequence: str, words: list[str], fill: str = "XX") -> Tree:
    """A valid tree over exactly `words` from a (possibly malformed) linearized sequence.

    A closing bracket closes the innermost open constituent of its label (and any opened inside it
    and left open); one whose label is open nowhere is ignored (a bare `)` closes the innermost).
    Open ones are closed at the end, leaves beyond the words are dropped, missing leaves are added
    (POS `fill`) at the end of the outermost constituent, and constituents left without words are
    removed. Returns the tree under TOP.

    The label says which constituent the model closes: `(S (NP XX )NP (VP XX XX )NP )VP XX )S`
    has a stray `)NP` inside the VP; closing one constituent per bracket whatever its label would
    close the VP there and the S at `)VP`, leaving the last word outside every constituent.
    """
    root = Tree("TOP")
    stack, i = [root], 0
    for token in sequence.split():
        if token.startswith("(") and len(token) > 1:
            node = Tree(token[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif token.startswith(")"):
            label = token[1:]
            open_at = [n for n in range(1, len(stack)) if not label or stack[n].label == label]
            if open_at:
                del stack[open_at[-1] :]
        elif i < len(words):
            stack[-1].children.append(Tree(token, word=words[i]))
            i += 1
    target = root.children[-1] if root.children and not root.children[-1].is_leaf else root
    for word in words[i:]:
        target.children.append(Tree(fill, word=word))
    return _prune(root) or Tree("TOP")


def _prune(tree: Tree) -> Tree | None:
    if tree.is_leaf:
        return tree
    children = [c for c in (_prune(ch) for ch in tree.children) if c is not None]
    return Tree(tree.label, children) if children else None


def with_top(tree: Tree) -> Tree:
    return tree if tree.label == "TOP" else Tree("TOP", [tree])


def restore(sequence: str, gold: Tree) -> Tree:
    """The model's linearized output as a tree over the gold words, every leaf with its gold POS tag
    (the words and their tags are the parser's input, as in Vinyals & Kaiser et al. 2014). A tag the
    model writes (`pos_tags: keep`) is what it trains towards, not what EVALB scores: kept, a word
    it tagged `.` would leave the sentence a word shorter under COLLINS.prm's deleted punctuation,
    and EVALB would count the sentence an error ("Length unmatch") and leave it out of F1."""
    tree = delinearize(sequence, gold.words())
    for leaf, gold_leaf in zip(tree.leaves(), gold.leaves()):
        leaf.label = gold_leaf.label
    return tree
