"""The parsing transfer (§6.3): treebank preprocessing and linearization, EVALB by hand, repair."""

from __future__ import annotations

import random
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT, real_data, snakemake_study, squeeze, tiny_demo_config

from aiayn.parsing.evalb import evalb, read_tree, score_parses, score_sentence
from aiayn.parsing.trees import delinearize, linearize, parse_trees, preprocess, read_sections, restore, with_top


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = real_data("ptb_wsj_sample", "treebank.zip")
    folder = tmp_path_factory.mktemp("ptb")
    with zipfile.ZipFile(path) as z:
        z.extractall(folder)
    return folder / "treebank"


def test_sample_round_trips_exactly(sample):
    trees = list(read_sections(sample, ["00", "01"]))
    assert len(trees) == 3914
    for scheme in ("keep", "XX"):
        for tree in trees:
            gold = preprocess(tree)
            back = restore(linearize(preprocess(tree, scheme)), with_top(gold))
            assert str(back) == str(with_top(gold))


def test_a_parsers_own_tags_are_not_what_evalb_scores():
    """With POS tags in the target (pos_tags: keep), a word the model tags `.` would shorten the
    sentence under COLLINS.prm (punctuation deleted) and EVALB would drop it as an error sentence
    ("Length unmatch"), out of F1: every leaf takes the gold tag, the bracketing is what is scored."""
    from aiayn.parsing.evalb import score_parses

    gold = "(TOP (S (NP (DT the) (JJ red) (NN cat)) (VP (VBZ sits)) (. .)))"
    wrong_tags = "(S (NP DT . )NP (VP NN VBZ )VP . )S"  # 'red' tagged '.', brackets wrong
    (tree,) = parse_trees(gold)
    assert [leaf.label for leaf in restore(wrong_tags, tree).leaves()] == ["DT", "JJ", "NN", "VBZ", "."]
    result = score_parses([wrong_tags], [gold])["all"]
    assert result["error_sentences"] == 0 and result["valid_sentences"] == 1
    assert result["f1"] < 100  # NP (0,2) and VP (2,4) against NP (0,3) and VP (3,4): only S matches


def test_preprocessing():
    (tree,) = parse_trees(
        "( (S (NP-SBJ-1 (-NONE- *)) (NP-TMP=2 (NNP Monday)) "
        "(VP (VBD said) (-LRB- -LRB-) (SBAR (-NONE- 0) (S (-NONE- *T*-1))))) )"
    )
    assert str(preprocess(tree.children[0])) == "(S (NP (NNP Monday)) (VP (VBD said) (-LRB- -LRB-)))"
    assert linearize(preprocess(tree.children[0], "XX")) == "(S (NP XX )NP (VP XX XX )VP )S"


def test_missing_treebank_says_what_is_needed(tmp_path):
    from aiayn.errors import UserError
    from aiayn.parsing.prepare_treebank import split_trees

    with pytest.raises(UserError, match="needs? your licensed Penn Treebank 3 \\(LDC99T42\\)"):
        split_trees({"treebank": None, "train_sections": ["02"], "eval_sets": {}}, "train")
    with pytest.raises(UserError, match="treebank folder not found"):
        split_trees({"treebank": str(tmp_path / "nope"), "train_sections": ["02"], "eval_sets": {}}, "train")
    with pytest.raises(UserError, match="--split wsj99: not a split of this dataset; known: train, wsj23"):
        split_trees({"treebank": str(tmp_path), "train_sections": ["02"], "eval_sets": {"wsj23": {}}}, "wsj99")


# -- EVALB, brackets counted by hand ----------------------------------------------------------------------
GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PRT (RP down))) (. .)))"


def test_identical_trees():
    r = score_sentence(GOLD, GOLD)
    assert (r.gold, r.test, r.match, r.words) == (4, 4, 4, 4)  # S, NP, VP, PRT; TOP and "." are deleted


def test_punctuation_is_ignored_for_spans():
    test = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PRT (RP down)) (. .))))"  # "." moved into VP
    r = score_sentence(GOLD, test)
    assert (r.gold, r.test, r.match) == (4, 4, 4)


def test_advp_equals_prt_and_function_tags_are_cut():
    test = "(TOP (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat) (ADVP (RP down))) (. .)))"
    r = score_sentence(GOLD, test)
    assert r.match == 4


def test_wrong_label_same_span_does_not_match():
    test = "(TOP (S (NP (DT The) (NN cat)) (ADJP (VBD sat) (PRT (RP down))) (. .)))"
    r = score_sentence(GOLD, test)
    assert (r.gold, r.test, r.match) == (4, 4, 3)


def test_unary_chains_and_duplicate_brackets():
    gold = "(TOP (S (VP (VP (VB Go)))))"
    test = "(TOP (S (VP (VB Go))))"
    r = score_sentence(gold, test)
    assert (r.gold, r.test, r.match) == (3, 2, 2)  # VP twice in gold: counted twice, matched once
    r = score_sentence(test, gold)
    assert (r.gold, r.test, r.match) == (2, 3, 2)


def test_empty_constituents_are_dropped():
    gold = "(TOP (S (NP (-NONE- *)) (VP (VBD left)) (. .)))"
    parsed = read_tree(gold)
    assert parsed.words == [("left", "VBD")] and parsed.length == 2  # "." counts for length, -NONE- does not
    r = score_sentence(gold, "(TOP (S (VP (VBD left)) (. .)))")
    assert (r.gold, r.test, r.match) == (2, 2, 2)  # the NP over nothing is gone


def test_corpus_totals_and_length_mismatch():
    gold = [GOLD, "(TOP (S (VP (VP (VB Go)))))", "(TOP (S (NP (PRP It)) (VP (VBZ is))))"]
    test = [GOLD, "(TOP (S (VP (VB Go))))", "(TOP (S (NP (PRP It))))"]  # the last one lost a word
    result = evalb(gold, test)
    s = result["all"]
    assert (s["sentences"], s["error_sentences"], s["valid_sentences"]) == (3, 1, 2)
    assert result["errors"] == ["3 : Length unmatch (2|1)"]
    assert (s["gold_brackets"], s["test_brackets"], s["matched_brackets"]) == (7, 6, 6)
    assert s["recall"] == pytest.approx(100 * 6 / 7) and s["precision"] == pytest.approx(100.0)
    assert s["f1"] == pytest.approx(2 * 100 * (600 / 7) / (100 + 600 / 7))
    assert s["complete_match"] == pytest.approx(50.0)


def test_crossing_brackets():
    gold = "(TOP (S (NP (DT a) (NN b)) (VP (VB c) (NN d))))"
    test = "(TOP (S (DT a) (X (NN b) (VB c)) (NN d)))"
    r = score_sentence(gold, test)
    assert r.crossing == 1 and r.match == 1  # X(1,3) crosses NP(0,2) and VP(2,4): counted once


# -- repair -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sequence",
    ["", "(S XX XX", ")S )NP XX (NP XX", "(S (NP XX XX XX XX XX )NP )S", "XX (VP )VP )S (S", "(S )S (NP )NP"],
)
def test_malformed_sequences_become_trees_over_the_words(sequence):
    words = ["w1", "w2", "w3"]
    tree = delinearize(sequence, words)
    assert tree.words() == words
    assert read_tree(str(tree)).words == [(w, leaf.label) for w, leaf in zip(words, tree.leaves())]


def test_random_garbage_is_repaired():
    rng = random.Random(0)
    vocab = ["(S", "(NP", "(VP", ")S", ")NP", ")VP", "XX", "XX", "XX"]
    for _ in range(500):
        words = [f"w{i}" for i in range(rng.randint(1, 12))]
        seq = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 30)))
        tree = delinearize(seq, words)
        assert tree.words() == words
        parse_trees(str(tree))  # balanced


def test_score_parses_uses_gold_tags_for_xx_leaves():
    gold = [GOLD]
    result = score_parses(["(S (NP XX XX )NP (VP XX (PRT XX )PRT )VP XX )S"], gold)
    assert result["all"]["f1"] == pytest.approx(100.0) and result["all"]["tagging_accuracy"] == pytest.approx(100.0)


def test_evalb_command(tmp_path):
    (tmp_path / "gold").write_text(GOLD + "\n")
    (tmp_path / "test").write_text("(TOP (S (NP (DT The) (NN cat)) (ADJP (VBD sat) (PRT (RP down))) (. .)))\n")
    run = subprocess.run(
        [sys.executable, "-m", "aiayn", "evalb", str(tmp_path / "gold"), str(tmp_path / "test")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    assert "Bracketing Recall         =  75.00" in run.stdout and "Bracketing FMeasure       =  75.00" in run.stdout
    assert "Complete match            =   0.00" in run.stdout


def test_a_tree_no_sentence_has_is_refused_before_it_is_scored(tmp_path):
    """A tree of 100,000 nested brackets (its brackets matched pair by pair, it ran for minutes) is refused
    naming the file and line; EVALB's own arrays stop at 200."""
    from aiayn.errors import UserError
    from aiayn.parsing.evalb import evalb_files

    (tmp_path / "gold").write_text(GOLD + "\n" + "(S " * 100_000 + "x" + ")" * 100_000 + "\n")
    with pytest.raises(UserError, match=r"gold, line 2: a tree of more than 2,000 brackets"):
        evalb_files(tmp_path / "gold", tmp_path / "gold")


@pytest.mark.slow
def test_tiny_parsing_run_through_the_dag_on_the_sample(sample, tmp_path):
    """Train on section 00 of the NLTK sample, parse section 01, score with EVALB: the Table 4 branch."""
    import yaml

    config = tiny_demo_config()
    config["datasets"] = {
        "ptb-sample": {
            "task": "parsing",
            "treebank": str(sample),
            "train_sections": ["00"],
            "dev": "s01",
            "test": "s01",
            "eval_sets": {"s01": {"sections": ["01"]}},
            "vocab": {"model_type": "bpe", "size": 300, "shared": False},
        }
    }
    config["archives"] = {}
    config["presets"]["parser"]["decode"] = {"beam": 1, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 5}
    config["experiments"] = {
        "parse-sample": {"preset": "parser", "dataset": "ptb-sample", "tables": [4], "row": "sample"}
    }
    config["baselines"] = False
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    run = snakemake_study(tmp_path, "table4", "--configfile", str(tmp_path / "study.yaml"), "--replace-workflow-config")
    assert run.returncode == 0, run.stderr[-4000:]
    import json

    score = json.loads((tmp_path / "results/parse-sample/s01.score.json").read_text())
    assert score["all"]["sentences"] == len(list(read_sections(sample, ["01"])))
    assert score["all"]["error_sentences"] == 0  # every repaired parse is a tree over exactly the input words
    md = (tmp_path / "results/tables/table4.md").read_text()
    assert f"| ours: parse-sample [1] | sample | {score['all']['f1']:.2f} |" in squeeze(md)
    assert "1. parse-sample (s01, " in md


def test_a_malformed_parse_without_words_is_skipped_as_evalb_does():
    gold = "(TOP (S (NP (DT the) (NN dog)) (VP (VBD barked))))"
    assert score_sentence(gold, "(S (NP (VP").status == "skip"
    assert score_sentence(gold, "").status == "skip"
    bad = score_sentence(gold, "(S (NP (DT the) (NN dog)) (VP (VBD barked))")
    assert (bad.status, bad.message) == ("error", "Bracketing is unbalanced (too many open bracket)")


def test_a_treebank_file_in_another_encoding_is_refused_not_replaced(tmp_path):
    """A Latin-1 .mrg (é as one byte) is refused naming its line and byte, never read with U+FFFD."""
    from aiayn.errors import UserError
    from aiayn.parsing.trees import read_mrg

    path = tmp_path / "wsj_0001.mrg"
    path.write_bytes("( (S (NP (NNP Soci\u00e9t\u00e9)) (VP (VBD won)) (. .)) )\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"wsj_0001.mrg, line 1: not UTF-8 .*iconv -f latin1"):
        read_mrg(path)
    path.write_bytes("( (S (NP (NNP Soci\u00e9t\u00e9)) (VP (VBD won)) (. .)) )\n".encode("utf-8"))
    assert read_mrg(path)[0].words() == ["Soci\u00e9t\u00e9", "won", "."]


def test_a_closing_bracket_closes_the_constituent_of_its_label():
    """The demo's parse candidate P_drop 0.1, lr_scale 2 wrote this for every sentence of its dev
    set (a model that had learnt the trees' shapes, not the words). Closing one constituent per
    bracket whatever its label closed the VP at the stray `)NP` and the S at `)VP`: the S spanned 4
    of the 7 words, and not one bracket matched (F1 0.00). By label, the S spans the sentence."""
    words = "a ri pu rogis a pe .".split()
    tree = delinearize("(S (NP XX )NP (VP XX (NP XX )NP XX )NP )VP XX )S", words)
    assert str(tree) == "(TOP (S (NP (XX a)) (VP (XX ri) (NP (XX pu)) (XX rogis)) (XX a) (XX pe) (XX .)))"
    gold = "(TOP (S (NP (DT a) (JJ ri) (NN pu)) (VP (VBZ rogis) (NP (DT a) (NN pe))) (. .)))"
    assert score_parses(["(S (NP XX )NP (VP XX (NP XX )NP XX )NP )VP XX )S"], [gold])["all"]["matched_brackets"] == 1
    # a closing label open further out closes what was left open inside it
    assert str(delinearize("(S (NP XX (VP XX )S XX", ["a", "b", "c"])) == "(TOP (S (NP (XX a) (VP (XX b)))) (XX c))"
