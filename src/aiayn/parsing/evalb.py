"""EVALB (Sekine & Collins 1997) with the COLLINS.prm conventions, reimplemented rule for rule.

What EVALB does, and so do we:
- a preterminal whose label is in DELETE_LABEL (TOP, -NONE-, and the punctuation tags , : `` '' .)
  is dropped with its word: it counts neither for lengths nor for bracket spans;
- brackets spanning no word after that are dropped; a bracket's label is cut at its first "-"
  or "=" before it is compared; brackets whose label is in DELETE_LABEL (TOP) are dropped;
- labels in an EQ_LABEL pair (ADVP = PRT) are equal;
- gold and test brackets are matched one to one (each test bracket at most once), so duplicate
  brackets of unary chains count as often as they occur;
- a sentence whose gold and test word counts differ ("Length unmatch") or whose words differ
  ("Words unmatch") is an error sentence of zero figures and leaves the totals;
- a test parse without a word (empty, or only deleted punctuation) is skipped, even when its
  brackets are unbalanced;
- unbalanced brackets in either tree (the gold tree too) make an error sentence, but its figures
  are still computed and printed, from the brackets as read (one never closed ends at -1);
- only ASCII white space separates words and labels (C's isspace): a no-break space is part of
  its word;
- F is 0.00 where EVALB prints -nan (precision and recall both 0).
Checked against EVALB20080701's own output (tests/test_protocol.py: three perturbed files of 300
sentences and four edge cases): every per-sentence row, every error line and both summaries equal.
Differences, on malformed input only: EVALB aborts once its errors pass MAX_ERROR (at its 12th
error line) and on a line it cannot read past (a word outside a preterminal, a bracket of three
elements), and its arrays stop at 200 words or brackets and 5,000 characters a line; we count
every error sentence and go on, up to MOST_BRACKETS a tree (a file with a larger one is refused: its
brackets are matched pair by pair). For a line with a close bracket too many EVALB's
message says "too many open bracket" (it pops below its stack), ours "too many close bracket".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aiayn.errors import UserError
from aiayn.parsing.trees import parse_trees, restore
from aiayn.runtime.lines import read_lines

MOST_BRACKETS = 2000  # 10 x EVALB's arrays: no sentence's parse holds more
ASCII_SPACE = frozenset(" \t\n\v\f\r")  # C's isspace: a no-break space is part of a word
TERMINATORS = ASCII_SPACE | {"(", ")"}


@dataclass(frozen=True)
class Params:
    """COLLINS.prm."""

    delete_labels: tuple[str, ...] = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
    delete_labels_for_length: tuple[str, ...] = ("-NONE-",)
    eq_labels: tuple[tuple[str, str], ...] = (("ADVP", "PRT"),)
    cutoff_len: int = 40

    def label_eq(self, a: str, b: str) -> bool:
        return a == b or (a, b) in self.eq_labels or (b, a) in self.eq_labels


COLLINS = Params()


@dataclass
class Parsed:
    words: list[tuple[str, str]]  # (word, POS) of the counted terminals
    brackets: list[tuple[int, int, str]]  # (start, end, label) of every nonterminal; end -1: never closed
    length: int  # words for the cut-off statistics (only DELETE_LABEL_FOR_LENGTH ignored)
    errors: list[str]  # what EVALB's read_line reports and reads on past (unbalanced brackets)


class Malformed(ValueError):
    """A line EVALB cannot read past: it repeats the error without advancing until MAX_ERROR stops it."""


def read_tree(line: str, params: Params = COLLINS) -> Parsed:
    """One bracketed tree as EVALB's read_line sees it: words and labels end at ASCII white space
    or a bracket; an unbalanced line is read on, its error noted (a bracket never closed keeps the
    end -1, as in EVALB; a close bracket too many closes nothing)."""
    words, brackets, stack, errors, length, p, n = [], [], [], [], 0, 0, len(line)
    while p < n:
        ch = line[p]
        if ch in ASCII_SPACE:
            p += 1
        elif ch == "(":
            p += 1
            start = p
            while p < n and line[p] not in TERMINATORS:
                p += 1
            label = line[start:p]
            q = p
            if q < n and line[q] in ASCII_SPACE:
                while q < n and line[q] in ASCII_SPACE:
                    q += 1
                w0 = q
                while q < n and line[q] not in TERMINATORS:
                    q += 1
                word = line[w0:q]
                if q < n and line[q] == ")":
                    if label not in params.delete_labels_for_length:
                        length += 1
                    if label not in params.delete_labels:
                        words.append((word, label))
                    p = q + 1
                    continue
                if q >= n or line[q] != "(":
                    raise Malformed("More than two elements in a bracket")
            stack.append(len(brackets))
            brackets.append([len(words), -1, label])
        elif ch == ")":
            if stack:
                brackets[stack.pop()][1] = len(words)
            else:  # EVALB pops below its stack here (undefined); it closes no bracket of the tree
                errors.append("Bracketing unbalance (too many close bracket)")
            p += 1
        else:
            raise Malformed("Reading sentence")
    if stack:
        errors.append("Bracketing is unbalanced (too many open bracket)")
    return Parsed(words, [tuple(b) for b in brackets], length, errors)


def kept_brackets(brackets, params: Params) -> list[tuple[int, int, str]]:
    """EVALB's massage_data: drop empty spans, cut labels at '-'/'=', drop DELETE_LABEL brackets."""
    out = []
    for start, end, label in brackets:
        if start == end:
            continue
        label = re.split("[-=]", label, maxsplit=1)[0]
        if any(params.label_eq(label, d) for d in params.delete_labels):
            continue
        out.append((start, end, label))
    return out


@dataclass
class SentenceResult:
    status: str  # "ok", "error", "skip"
    messages: list[str] = field(default_factory=list)  # EVALB's error lines for this sentence
    words: int = 0
    gold: int = 0
    test: int = 0
    match: int = 0
    crossing: int = 0
    correct_tags: int = 0
    length: int = 0
    gold_error: bool = False  # the gold tree itself is malformed

    @property
    def message(self) -> str:
        return "; ".join(self.messages)


def score_sentence(gold_line: str, test_line: str, params: Params = COLLINS) -> SentenceResult:
    """One sentence as EVALB's calc_result scores it. A read error of either tree (unbalanced
    brackets) makes it an error sentence, yet its figures are computed and printed as EVALB does;
    a test tree without a word is skipped (even if it had a read error); differing word counts or
    words make an error sentence of zero figures."""
    try:
        gold = read_tree(gold_line, params)
    except Malformed as exc:
        return SentenceResult("error", [str(exc)], gold_error=True)
    of_gold = {"length": gold.length, "gold_error": bool(gold.errors)}
    messages = list(gold.errors)
    try:
        test = read_tree(test_line, params)
    except Malformed as exc:
        return SentenceResult("error", messages + [str(exc)], **of_gold)
    messages += test.errors
    if not test.words:
        return SentenceResult("skip", messages, **of_gold)
    if len(gold.words) != len(test.words):
        return SentenceResult("error", messages + [f"Length unmatch ({len(gold.words)}|{len(test.words)})"], **of_gold)
    for (gw, _), (tw, _) in zip(gold.words, test.words):
        if gw != tw:
            return SentenceResult("error", messages + [f"Words unmatch ({gw}|{tw})"], **of_gold)
    g, t = kept_brackets(gold.brackets, params), kept_brackets(test.brackets, params)
    used = [False] * len(t)
    match = 0
    for gs, ge, gl in g:
        for j, (ts, te, tl) in enumerate(t):
            if not used[j] and (gs, ge) == (ts, te) and params.label_eq(gl, tl):
                used[j] = True
                match += 1
                break
    crossing = sum(any((gs < ts < ge < te) or (ts < gs < te < ge) for gs, ge, _ in g) for ts, te, _ in t)
    tags = sum(params.label_eq(a[1], b[1]) for a, b in zip(gold.words, test.words))
    counts = {"words": len(gold.words), "gold": len(g), "test": len(t), "match": match, "crossing": crossing}
    return SentenceResult("error" if messages else "ok", messages, **counts, correct_tags=tags, **of_gold)


@dataclass
class Totals:
    sentences: int = 0
    errors: int = 0
    skipped: int = 0
    gold: int = 0
    test: int = 0
    match: int = 0
    complete: int = 0
    words: int = 0
    crossing: int = 0
    no_crossing: int = 0
    two_or_less: int = 0
    correct_tags: int = 0
    messages: list[str] = field(default_factory=list)

    def add(self, r: SentenceResult, number: int) -> None:
        self.sentences += 1
        self.messages += [f"{number} : {m}" for m in r.messages]
        if r.status == "error":
            self.errors += 1
            return
        if r.status == "skip":
            self.skipped += 1
            return
        self.gold, self.test, self.match = self.gold + r.gold, self.test + r.test, self.match + r.match
        self.complete += r.gold == r.test == r.match
        self.words += r.words
        self.crossing += r.crossing
        self.no_crossing += r.crossing == 0
        self.two_or_less += r.crossing <= 2
        self.correct_tags += r.correct_tags

    @property
    def valid(self) -> int:
        return self.sentences - self.errors - self.skipped

    def summary(self) -> dict:
        recall = 100.0 * self.match / self.gold if self.gold else 0.0
        precision = 100.0 * self.match / self.test if self.test else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        v = self.valid
        return {
            "sentences": self.sentences,
            "error_sentences": self.errors,
            "skipped_sentences": self.skipped,
            "valid_sentences": v,
            "recall": recall,
            "precision": precision,
            "f1": f1,
            "complete_match": 100.0 * self.complete / v if v else 0.0,
            "average_crossing": self.crossing / v if v else 0.0,
            "no_crossing": 100.0 * self.no_crossing / v if v else 0.0,
            "two_or_less_crossing": 100.0 * self.two_or_less / v if v else 0.0,
            "tagging_accuracy": 100.0 * self.correct_tags / self.words if self.words else 0.0,
            "gold_brackets": self.gold,
            "test_brackets": self.test,
            "matched_brackets": self.match,
        }


def evalb(gold_lines: list[str], test_lines: list[str], params: Params = COLLINS) -> dict:
    """Corpus totals over all sentences and over those of length <= cutoff_len, as EVALB prints them."""
    if len(gold_lines) != len(test_lines):
        raise UserError(f"Number of lines unmatch: {len(gold_lines)} gold, {len(test_lines)} test")
    everything, short = Totals(), Totals()
    per_sentence = []
    for number, (g, t) in enumerate(zip(gold_lines, test_lines), start=1):
        r = score_sentence(g, t, params)
        everything.add(r, number)
        if r.length <= params.cutoff_len:
            short.add(r, number)
        per_sentence.append(r)
    return {
        "all": everything.summary(),
        f"len<={params.cutoff_len}": short.summary(),
        "errors": everything.messages,
        "gold_errors": [n for n, r in enumerate(per_sentence, start=1) if r.gold_error],
        "sentences": per_sentence,
    }


def format_summary(result: dict) -> str:
    lines = []
    for key in (k for k in result if k not in ("errors", "gold_errors", "sentences")):
        s = result[key]
        lines += [
            f"-- {'All' if key == 'all' else key} --",
            f"Number of sentence        = {s['sentences']:6d}",
            f"Number of Error sentence  = {s['error_sentences']:6d}",
            f"Number of Skip  sentence  = {s['skipped_sentences']:6d}",
            f"Number of Valid sentence  = {s['valid_sentences']:6d}",
            f"Bracketing Recall         = {s['recall']:6.2f}",
            f"Bracketing Precision      = {s['precision']:6.2f}",
            f"Bracketing FMeasure       = {s['f1']:6.2f}",
            f"Complete match            = {s['complete_match']:6.2f}",
            f"Average crossing          = {s['average_crossing']:6.2f}",
            f"No crossing               = {s['no_crossing']:6.2f}",
            f"2 or less crossing        = {s['two_or_less_crossing']:6.2f}",
            f"Tagging accuracy          = {s['tagging_accuracy']:6.2f}",
            "",
        ]
    return "\n".join(lines)


def _is_tree(line: str) -> bool:
    try:
        return bool(parse_trees(line))
    except (UserError, IndexError):
        return False


def score_parses(hyp: list[str], gold_lines: list[str]) -> dict:
    """EVALB of a parser's output, linearized trees (`hyp`), against the gold trees under TOP: each
    output restored to a tree over its gold sentence first (`aiayn.parsing.trees.restore`). A gold
    line that is not a tree is scored as EVALB scores it (an error sentence, listed in
    `gold_errors`), against the output as it is."""
    if gold_lines and not any(_is_tree(line) for line in gold_lines):
        raise UserError(
            "the reference holds no tree on any of its lines (a translation's reference?): score parses against "
            "the gold trees (<set>.gold), or a translation with --task translation"
        )
    tests = []
    for h, line in zip(hyp, gold_lines):
        try:
            tests.append(str(restore(h, parse_trees(line)[0])))
        except (UserError, IndexError):
            tests.append(h)
    result = evalb(gold_lines, tests, COLLINS)
    result.pop("sentences")
    return result


def gold_error_lines(result: dict, gold_path) -> list[str]:
    """Log lines naming each malformed gold tree."""
    return [
        f"{gold_path}, line {n}: the gold tree is malformed (unbalanced brackets); "
        "EVALB counts the sentence as an error, and so do we"
        for n in result["gold_errors"]
    ]


def evalb_files(gold_path: str, test_path: str, log=print) -> dict:
    """EVALB of the trees in `test_path` against those in `gold_path` (one per line, aligned):
    every error line and the summary are logged, as EVALB prints them, and each malformed gold
    tree is named."""
    gold, test = list(read_lines(gold_path)), list(read_lines(test_path))
    for path, lines in ((gold_path, gold), (test_path, test)):
        if big := next((n for n, line in enumerate(lines, 1) if line.count("(") > MOST_BRACKETS), None):
            raise UserError(f"{path}, line {big}: a tree of more than {MOST_BRACKETS:,} brackets (EVALB reads 200): "
                            "no sentence's parse; check the file")  # fmt: skip
    if not any(line.strip() for line in gold):
        raise UserError(f"{gold_path}: no trees to score; give the gold trees, one per line")
    extra = len(test) - len(gold)
    if extra > 0 and not any(line.strip() for line in test[len(gold) :]):
        # EVALB reads no further than the gold file's last tree and says so: blank lines after the
        # test file's trees are scored as it scores them; any other count of lines is refused
        log(f"{len(gold) + 1} : Number of lines unmatch (too many lines in test file)")
        log(f"{test_path}: {extra} blank line(s) after its {len(gold)} trees, left out as EVALB leaves them")
        test = test[: len(gold)]
    if len(gold) != len(test):
        raise UserError(
            f"{test_path} has {len(test)} lines but {gold_path} has {len(gold)}; they must align line by line"
        )
    result = evalb(gold, test)
    for message in result["errors"] + gold_error_lines(result, gold_path):
        log(message)
    log(format_summary(result))
    return result
