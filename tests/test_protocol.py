"""The paper's scoring protocol against what the original tools print (tests/fixtures/protocol/,
copied from the project's shared data; see its README): Moses tokenizer.perl (2017) + the
tensor2tensor compound split + multi-bleu.perl, and EVALB with COLLINS.prm. Checked in every clone."""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from aiayn.data.corpus import read_lines
from aiayn.evaluation import moses
from aiayn.evaluation.score import bleu_scores, compound_split, paper_tokenize, score_file
from aiayn.parsing.evalb import evalb

FIXTURES = Path(__file__).parent / "fixtures" / "protocol"
BLEU, EVALB = FIXTURES / "bleu", FIXTURES / "evalb"
UNICODE, SMOOTHING, EDGES = FIXTURES / "bleu-unicode", FIXTURES / "bleu-smoothing", FIXTURES / "evalb-edges"


def lines(path: Path) -> list[str]:
    return list(read_lines(path))


# -- BLEU as tensor2tensor's get_ende_bleu.sh measures it -------------------------------------------
@pytest.mark.parametrize("side", ["hyp", "ref"])
def test_moses_tokenization_line_by_line(side):
    ours = paper_tokenize(lines(BLEU / f"{side}.de"), "de", split_compounds=False)
    want = lines(BLEU / f"{side}.tok.de")
    assert len(ours) == len(want) == 404
    assert [(i, a, b) for i, (a, b) in enumerate(zip(ours, want)) if a != b] == []


@pytest.mark.parametrize("lang, count", [("de", 60), ("fr", 40)])
def test_moses_tokenization_of_every_script_line_by_line(lang, count):
    """Han, kana, Hangul, Indic scripts with viramas, Ethiopic, runes, mathematical letters, control
    and invisible characters inside words: byte for byte as tokenizer.perl under perl 5.36."""
    ours = paper_tokenize(lines(UNICODE / f"lines.{lang}"), lang, split_compounds=False)
    want = lines(UNICODE / f"lines.tok.{lang}")
    assert len(ours) == len(want) == count
    assert [(i, a, b) for i, (a, b) in enumerate(zip(ours, want)) if a != b] == []
    if lang == "de":
        split = paper_tokenize(lines(UNICODE / "lines.de"), "de", split_compounds=True)
        assert split == lines(UNICODE / "lines.tok.atat.de")


@pytest.mark.parametrize(
    "line, want",
    [
        ("東京都 und ಕನ್ನಡ", "東京都 und ಕನ ್ ನಡ"),  # Han letters are Alphabetic; a virama is not
        ("sehr\x1cgutes Wetter", "sehrgutes Wetter"),  # perl's \s leaves U+001C, the junk rule deletes it
        ("Es ist\x1f \x1f gut.", "Es ist gut ."),
        ("ein\u00a0Wort", "ein Wort"),  # a no-break space is white space to perl too
        (" \u3000 ", " \u3000 "),  # a line of white space only is printed as it is
        ("Dr.  ( a", "Dr. ( a"),
    ],
)
def test_moses_tokenization_cases_from_the_issue(line, want):
    assert paper_tokenize([line], "de", split_compounds=False) == [want]


def test_tokenizer_classes_are_the_unicode_properties_they_stand_for_at_every_code_point():
    """Every code point (BMP and astral) against Python's unicodedata, whose Unicode version the
    tables follow: N is the general category, Lowercase Python's one-character islower, White_Space
    Python's isspace less U+001C..U+001F, Alphabetic the letters, Nl, Lowercase, Uppercase and the
    package's Alphabetic marks (all Mn or Mc)."""
    assert moses.UNICODE_VERSION == unicodedata.unidata_version
    marks = moses.alphabetic_marks()
    assert marks and all(unicodedata.category(chr(c)) in ("Mn", "Mc") for c in marks)
    classes = {k: moses.code_points(k) for k in moses.PROPERTIES}
    wrong = {k: [] for k in classes}
    for cp in range(0x110000):
        ch, cat = chr(cp), unicodedata.category(chr(cp))
        alpha = cat in ("Lu", "Ll", "Lt", "Lm", "Lo", "Nl") or ch.islower() or ch.isupper() or cp in marks
        want = {
            "IsAlpha": alpha,
            "IsAlnum": alpha or cat == "Nd",
            "IsN": cat.startswith("N"),
            "IsLower": ch.islower(),
            "s": ch.isspace() and not 0x1C <= cp <= 0x1F,
        }
        for k, v in want.items():
            if (cp in classes[k]) != v:
                wrong[k].append(hex(cp))
    assert {k: v[:10] for k, v in wrong.items() if v} == {}
    # and the classes are what the tokenizer's patterns use
    tok = moses.tokenizer("de")
    assert tok.special.pattern.startswith(f"([^{moses.unicode_class('IsAlnum')}{moses.unicode_class('s')}")


PERL = shutil.which("perl")


def perl_unicode() -> str | None:
    if not PERL:
        return None
    run = subprocess.run([PERL, "-MUnicode::UCD", "-e", "print Unicode::UCD::UnicodeVersion()"], capture_output=True)
    return run.stdout.decode().strip() if run.returncode == 0 else None


@pytest.mark.skipif(
    perl_unicode() != unicodedata.unidata_version,
    reason=f"needs perl with Unicode::UCD at Unicode {unicodedata.unidata_version} (perl 5.36), "
    f"found {perl_unicode() or 'none'}",
)
def test_tokenizer_classes_equal_perls_own_at_every_code_point():
    """perl's \\p{IsAlpha}, \\p{IsAlnum}, \\p{IsN}, \\p{IsLower} and \\s, asked of every code point
    0..10FFFF as tokenizer.perl asks them (of a UTF-8 string); and the package's marks file is what
    perl's tables give."""
    version, perl = moses.perl_classes(PERL)
    for name in moses.PROPERTIES:
        ours = moses.code_points(name)
        assert sorted(map(hex, ours ^ perl[name]))[:10] == [], name
    assert moses.marks_from_perl(PERL) == (Path(moses.__file__).parent / moses.MARKS_FILE).read_text()


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


@pytest.mark.parametrize(
    "folder, split, line",
    [(BLEU, True, 0), (BLEU, False, 1), (SMOOTHING, True, 0)],
    ids=["compound-split", "no-split", "no-smoothing"],
)
def test_tokenized_bleu_equals_multi_bleu_perl(folder, split, line):
    """multi-bleu.perl's line, character for character; bleu-smoothing/ has no matching 4-gram,
    where multi-bleu.perl prints BLEU = 0.00 (it does not smooth)."""
    expected = (folder / "expected.multi-bleu.txt").read_text().splitlines()[line]
    want = multi_bleu_line(expected)
    s = bleu_scores(
        lines(folder / "hyp.de"),
        lines(folder / "ref.de"),
        moses_lang="de",
        compound_split=split,
        sacrebleu_tokenize="13a",
    )
    t = s["tokenized_bleu"]
    assert expected.startswith(t["line"])
    ours = {
        "bleu": f"{t['score']:.2f}",
        "precisions": "/".join(f"{p:.1f}" for p in t["precisions"]),
        "bp": f"{t['bp']:.3f}",
        "hyp_len": t["hyp_len"],
        "ref_len": t["ref_len"],
    }
    assert ours == want
    assert t["empty_output"] is False


@pytest.mark.parametrize("side", ["hyp", "ref"])
def test_smoothing_fixture_tokenizes_as_perl(side):
    ours = paper_tokenize(lines(SMOOTHING / f"{side}.de"), "de", split_compounds=True)
    assert ours == lines(SMOOTHING / f"{side}.tok.atat.de")


def test_an_all_empty_output_scores_zero_and_says_so(tmp_path):
    """multi-bleu.perl dies of a division by zero on an output without a word; we score 0.00 and
    say in the score record and the log that the output is empty."""
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("\n \n\n")
    ref.write_text("Ein Satz .\nNoch einer\nund drei\n")
    logged = []
    s = score_file(
        "translation",
        hyp,
        ref,
        tmp_path / "s.json",
        scoring={"moses_lang": "de", "compound_split": True, "sacrebleu_tokenize": "13a"},
        log=logged.append,
    )
    t = s["tokenized_bleu"]
    assert (t["score"], t["hyp_len"], t["ref_len"], t["empty_output"]) == (0.0, 0, 7, True)
    assert any("the output is empty" in m for m in logged)
    assert '"empty_output": true' in (tmp_path / "s.json").read_text()


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


CASES = [
    (EVALB / "gold.mrg", EVALB / f"{name}.mrg", EVALB / f"{name}.evalb.out")
    for name in ("t03_bracket_insertions", "t04_label_changes", "t09_errors_and_skips")
] + [
    (EDGES / f"{name}.gold", EDGES / f"{name}.test", EDGES / f"{name}.evalb.out")
    for name in ("e1_wordless_unbalanced", "e2_rows_after_read_error", "e3_malformed_gold", "e4_nbsp_in_word")
]


@pytest.mark.parametrize("gold, test, out", CASES, ids=[c[2].name.removesuffix(".evalb.out") for c in CASES])
def test_evalb_equals_the_original_sentence_by_sentence_and_in_summary(gold, test, out):
    """Every row (ok, error and skipped sentences alike), every error line and both summaries.
    e1: a wordless unbalanced parse is skipped; e2: an unbalanced parse's row keeps its figures;
    e3: a malformed gold tree makes one error sentence, the rest is scored; e4: a no-break space
    is part of a word."""
    rows, errors, summaries = evalb_output(out)
    result = evalb(lines(gold), lines(test))
    assert len(rows) == len(result["sentences"]) == len(lines(gold))
    for number, r in enumerate(result["sentences"], start=1):
        length, status, figures = rows[number]
        assert (r.length, STATUS[r.status], our_figures(r)) == (length, status, figures), number
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


def test_a_malformed_gold_tree_is_named_in_the_log_and_the_rest_is_scored(tmp_path):
    from aiayn.parsing.evalb import evalb_files

    logged = []
    result = evalb_files(EDGES / "e3_malformed_gold.gold", EDGES / "e3_malformed_gold.test", log=logged.append)
    assert result["gold_errors"] == [5] and result["all"]["error_sentences"] == 1
    assert result["all"]["valid_sentences"] == 7
    assert any(m.startswith(f"{EDGES / 'e3_malformed_gold.gold'}, line 5: the gold tree is malformed") for m in logged)
    # the same through `score` of a parser's output (linearized trees restored over the gold words)
    gold = lines(EDGES / "e3_malformed_gold.gold")
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("\n".join("(S XX )S" for _ in gold) + "\n")
    logged = []
    s = score_file("parsing", hyp, EDGES / "e3_malformed_gold.gold", tmp_path / "s.json", scoring={}, log=logged.append)
    assert s["gold_errors"] == [5] and any("line 5: the gold tree is malformed" in m for m in logged)


def test_f_is_zero_where_evalb_prints_nan():
    """Precision and recall both 0: EVALB prints "-nan" for F, we 0.00 (README: differences)."""
    result = evalb(["(TOP (S (NP (DT a) (NN b)) (VP (VB c))))"], ["(TOP (X (Y (DT a) (NN b)) (Z (VB c))))"])
    s = result["all"]
    assert (s["recall"], s["precision"], s["f1"], s["valid_sentences"]) == (0.0, 0.0, 0.0, 1)
