"""Whether a model's output depends on its input (aiayn.evaluation.dependence): a constant system
is said, in the score step's log and its record, whatever its score; a system whose outputs vary
as its references do is not."""

from __future__ import annotations

import json

from aiayn.evaluation import dependence
from aiayn.evaluation.score import score_file

SCORING = {"moses_lang": "en", "compound_split": False, "sacrebleu_tokenize": "13a"}


def test_a_constant_output_ignores_its_input_and_varied_ones_do_not():
    refs = [f"the cat {i} sat ." for i in range(100)]
    constant = dependence.measure(["the cat sat ."] * 100, refs)
    assert constant["ignores_input"] and constant["distinct_outputs"] == 1 and constant["modal_share"] == 1.0
    varied = dependence.measure(refs[::-1], refs)
    assert not varied["ignores_input"] and varied["distinct_outputs"] == 100
    # 91 of 100 the same: still one output for nearly every sentence
    assert dependence.measure(["a"] * 91 + refs[:9], refs)["ignores_input"]
    assert not dependence.measure(["a"] * 89 + refs[:11], refs)["ignores_input"]
    # references that are themselves one line: writing it is no sign of ignoring the input
    assert not dependence.measure(["yes ."] * 100, ["yes ."] * 100)["ignores_input"]


def test_a_parse_is_compared_by_its_bracketing_not_its_tags_or_words():
    gold = [
        "(TOP (S (NP (DT the) (JJ big) (NN cat)) (VP (VBZ sits)) (. .)))",
        "(TOP (S (NP (NN it)) (VP (VBZ is)) (. .)))",
    ]
    # the gold tree and the model's target linearization are one bracketing
    assert dependence.bracketing(gold[0]) == "(S (NP XX XX XX )NP (VP XX )VP XX )S"
    assert dependence.bracketing("(S (NP DT JJ NN )NP (VP VBZ )VP . )S") == dependence.bracketing(gold[0])
    # outputs that differ only in their tags (singular or plural) are one bracketing: a constant parser
    tags = ["(S (NP DT NN )NP (VP VBZ )VP . )S", "(S (NP DT NNS )NP (VP VBP )VP . )S"] * 10
    d = dependence.measure(tags, gold * 10, parsing=True)
    assert d["distinct_outputs"] == 1 and d["distinct_references"] == 2 and d["ignores_input"]
    varied = ["(S (NP XX XX XX )NP (VP XX )VP XX )S", "(S (NP XX )NP (VP XX )VP XX )S"] * 10
    assert not dependence.measure(varied, gold * 10, parsing=True)["ignores_input"]


def test_the_score_step_records_and_says_a_model_that_ignores_its_input(tmp_path):
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    ref.write_text("".join(f"sentence number {i} .\n" for i in range(50)))
    hyp.write_text("sentence number 1 .\n" * 50)
    said = []
    scores = score_file("translation", hyp, ref, tmp_path / "score.json", scoring=SCORING, log=said.append)
    assert scores["input_dependence"]["ignores_input"]
    assert json.loads((tmp_path / "score.json").read_text())["input_dependence"]["distinct_outputs"] == 1
    line = next(s for s in said if "ignores its input" in s)
    assert "one output for 100% of the 50 sentences" in line and "not a result" in line
    hyp.write_text(ref.read_text())
    said.clear()
    scores = score_file("translation", hyp, ref, tmp_path / "score.json", scoring=SCORING, log=said.append)
    assert not scores["input_dependence"]["ignores_input"] and not any("ignores" in s for s in said)


def test_an_older_score_is_measured_from_its_files_split_on_newlines_only(tmp_path):
    """A score record written before the dependence was measured: its figures from the files it
    names, each line split on "\\n" only, as the score read them (a WMT line may hold U+2028), and
    none where a file is gone."""
    (tmp_path / "hyp").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "ref").write_text("x\ny\u2028still y\nz\n", encoding="utf-8")
    score = {"hyp": str(tmp_path / "hyp"), "ref": str(tmp_path / "ref")}
    measured = dependence.of_score(score, "translation")
    assert measured["lines"] == 3 and measured["distinct_references"] == 3, measured
    assert dependence.of_score({**score, "ref": str(tmp_path / "gone")}, "translation") is None
