"""The paper's scoring protocol against what the original tools print (tests/fixtures/protocol/,
copied from the project's shared data; see its README): Moses tokenizer.perl (2017) + the
tensor2tensor compound split + multi-bleu.perl, and EVALB with COLLINS.prm. Checked in every clone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aiayn.data.corpus import read_lines
from aiayn.evaluation.score import bleu_scores, compound_split, paper_tokenize
from aiayn.parsing.evalb import evalb

FIXTURES = Path(__file__).parent / "fixtures" / "protocol"
BLEU, EVALB = FIXTURES / "bleu", FIXTURES / "evalb"


def lines(path: Path) -> list[str]:
    return list(read_lines(path))


# -- BLEU as tensor2tensor's get_ende_bleu.sh measures it -------------------------------------------
@pytest.mark.parametrize("side", ["hyp", "ref"])
def test_moses_tokenization_line_by_line(side):
    ours = paper_tokenize(lines(BLEU / f"{side}.de"), "de", split_compounds=False)
    want = lines(BLEU / f"{side}.tok.de")
    assert len(ours) == len(want) == 404
    assert [(i, a, b) for i, (a, b) in enumerate(zip(ours, want)) if a != b] == []


@pytest.mark.parametrize("side", ["hyp", "ref"])
def test_compound_split_equals_perl_on_bytes_line_by_line(side):
    tokenized, want = lines(BLEU / f"{side}.tok.de"), lines(BLEU / f"{side}.tok.atat.de")
    assert [i for i, (a, b) in enumerate(zip(tokenized, want)) if compound_split(a) != b] == []


def test_compound_split_cases_from_the_fixture_readme():
    assert compound_split("Nord-Ö-Route") == "Nord ##AT##-##AT## Ö ##AT##-##AT## Route"
    assert compound_split("3-D-Kino") == "3 ##AT##-##AT## D-Kino"
    assert compound_split("Ost-West-Büro") == "Ost ##AT##-##AT## West ##AT##-##AT## Büro"
    assert compound_split("a - b -c d-") == "a - b -c d-"


def multi_bleu_line(text: str) -> dict:
    m = re.match(r"BLEU = ([\d.]+), ([\d./]+) \(BP=([\d.]+), ratio=([\d.]+), hyp_len=(\d+), ref_len=(\d+)\)", text)
    assert m, text
    return {"bleu": m[1], "precisions": m[2], "bp": m[3], "hyp_len": int(m[5]), "ref_len": int(m[6])}


@pytest.mark.parametrize("split, line", [(True, 0), (False, 1)], ids=["compound-split", "no-split"])
def test_tokenized_bleu_equals_multi_bleu_perl(split, line):
    want = multi_bleu_line((BLEU / "expected.multi-bleu.txt").read_text().splitlines()[line])
    s = bleu_scores(
        lines(BLEU / "hyp.de"), lines(BLEU / "ref.de"), moses_lang="de", compound_split=split, sacrebleu_tokenize="13a"
    )
    t = s["tokenized_bleu"]
    ours = {
        "bleu": f"{t['score']:.2f}",
        "precisions": "/".join(f"{p:.1f}" for p in t["precisions"]),
        "bp": f"{t['bp']:.3f}",
        "hyp_len": t["hyp_len"],
        "ref_len": t["ref_len"],
    }
    assert ours == want


# -- EVALB with COLLINS.prm ---------------------------------------------------------------------------
STATUS = {"ok": "0", "error": "1", "skip": "2"}
PERCENT = r"(?:0|[1-9]\d{0,2})\.\d\d"
ROW = re.compile(rf"^\s*(\d+)\s+(\d+)\s+([012])\s+({PERCENT})\s+({PERCENT})" + r"\s+(\d+)" * 6 + rf"\s+({PERCENT})$")
MESSAGE = re.compile(r"(\d+) : ((?:Length|Words) unmatch|Bracketing is unbalanced)[^\n]*\n")
SUMMARY = {
    "Number of sentence": "sentences",
    "Number of Error sentence": "error_sentences",
    "Number of Skip  sentence": "skipped_sentences",
    "Number of Valid sentence": "valid_sentences",
    "Bracketing Recall": "recall",
    "Bracketing Precision": "precision",
    "Bracketing FMeasure": "f1",
    "Complete match": "complete_match",
    "Average crossing": "average_crossing",
    "No crossing": "no_crossing",
    "2 or less crossing": "two_or_less_crossing",
    "Tagging accuracy": "tagging_accuracy",
}


def split_streams(text: str) -> tuple[str, list[str]]:
    """EVALB's standard output and its error lines. It writes those to stderr unbuffered, so in a
    file of both they land wherever stdout's buffer was flushed, possibly inside a row: there the
    row's own digits may precede the sentence number, and the split that leaves a valid row is taken."""
    errors = [m[0].rstrip("\n") for m in re.finditer(rf"(?m)^{MESSAGE.pattern}", text)]
    text = re.sub(rf"(?m)^{MESSAGE.pattern}", "", text)
    while m := MESSAGE.search(text):  # the ones inside a row
        start, line_start = m.start(), text.rfind("\n", 0, m.start()) + 1
        k = next(
            k for k in range(len(m[1])) if ROW.match((text[: start + k] + text[m.end() :])[line_start:].split("\n")[0])
        )
        errors.append(text[start + k : m.end() - 1])
        text = text[: start + k] + text[m.end() :]
    return text, sorted(errors, key=lambda e: int(e.split(" : ")[0]))


def evalb_output(path: Path) -> tuple[dict, list[str], dict]:
    """EVALB's per-sentence rows {id: (len, stat, figures)}, its error lines, and both summaries."""
    text, errors = split_streams(path.read_text())
    rows, summaries, section = {}, {}, None
    for line in text.splitlines():
        if m := ROW.match(line):
            rows[int(m[1])] = (int(m[2]), m[3], m.groups()[3:])
        elif line.startswith("-- "):
            section = line.strip("- ")
            summaries[section] = {}
        elif section and " = " in line:
            key, value = (x.strip() for x in line.split(" = "))
            summaries[section][SUMMARY[key]] = value
    return rows, errors, summaries


def our_figures(r) -> tuple[str, ...]:
    recall = 100 * r.match / r.gold if r.gold else 0.0
    precision = 100 * r.match / r.test if r.test else 0.0
    accuracy = 100 * r.correct_tags / r.words if r.words else 0.0
    return (
        f"{recall:.2f}",
        f"{precision:.2f}",
        str(r.match),
        str(r.gold),
        str(r.test),
        str(r.crossing),
        str(r.words),
        str(r.correct_tags),
        f"{accuracy:.2f}",
    )


@pytest.mark.parametrize("name", ["t03_bracket_insertions", "t04_label_changes", "t09_errors_and_skips"])
def test_evalb_equals_the_original_sentence_by_sentence_and_in_summary(name):
    rows, errors, summaries = evalb_output(EVALB / f"{name}.evalb.out")
    result = evalb(lines(EVALB / "gold.mrg"), lines(EVALB / f"{name}.mrg"))
    assert len(rows) == len(result["sentences"]) == 300
    for number, r in enumerate(result["sentences"], start=1):
        length, status, figures = rows[number]
        assert (r.length, STATUS[r.status]) == (length, status), number
        if r.status == "ok":
            assert our_figures(r) == figures, number
    for section, key in (("All", "all"), ("len<=40", "len<=40")):
        ours = result[key]
        want = summaries[section]
        assert {k: f"{ours[k]:.2f}" if isinstance(ours[k], float) else str(ours[k]) for k in want} == want
    # error lines: the same sentences; the same words, except EVALB's message for a line with one
    # close bracket too many, which it calls "too many open bracket" (ours says which)
    assert [e.split(" : ")[0] for e in result["errors"]] == [e.split(" : ")[0] for e in errors]
    differ = [(a, b) for a, b in zip(result["errors"], errors) if a != b]
    assert differ in (
        [],
        [
            (
                "91 : Bracketing unbalance (too many close bracket)",
                "91 : Bracketing is unbalanced (too many open bracket)",
            )
        ],
    )
