"""Tables from fabricated score and metric files: cells, deltas only for runs of the paper's setting,
what each row ran, pending runs, CSV = Markdown."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, flat, squeeze

from aiayn.report.format import markdown_of, to_csv
from aiayn.report.notes import document, findings_line
from aiayn.report.tables import add_directions, build, paper_cost, write_table
from aiayn.study import config as cfg
from aiayn.study import paper
from aiayn.study.grid import Study


def test_cost_formula_reproduces_the_papers_figures():
    assert paper_cost(12, 8, "Tesla P100-PCIE-16GB") == pytest.approx(3.3e18, rel=0.01)  # base: 12 h x 8 P100
    assert paper_cost(3.5 * 24, 8, "P100") == pytest.approx(2.3e19, rel=0.01)  # big: 3.5 days x 8 P100
    assert paper_cost(1, 1, "cpu") is None


def fabricate(
    results,
    name,
    testset,
    bleu,
    steps_done,
    *,
    sacre=None,
    reference="t2t",
    wmt=None,
    hours=2.0,
    gpus=8,
    device="NVIDIA H100 80GB HBM3",
    precision="bf16",
    lines_scored=3003,
    pairs=4_500_000,
    dev_ppl=4.9,
):
    folder = results / name
    folder.mkdir(parents=True)
    report = results / "data" / "wmt14-en-de" / "train.report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"kept": pairs}))
    start = 1_000_000.0
    lines = [
        {
            "event": "start",
            "step": 0,
            "world_size": gpus,
            "device_name": device,
            "params": 1_000_000,
            "wall": start,
            "precision": precision,
        }  # fmt: skip
    ]
    lines += [
        {
            "step": s,
            "loss": 2.0,
            "lr": 1e-3,
            "tgt_tokens_per_s": 1000.0,
            "tgt_tokens_per_update": 25000,
            "flops_per_update": 6 * 1_000_000 * 25000,  # 6 x parameters x target tokens, as counted
            "wall": start + hours * 3600 * s / steps_done,
        }
        for s in (steps_done // 2, steps_done)
    ]
    lines += [{"step": steps_done, "dev_ppl": dev_ppl, "dev_nll": 1.59}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if bleu is not None:
        score = {
            "lines": lines_scored,
            "tokenized_bleu": {"score": bleu, "reference": reference},
            "sacrebleu": {"score": sacre or bleu - 0.7, "signature": "nrefs:1|tok:13a"},
        }
        if wmt is not None:  # the same against WMT's reference
            score["tokenized_bleu_wmt"] = {"score": wmt, "reference": "wmt"}
        (folder / f"{testset}.score.json").write_text(json.dumps(score))


BASE = {
    "N": 6,
    "d_model": 512,
    "d_ff": 2048,
    "h": 8,
    "d_k": 64,
    "d_v": 64,
    "P_drop": 0.1,
    "positional": "sinusoidal",
    "pre_norm": False,
    "init": "t2t",
}
BIG = {**BASE, "d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3}


def spec(name, bleu_paper, steps=100000, *, preset="base", model=None, eps_ls=0.1, tokens=25000, average=None):
    """The table spec of an experiment (as aiayn.study.grid.Study.table_spec writes it), the paper's by default."""
    return {
        "name": name,
        "row": None,
        "dataset": "wmt14-en-de",
        "testset": "newstest2014",
        "steps": steps,
        "average": average or {"base": 5, "big": 20}[preset],
        "model": model or {"base": BASE, "big": BIG}[preset],
        "eps_ls": eps_ls,
        "paper": {"bleu": bleu_paper},
        "scoring": {"moses_lang": "de", "compound_split": True, "sacrebleu_tokenize": "13a", "reference": "t2t"},
        "preset": preset,
        "task": "translation",
        "pair": ["en", "de"],
        "train": {"steps": steps, "tokens_per_update": tokens, "warmup_steps": 4000, "eps_ls": eps_ls},
        "decode": {"beam": 4, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 50},
    }


def test_table2_cells_deltas_and_pending(tmp_path):
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000, sacre=27.1, wmt=27.7)
    fabricate(tmp_path, "big-en-de", "newstest2014", None, 120000)  # still training
    specs = [spec("base-en-de", 27.3), spec("big-en-de", 28.4, 300000, preset="big"), spec("base-en-fr", 38.1)]
    rows = build(2, tmp_path, specs)
    base, big, fr = rows
    assert base["status"] == "done" and base["bleu"] == 27.9 and base["delta"] == pytest.approx(0.6)
    # the paper's figure is compared with ours against its team's reference; WMT's is beside it
    assert (base["bleu_reference"], base["bleu_wmt"]) == ("t2t", 27.7)
    assert (big["bleu_reference"], big["bleu_wmt"]) == (None, None)
    # a score against WMT's reference, as every score before references were named, is not the paper's setting
    fabricate(tmp_path / "old", "base-en-de", "newstest2014", 27.9, 100000, reference="wmt")
    (old,) = build(2, tmp_path / "old", specs[:1])
    assert (old["bleu_reference"], old["bleu_wmt"], old["delta"]) == ("wmt", 27.9, None)
    assert old["setting"] == "not comparable: BLEU against WMT's reference (paper: the reference with t2t's quotes)"
    assert base["setting"] == "the paper's" and base["updates"] == "100,000 of 100,000"
    assert base["hardware"] == "8 x NVIDIA H100 80GB HBM3" and base["tgt_tokens_per_update"] == 25000
    assert big["setting"] == "not comparable: 120,000 of 300,000 updates" and big["delta"] is None
    assert base["sacrebleu"] == 27.1 and base["lines"] == 3003
    assert base["device_hours"] == pytest.approx(16.0)
    assert base["model_flops"] == pytest.approx(6 * 1e6 * 25000 * 100000)
    assert base["cost_flops_paper_formula"] == pytest.approx(2 * 3600 * 8 * 67e12)  # H100 FP32
    assert base["mfu"] == pytest.approx(6 * 1e6 * 25000 * 100000 / (2 * 3600 * 8 * 989e12))
    assert big["status"] == "pending (step 120000/300000)" and big["bleu"] is None
    assert fr["status"] == "pending"
    # CSV and Markdown carry the same values: ours right under the paper's row, the rest in its note
    md = squeeze(markdown_of(document(2, rows, experiments=specs)))
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert (table[0]["bleu"], table[0]["bleu_reference"], table[0]["bleu_wmt"]) == ("27.9", "t2t", "27.7")
    assert "| Transformer (base) | 27.3 | 38.1 | 3.3e18 | 3.3e18 |\n| ours: base [1] | 27.90 |  | 3.9e18 |  |" in md
    assert "| Transformer (big) | 28.4 | 41.8 | 2.3e19 | 2.3e19 |\n| ours: big [2] | at 40 % |  | 3.9e18 |  |" in md
    notes = flat(md)
    assert "1. base-en-de (EN-DE, newstest2014, 3,003 lines): BLEU 27.90 against the reference with t2t's " \
        "quotes, 27.70 against WMT's reference; sacreBLEU 27.10; +0.60 against the paper; the paper's setting; " \
        "8 x NVIDIA H100 80GB HBM3, 16.00 device-hours" in notes  # fmt: skip
    assert 'against the reference bleu_reference names: "t2t", the test set\'s with every „ “ ” made "' in notes
    assert "2. big-en-de (EN-DE, newstest2014): running: step 120,000 of 300,000; not comparable: 120,000 of " \
        "300,000 updates;" in notes  # fmt: skip
    assert "3. base-en-fr (EN-DE, newstest2014): pending;" in notes


def test_table2_says_what_cleaning_removed_from_each_training_corpus(tmp_path):
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000)
    report = {"kept": 28112, "removed": {"too_long": 500, "ratio": 388, "empty": 0},
              "corpora": [{"archive": "multi30k", "pairs": 29000, "kept": 28112}]}  # fmt: skip
    (tmp_path / "data/wmt14-en-de/train.report.json").write_text(json.dumps(report))
    write_table(2, experiments=[spec("base-en-de", 27.3)], results=tmp_path, log=lambda _: None)
    md = flat((tmp_path / "tables/table2.md").read_text())
    assert (
        f"Training data after cleaning ({tmp_path}/data/<dataset>/train.report.json): wmt14-en-de kept 28,112 of "
        "29,000 pairs (3.1% removed: too long 500, ratio 388)."
    ) in md


def test_table2_mfu_against_the_peak_of_the_runs_own_arithmetic(tmp_path):
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000, precision="fp32")
    (row,) = build(2, tmp_path, [spec("base-en-de", 27.3)])
    assert row["mfu"] == pytest.approx(6 * 1e6 * 25000 * 100000 / (2 * 3600 * 8 * 67e12))  # H100 fp32, not bf16


def test_table3_changes_against_base(tmp_path):
    base = {**spec("base-en-de", None), "row": "base", "testset": "newstest2013", "paper": {"dev_ppl": 4.92}}
    h1 = {**base, "name": "t3-A-h1", "row": "A", "model": {**base["model"], "h": 1, "d_k": 512, "d_v": 512}}
    fabricate(tmp_path, "base-en-de", "newstest2013", 25.5, 100000)
    rows = build(3, tmp_path, [base, h1])
    assert rows[0]["changes"] == "(base)" and rows[0]["dev_ppl"] == 4.9 and rows[0]["paper_dev_ppl"] == 4.92
    assert rows[1]["changes"] == "h=1, d_k=512, d_v=512" and rows[1]["status"] == "pending"


def test_table3_says_which_variations_move_as_in_the_paper(tmp_path):
    """Each variation's dev perplexity and dev BLEU against base, beside the paper's row against the
    paper's base (Table 3: base 4.92 / 25.8), judged yes / partly / no, and summed up."""
    base = {**spec("base-en-de", None, average=1), "row": "base", "testset": "newstest2013"}
    base["paper"] = {"dev_ppl": 4.92, "dev_bleu": 25.8}

    def variation(name, row, ppl, bleu):
        return {**base, "name": name, "row": row, "paper": {"dev_ppl": ppl, "dev_bleu": bleu}}

    specs = [
        base,
        variation("t3-A-h1", "A", 5.29, 24.9),  # the paper: both worse
        variation("t3-D-ls0.0", "D", 4.67, 25.3),  # the paper: perplexity better, BLEU worse
        variation("t3-A-h16", "A", 4.91, 25.8),  # the paper: perplexity better, BLEU unchanged
        variation("t3-C-N8", "C", 4.88, 25.5),  # not run yet
    ]
    ours = {"base-en-de": (4.9, 25.5), "t3-A-h1": (5.4, 24.0), "t3-D-ls0.0": (4.5, 26.0), "t3-A-h16": (5.0, 25.6)}
    for name, (ppl, bleu) in ours.items():
        fabricate(tmp_path, name, "newstest2013", bleu, 100000, dev_ppl=ppl, lines_scored=3000)
    rows = build(3, tmp_path, specs)
    said = {r["experiment"]: r["as_paper"] for r in rows}
    assert said == {
        "base-en-de": "(base)",
        "t3-A-h1": "yes: ppl worse as paper, BLEU worse as paper",
        "t3-D-ls0.0": "partly: ppl better as paper, BLEU better (paper worse)",
        "t3-A-h16": "no: ppl worse (paper better), BLEU better (paper: no change)",
        "t3-C-N8": None,
    }
    h1 = rows[1]
    assert (h1["dev_ppl_vs_base"], h1["paper_dev_ppl_vs_base"], h1["moves_as_paper"]) == ("worse", "worse", "yes")
    assert findings_line(rows) == (
        "\nDoes this study reproduce the paper's findings? 1 of 3 variations move as in the paper (dev perplexity "
        "and dev BLEU against base; 1 partly), none tested for significance; 1 row(s) pending or without the "
        "paper's figures.\n"
    )
    rows[1]["significant"], rows[2]["significant"], rows[3]["significant"] = "yes", "no", "yes"
    add_directions(rows, specs)
    assert rows[1]["as_paper"] == "yes: ppl worse as paper, BLEU worse as paper; BLEU significant"
    assert rows[2]["as_paper"].endswith("; BLEU not significant")
    assert "1 of 3 variations move as in the paper (dev perplexity and dev BLEU against base; 1 partly), 1 of them " \
        "significantly (BLEU, p < 0.05)" in findings_line(rows)  # fmt: skip
    md = flat(markdown_of(document(3, rows)))
    assert "; as the paper: yes: ppl worse as paper, BLEU worse as paper 3. t3-A-h16:" in md  # the paper's order
    assert "Does this study reproduce the paper's findings? 1 of 3 variations" in md


def test_a_table3_without_a_base_row_judges_nothing(tmp_path):
    h1 = {**spec("t3-A-h1", None, average=1), "row": "A", "testset": "newstest2013", "paper": {"dev_ppl": 5.29}}
    fabricate(tmp_path, "t3-A-h1", "newstest2013", 24.0, 100000, lines_scored=3000)
    (row,) = build(3, tmp_path, [h1])
    assert row["as_paper"] is None and findings_line([row]) == ""


def test_a_run_that_is_not_the_papers_setting_gets_no_delta_and_says_why(tmp_path):
    """The case of the issue: a 2-layer model of width 128 trained 700 updates, scored on 300 lines,
    once printed "27.3 | 25.47 | -1.83" as if it were the paper's base model."""
    small = {**BASE, "N": 2, "d_model": 128}
    fabricate(tmp_path, "base-en-de", "newstest2014", 25.47, 700, lines_scored=300, pairs=20_000, gpus=1, device="cpu")
    (row,) = build(2, tmp_path, [spec("base-en-de", 27.3, 100000, model=small, tokens=600)])
    assert row["bleu"] == 25.47 and row["paper_bleu"] == 27.3 and row["delta"] is None
    assert row["setting"] == (
        "not comparable: 700 of 100,000 updates, N 2 (paper 6), d_model 128 (paper 512), "
        "tokens_per_update 600 (paper 25,000), 300 test lines (paper 3,003), 20,000 training pairs (paper ~4,500,000)"
    )
    assert row["hardware"] == "CPU"
    md = squeeze(markdown_of(document(2, [row], experiments=[spec("base-en-de", 27.3)])))
    assert "| Transformer (base) | 27.3 | 38.1 | 3.3e18 | 3.3e18 |\n| ours: base [1] | 25.47 |" in md
    assert "1. base-en-de (EN-DE, newstest2014, 300 lines): sacreBLEU 24.77; not comparable: 700 of 100,000" in flat(md)
    assert "against the paper;" not in md  # no delta


def test_each_papers_setting_difference_is_named(tmp_path):
    fabricate(tmp_path, "big-en-fr", "newstest2014", 41.0, 300000, reference="wmt")
    fr = {**spec("big-en-fr", 41.8, 300000, preset="big", model={**BIG, "P_drop": 0.1}), "pair": ["en", "fr"]}
    fr["decode"] = {**fr["decode"], "beam": 5}
    fr["scoring"] = {"moses_lang": "fr", "compound_split": False, "sacrebleu_tokenize": "13a"}
    (row,) = build(2, tmp_path, [{**fr, "average": 10}])
    # P_drop 0.1 is the paper's for big EN-FR (§6.1); beam, averaging and the EN-FR data size are not
    assert row["setting"] == (
        "not comparable: beam 5 (paper 4), 10 checkpoints averaged (paper 20), "
        "4,500,000 training pairs (paper ~36,000,000)"
    )
    de = spec("big-en-de", 28.4, 300000, preset="big", model={**BIG, "P_drop": 0.1})
    assert "P_drop 0.1 (paper 0.3)" in build(2, tmp_path, [{**de, "name": "big-en-fr"}])[0]["setting"]
    (other,) = build(2, tmp_path, [{**spec("big-en-fr", 41.8), "preset": "huge"}])
    assert other["setting"] == "not comparable: preset 'huge' is not one of the paper's (base, big, parser)"
    (unscored,) = build(2, tmp_path, [{**spec("big-en-fr", None)}])
    assert unscored["setting"] == "no paper figure for this row" and unscored["delta"] is None


@pytest.mark.parametrize(
    "change, said",
    [
        ({"average": 1}, "no checkpoint averaging (paper 5)"),
        ({"decode": {"beam": 1, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 50}}, "beam 1 (paper 4)"),
        ({"decode": {"beam": 4, "alpha": 0.0, "max_len_a": 1.0, "max_len_b": 50}}, "alpha 0.0 (paper 0.6)"),
        (
            {"scoring": {"moses_lang": "de", "compound_split": False, "sacrebleu_tokenize": "13a", "reference": "t2t"}},
            "BLEU without compound splitting (paper with)",
        ),
        (
            {"scoring": {"moses_lang": "en", "compound_split": True, "sacrebleu_tokenize": "13a", "reference": "t2t"}},
            "BLEU tokenized as en (paper: Moses -l de)",
        ),
        (
            {"scoring": {"moses_lang": "de", "compound_split": True, "sacrebleu_tokenize": "13a", "reference": "wmt"}},
            "BLEU against WMT's reference (paper: the reference with t2t's quotes)",
        ),
    ],  # fmt: skip
    ids=["no_averaging", "beam", "length_penalty", "no_compound_split", "tokenized_as_en", "wmt_reference"],
)
def test_an_evaluation_chain_off_the_papers_is_said_in_the_row_and_at_scoring(tmp_path, change, said):
    """The five ways a figure misses the paper although the loss looks fine: no averaging, beam,
    length penalty, tokenization; each in the row's setting and in the score step's one line."""
    exp = {**spec("base-en-de", 27.3), **change}
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000, reference=exp["scoring"]["reference"])
    (row,) = build(2, tmp_path, [exp])
    assert row["setting"] == f"not comparable: {said}" and row["delta"] is None
    line = paper.chain_line({**exp, "table": 2})
    assert (
        line
        == f"evaluation chain of base-en-de departs from the paper's Table 2 row: {said} (its table row says so too)"
    )


def test_the_papers_evaluation_chain_is_said_as_such():
    line = paper.chain_line({**spec("base-en-de", 27.3), "table": 2})
    assert line == (
        "evaluation chain of base-en-de: the paper's Table 2 row's (beam 4, alpha 0.6, 5 checkpoints averaged, "
        "BLEU Moses-tokenized -l de and compound-split against the reference with t2t's quotes)"
    )
    t3 = {**spec("base-en-de", None, average=1), "table": 3}
    assert paper.chain_line(t3).endswith(
        "(beam 4, alpha 0.6, no averaging, BLEU Moses-tokenized -l de and compound-split against the reference "
        "with t2t's quotes)"
    )


def test_table3_rows_are_compared_with_the_papers_variation_of_their_letter(tmp_path):
    base = {**spec("base-en-de", None, average=1), "row": "base", "testset": "newstest2013"}
    base["paper"] = {"dev_ppl": 4.92, "dev_bleu": 25.8}
    h4 = {**base, "name": "t3-A-h4", "row": "A", "model": {**BASE, "h": 4, "d_k": 128, "d_v": 128}}
    h3 = {**base, "name": "t3-A-h3", "row": "A", "model": {**BASE, "h": 3, "d_k": 128, "d_v": 128}}
    for name in ("base-en-de", "t3-A-h4", "t3-A-h3"):
        fabricate(tmp_path, name, "newstest2013", 25.5, 100000, lines_scored=3000)
    rows = build(3, tmp_path, [base, h4, h3])
    assert [r["setting"] for r in rows[:2]] == ["the paper's", "the paper's"]
    assert rows[2]["setting"] == "not comparable: h 3 (paper 4)"  # nearest of row A's variations: h 4
    md = squeeze(markdown_of(document(3, rows, experiments=[base, h4, h3])))
    assert (
        "| paper (A) |  |  |  | 4 | 128 | 128 |  |  |  | 4.92 | 25.8 |  |\n| t3-A-h4 [2] |  |  |  | 4 | 128 | 128 |"
        in md
    )
    assert "2. t3-A-h4: the paper's setting 3. t3-A-h3: not comparable: h 3 (paper 4)" in flat(md)


def test_table4_delta_only_for_the_papers_parser(tmp_path, paper_config):
    """The parser of config.yaml's `parser` preset (§6.3: 4 layers, d_model 1024) is the paper's;
    one with another of the paper's stated settings (3 layers) is not."""
    parser = {**cfg.validate(paper_config)["presets"]["parser"]["model"]}
    exp = {
        **spec("parse-wsj", None, 1000, model=parser, average=1),
        "preset": "parser",
        "task": "parsing",
        "pair": [None, None],
        "dataset": "wsj",
        "testset": "wsj23",
        "paper": {"f1": 91.3},
        "row": "WSJ only",
    }
    exp["decode"] = {"beam": 21, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 300}
    folder = tmp_path / "parse-wsj"
    folder.mkdir()
    (folder / "wsj23.score.json").write_text(
        json.dumps({"all": {"f1": 90.0, "precision": 90.1, "recall": 89.9, "error_sentences": 0, "sentences": 2416}})
    )
    (tmp_path / "data/wsj").mkdir(parents=True)
    (tmp_path / "data/wsj/train.src").write_text("w\n" * 39_832)
    (folder / "metrics.jsonl").write_text(
        json.dumps(
            {
                "event": "start",
                "step": 0,
                "world_size": 1,
                "device_name": "cpu",
                "params": 1,
                "precision": "fp32",
                "wall": 0.0,
            }
        )
        + "\n"
        + json.dumps(
            {
                "step": 1000,
                "loss": 1.0,
                "lr": 1e-3,
                "tgt_tokens_per_s": 1.0,
                "tgt_tokens_per_update": 9,
                "flops_per_update": 1.0,
                "wall": 1.0,
            }
        )
        + "\n"
    )
    (row,) = build(4, tmp_path, [exp])
    assert row["setting"] == "the paper's" and row["delta"] == pytest.approx(-1.3) and row["lines"] == 2416
    (tmp_path / "data/wsj/train.src").write_text("w\n" * 300)
    (row,) = build(4, tmp_path, [exp])
    assert row["delta"] is None and row["setting"] == "not comparable: 300 training pairs (paper ~40,000)"
    (tmp_path / "data/wsj/train.src").write_text("w\n" * 39_832)
    (row,) = build(4, tmp_path, [{**exp, "model": {**parser, "N": 3}}])
    assert row["delta"] is None and row["setting"] == "not comparable: N 3 (paper 4)"
    # the paper's parser, but one tree for every sentence: marked, no delta, not counted as done
    adjectives = ["", "(JJ big) ", "(JJ red) (JJ big) ", "(RB very) (JJ red) "]
    gold = [f"(TOP (S (NP {adjectives[i % 4]}(NN w{i})) (VP (VBZ v)) (. .)))" for i in range(300)]
    hyp = ["(S (NP XX )NP (VP XX (NP XX )NP )VP XX )S"] * 300
    (folder / "wsj23.trees").write_text("\n".join(hyp) + "\n")
    (folder / "wsj23.gold").write_text("\n".join(gold) + "\n")
    record = json.loads((folder / "wsj23.score.json").read_text())
    record.update(hyp=str(folder / "wsj23.trees"), ref=str(folder / "wsj23.gold"))
    (folder / "wsj23.score.json").write_text(json.dumps(record))
    (row,) = build(4, tmp_path, [exp])
    assert row["status"] == "ignores its input" and row["delta"] is None
    assert row["distinct_outputs"] == "1 of 300 (ignores its input)"
    assert "ignores its input" in markdown_of(document(4, [row]))
    hyp[::2] = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S"] * 150  # two trees, each half: it reads something
    (folder / "wsj23.trees").write_text("\n".join(hyp) + "\n")
    (row,) = build(4, tmp_path, [exp])
    assert row["status"] == "done" and row["delta"] == pytest.approx(-1.3) and row["distinct_outputs"] == "2 of 300"


@pytest.mark.parametrize(
    "name, model",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", None),  # not an L4: unknown, no MFU rather than a wrong one
        ("Tesla P100-PCIE-16GB", "P100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A10", None),  # not an A100 nor an A10G
        ("cpu", None),
    ],
)
def test_gpu_peaks_are_matched_by_whole_names(name, model):
    from aiayn.runtime.hardware import PEAKS, gpu_model, peak_flops

    assert gpu_model(name) == model
    assert peak_flops(name, "fp32") == (PEAKS[model]["fp32"] if model else None)


def test_word_by_word_baseline_is_the_same_in_every_process():
    """Ties in co-occurrence went to whichever word Python's (per-process) string hashing put first:
    the demo's word-by-word BLEU was 2.12 in one run and 2.24 in the next."""
    code = (
        "from aiayn.evaluation.baselines import word_by_word\n"
        "print(word_by_word(['a b'], ['a b', 'a b'], ['x y z w', 'y x w z']))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2", "3", "4", "5", "6")
    }
    assert outs == {"['w w']\n"}


def test_running_one_experiment_keeps_the_finished_rows_of_the_others(tmp_path):
    """`run: [big-en-de]` rewrote Table 2 with that row alone, yesterday's finished base-en-de gone:
    the study's other experiments are in the spec, marked, and the table shows those that finished."""
    config = cfg.load(ROOT / "config.yaml")
    config["run"] = ["big-en-de"]
    spec2 = Study(config).table_spec(2)
    assert [(s["name"], s.get("outside_run", False)) for s in spec2] == [
        ("base-en-de", True), ("big-en-de", False), ("base-en-fr", True), ("big-en-fr", True),
    ]  # fmt: skip
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000)  # finished yesterday
    fabricate(tmp_path, "base-en-fr", "newstest2014", None, 5000)  # started, never scored
    fabricate(tmp_path, "big-en-de", "newstest2014", 28.6, 300000)
    rows = write_table(2, experiments=spec2, results=tmp_path, log=lambda _: None)
    assert [(r["experiment"], r["status"]) for r in rows] == [
        ("base-en-de", "done (outside run:)"),
        ("big-en-de", "done"),
    ]
    md = squeeze((tmp_path / "tables/table2.md").read_text())
    assert (
        "| ours: base [1] | 27.90 |" in md
        and "1. base-en-de (EN-DE, newstest2014, 3,003 lines): done (outside run:);" in flat(md)
    )


# -- the tables as the paper prints them (issue 55) ---------------------------------------------------
# the columns the Markdown tables had before the paper's layout (0.5.0): every one is still in the CSV
OLD_COLUMNS = {
    2: ["experiment", "status", "paper_bleu", "bleu", "bleu_s_sel", "seeds", "delta", "sacrebleu", "setting",
        "dataset", "testset", "lines", "preset", "updates", "tgt_tokens_per_update", "hardware", "averaged_steps",
        "device_hours", "cost_flops_paper_formula", "model_flops", "mfu"],
    3: ["row", "experiment", "status", "changes", "setting", "updates", "seeds", "dev_ppl", "dev_ppl_s_sel",
        "paper_dev_ppl", "dev_bleu", "dev_bleu_s_sel", "paper_dev_bleu", "as_paper", "params_M", "paper_params_M",
        "p_value_vs_base", "significant", "test"],
    4: ["row", "experiment", "status", "paper_f1", "f1", "f1_s_sel", "seeds", "delta", "setting", "selected_on_dev",
        "testset", "lines", "updates", "hardware", "precision", "recall", "error_sentences"],
}  # fmt: skip
PAPERS_COLUMNS = {
    2: ["model", "BLEU EN-DE", "BLEU EN-FR", "cost EN-DE", "cost EN-FR"],
    3: ["row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "ε_ls", "steps", "PPL", "BLEU", "params"],
    4: ["parser", "training", "F1"],
}


def block_of(md: str) -> list[list[str]]:
    """The first Markdown table of a document, as its lines' cells (the header first, the rule left out)."""
    lines = md.split("\n\n")[1 if md.split("\n\n")[1].startswith("|") else 2].splitlines()
    assert all(line.startswith("|") for line in lines), lines
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines if not line.startswith("|:")]


@pytest.fixture
def paper_study(tmp_path):
    """config.yaml's study (its parser's treebank named) part done: base-en-de scored, big-en-de at
    step 120,000 of 300,000, Table 3's base and (C) d_ff 4096 scored, the rest not started."""
    from conftest import with_treebank

    config = cfg.validate(with_treebank(cfg.load(ROOT / "config.yaml")))
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000, sacre=27.1)
    fabricate(tmp_path, "big-en-de", "newstest2014", None, 120000)
    for name, bleu, ppl in (("base-en-de", 25.9, 4.85), ("t3-C-dff4096", 26.1, 4.71)):
        fabricate(tmp_path / "t3", name, "newstest2013", bleu, 100000, dev_ppl=ppl, lines_scored=3000)
    return config, tmp_path


def test_the_paper_studys_tables_read_like_the_papers_within_120_characters(paper_study):
    """Each table's first block is the paper's table in the paper's columns and rows, each of our rows
    right under the paper's row it reproduces, no line over 120 characters; every line of the
    document but a signature or path fits too."""
    config, results = paper_study
    blocks = {}
    for number in (2, 3, 4):
        out = results / "tables" / f"table{number}.md"
        specs = Study(config).table_spec(number)
        where = results / "t3" if number == 3 else results
        write_table(number, experiments=specs, results=where, out_md=out, log=lambda _: None)
        md = out.read_text()
        blocks[number] = block_of(md)
        widths = [len(line) for line in md.split("\n\n")[1].splitlines()]
        assert max(widths) <= 120, (number, max(widths))
        assert blocks[number][0] == PAPERS_COLUMNS[number]
        long = [line for line in md.splitlines() if len(line) > 120 and "`" not in line and "/" not in line]
        assert not long, long
    names = [line[0] for line in blocks[2][1:]]
    paper_rows = [n for n in names if not n.startswith("ours")]
    assert paper_rows == [row[0] for row in paper.TABLE2]
    base, big = names.index("Transformer (base)"), names.index("Transformer (big)")
    assert blocks[2][1 + base] == ["Transformer (base)", "27.3", "38.1", "3.3e18", "3.3e18"]
    assert blocks[2][2 + base] == ["ours: base [1, 2]", "27.90", "pending", "3.9e18", ""]  # EN-DE and EN-FR
    assert blocks[2][2 + big] == ["ours: big [3, 4]", "at 40 %", "pending", "3.9e18", ""]
    t3 = blocks[3][1:]
    assert t3[0] == ["paper base", "6", "512", "2048", "8", "64", "64", "0.1", "0.1", "100K", "4.92", "25.8", "65"]
    assert t3[1] == [
        "base-en-de [1]",
        "6",
        "512",
        "2048",
        "8",
        "64",
        "64",
        "0.1",
        "0.1",
        "100K",
        "4.85",
        "25.90",
        "1.00",
    ]
    assert t3[2][0] == "paper (A)" and t3[2][4:7] == ["1", "512", "512"] and t3[2][1:4] == ["", "", ""]
    assert t3[-2][0] == "paper big" and t3[-1][0] == "big-en-de [21]"  # big last, as in the paper
    dff = [i for i, line in enumerate(t3) if line[0].startswith("t3-C-dff4096")][0]
    assert t3[dff - 1] == ["paper (C)", "", "", "4096", "", "", "", "", "", "", "4.75", "26.2", "90"]
    assert t3[dff] == ["t3-C-dff4096 [14]", "", "", "4096", "", "", "", "", "", "", "4.71", "26.10", "1.00"]
    assert ["paper (E) learned", "", "", "", "", "", "", "", "", "", "4.92", "25.7", ""] in t3
    t4 = [line for line in blocks[4][1:]]
    at = t4.index(["Transformer (4 layers)", "WSJ only, discriminative", "91.3"])
    assert t4[at + 1] == ["ours: parse-wsj [1]", "WSJ only", "pending"]
    assert [line[0] for line in t4 if not line[0].startswith("ours")] == [row[0] for row in paper.TABLE4]


def test_every_figure_of_the_old_tables_is_in_the_csv(paper_study):
    """The Markdown keeps the paper's columns; the CSV keeps every column it had, with the row's figures."""
    config, results = paper_study
    for number in (2, 3, 4):
        out = results / "tables" / f"table{number}.md"
        where = results / "t3" if number == 3 else results
        rows = write_table(number, experiments=Study(config).table_spec(number), results=where,
                           out_md=out, log=lambda _: None)  # fmt: skip
        table = list(csv.DictReader(out.with_suffix(".csv").open()))
        assert set(OLD_COLUMNS[number]) <= set(table[0]), set(OLD_COLUMNS[number]) - set(table[0])
        for row, line in zip(rows, table):
            for key in OLD_COLUMNS[number]:
                want = "" if row.get(key) is None else str(row[key])
                assert line[key] == want, (number, key, line[key], want)


def test_the_html_page_shows_the_same_table_first(paper_study):
    """tableN.html (what the report shows): the title, then the block with the Markdown's cells, our
    lines marked, then the same notes; nothing fetched from outside."""
    import html as htmllib
    import re

    config, results = paper_study
    for number in (2, 3, 4):
        out = results / "tables" / f"table{number}.md"
        where = results / "t3" if number == 3 else results
        write_table(number, experiments=Study(config).table_spec(number), results=where, out_md=out, log=print)
        page = out.with_suffix(".html").read_text()
        assert page.index("<h1>") < page.index("<table>") < page.index("<ol>") < page.index("<h2>")
        table = page[page.index("<table>") : page.index("</table>")]
        cells = [[htmllib.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr)]
                 for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", table)]  # fmt: skip
        assert cells == block_of(out.read_text())
        ours = re.findall(r'<tr class="ours"><td>(.*?)</td>', table)
        assert ours and all("[" in name for name in ours), ours
        assert "http" not in page
        notes = re.findall(r"<li>(.*?)</li>", page)
        assert notes and flat(htmllib.unescape(notes[0])) in flat(out.read_text())


def test_a_model_that_ignores_its_input_is_marked_in_the_block_and_its_note():
    """The demo's parser once wrote one tree for all 300 sentences and Table 4 showed F1 49.92 as a
    result: its figure carries ✗, its note says why, and it has no delta."""
    row = {"row": "WSJ only", "experiment": "parse-wsj", "status": "ignores its input", "f1": 49.92, "paper_f1": 91.3,
           "delta": None, "testset": "wsj23", "lines": 300, "setting": "the paper's",
           "distinct_outputs": "1 of 300 (ignores its input)"}  # fmt: skip
    md = markdown_of(document(4, [row], experiments=[{"name": "parse-wsj", "dataset": "wsj"}]))
    assert "| ours: parse-wsj [1] | WSJ only | 49.92 ✗ |" in squeeze(md)
    assert (
        "1. parse-wsj (wsj23, 300 sentences): ignores its input; the paper's setting; distinct outputs 1 of 300"
        in flat(md)
    )
    assert "against the paper" not in flat(md).split("1. parse-wsj")[1].split("##")[0]
