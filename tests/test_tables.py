"""Tables from fabricated score and metric files: cells, deltas, pending runs, CSV = Markdown."""

from __future__ import annotations

import csv
import io
import json

import pytest

from aiayn.tables import build, markdown_document, paper_cost, to_csv


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
    hours=2.0,
    gpus=8,
    device="NVIDIA H100 80GB HBM3",
    precision=None,
):
    folder = results / name
    folder.mkdir(parents=True)
    start = 1_000_000.0
    lines = [
        {"event": "start", "step": 0, "world_size": gpus, "device_name": device, "params": 1_000_000, "wall": start}
    ]
    if precision:
        lines[0]["precision"] = precision
    lines += [
        {
            "step": s,
            "loss": 2.0,
            "lr": 1e-3,
            "tgt_tokens_per_update": 25000,
            "wall": start + hours * 3600 * s / steps_done,
        }
        for s in (steps_done // 2, steps_done)
    ]
    lines += [{"step": steps_done, "dev_ppl": 4.9, "dev_nll": 1.59}]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if bleu is not None:
        score = {
            "lines": 3003,
            "tokenized_bleu": {"score": bleu},
            "sacrebleu": {"score": sacre or bleu - 0.7, "signature": "nrefs:1|tok:13a"},
        }
        (folder / f"{testset}.score.json").write_text(json.dumps(score))


def spec(name, bleu_paper, steps=100000):
    return {
        "name": name,
        "row": None,
        "dataset": "wmt14-en-de",
        "testset": "newstest2014",
        "steps": steps,
        "average": 5,
        "model": {"N": 6, "d_model": 512, "d_ff": 2048, "h": 8, "d_k": 64, "d_v": 64, "P_drop": 0.1},
        "eps_ls": 0.1,
        "paper": {"bleu": bleu_paper},
        "scoring": {},
    }


def test_table2_cells_deltas_and_pending(tmp_path):
    fabricate(tmp_path, "base-en-de", "newstest2014", 27.9, 100000, sacre=27.1)
    fabricate(tmp_path, "big-en-de", "newstest2014", None, 120000)  # still training
    rows = build(2, tmp_path, [spec("base-en-de", 27.3), spec("big-en-de", 28.4, 300000), spec("base-en-fr", 38.1)])
    base, big, fr = rows
    assert base["status"] == "done" and base["bleu"] == 27.9 and base["delta"] == pytest.approx(0.6)
    assert base["sacrebleu"] == 27.1 and base["lines"] == 3003
    assert base["gpu_hours"] == pytest.approx(16.0) and base["model_flops"] == pytest.approx(6 * 1e6 * 25000 * 100000)
    assert base["cost_flops_paper_formula"] == pytest.approx(2 * 3600 * 8 * 67e12)  # H100 FP32
    assert base["mfu"] == pytest.approx(6 * 1e6 * 25000 * 100000 / (2 * 3600 * 8 * 989e12))
    assert big["status"] == "pending (step 120000/300000)" and big["bleu"] is None
    assert fr["status"] == "pending"
    # CSV and Markdown carry the same values
    md = markdown_document(2, rows)
    table = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert table[0]["bleu"] == "27.9" and "| base-en-de | done | 27.30 | 27.90 | 0.60 | 27.10 |" in md
    assert "| big-en-de | pending (step 120000/300000) | 28.40 |" in md
    assert "Transformer (big)" in md  # the paper's rows for context
    assert "| Transformer (base) | 27.30 | 38.10 | 3.3e+18 | 3.3e+18 |" in md  # costs in FLOPs, not 19 digits


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
