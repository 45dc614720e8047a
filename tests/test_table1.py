"""Table 1 (§4), measured: FLOP exponents against the paper's, exact path lengths of small stacks,
the recurrence's unrolled cell equal to nn.LSTM, restricted attention equal to full attention
when its band covers everything, and the table with the paper's column beside ours."""

from __future__ import annotations

import csv
import math

import pytest
import torch

from aiayn import cli
from aiayn.report import table1


@pytest.mark.parametrize(
    "kind, n_exp, d_exp",
    [
        ("self-attention", 2, 1),
        ("recurrent", 1, 2),
        ("convolutional", 1, 2),
        ("separable convolutional", 1, 2),
        ("restricted self-attention", 1, 1),
    ],
)
def test_flop_exponents_are_the_papers(kind, n_exp, d_exp):
    torch.manual_seed(0)
    ns, ds = [32, 64, 128, 256], [32, 64, 128]
    layer = table1.make(kind, 64, k=3, r=4).eval()
    n_fit = table1.slope(ns, [table1.flops(layer, n, 64) for n in ns])
    d_fit = table1.slope(ds, [table1.flops(table1.make(kind, d, k=3, r=4).eval(), 128, d) for d in ds])
    assert n_fit == pytest.approx(n_exp, abs=0.05)
    assert d_fit == pytest.approx(d_exp, abs=0.1)  # separable: k n d + n d^2, the pointwise term dominates


@pytest.mark.parametrize("n", [8, 16, 30])
def test_path_lengths_are_exact(n):
    k, r = 3, 4
    assert table1.path_length("self-attention", n, k=k, r=r) == 1
    assert table1.path_length("restricted self-attention", n, k=k, r=r) == math.ceil((n - 1) / r)
    assert table1.path_length("convolutional", n, k=k, r=r) == math.ceil((n - 1) / ((k - 1) // 2))
    assert table1.path_length("dilated convolutional", n, k=k, r=r) == math.ceil(math.log(n, k) - 1e-9)
    assert table1.path_length("recurrent", n, k=k, r=r) == n


def test_the_unrolled_cell_is_the_lstm_and_restricted_attention_with_a_wide_band_is_full_attention():
    torch.manual_seed(0)
    x = torch.randn(1, 12, 16)
    lstm = table1.make("recurrent", 16, k=3, r=4).eval()
    with torch.no_grad():
        torch.testing.assert_close(lstm.unrolled(x), lstm(x), rtol=0, atol=1e-6)
        full = table1.make("self-attention", 16, k=3, r=4).eval()
        band = table1.SelfAttention(16, 8, radius=12)
        band.load_state_dict(full.state_dict())
        torch.testing.assert_close(band(x), full(x), rtol=0, atol=1e-6)
    assert (
        table1.sequential_operations("recurrent", 100) == 100
        and table1.sequential_operations("convolutional", 100) == 1
    )


def test_the_table_is_the_papers_with_ours_under_each_row_and_every_column_in_its_csv(tmp_path):
    settings = '{"d_model": 32, "n": [16, 32, 64], "d": [16, 32], "r": 4, "path_n": [8, 16], "repeats": 1}'
    argv = ["table1", "--settings", settings, "--out-md", str(tmp_path / "t.md"), "--out-csv", str(tmp_path / "t.csv"),
            "--out-html", str(tmp_path / "t.html"), "--figure", str(tmp_path / "t.png")]  # fmt: skip
    assert cli.main(argv) == 0
    rows = {r["layer"]: r for r in csv.DictReader((tmp_path / "t.csv").open())}
    assert set(rows) == set(table1.KINDS)
    assert (
        rows["self-attention"]["paper_complexity"] == "O(n²·d)" and rows["self-attention"]["n_exponent_flops"] == "2.00"
    )
    assert rows["recurrent"]["paper_path"] == "O(n)" and rows["recurrent"]["path_length"] == "8 at n=8, 16 at n=16"
    assert (
        rows["convolutional"]["paper_path"] == "O(log_k(n))"
        and "contiguous: 7 at n=8" in rows["convolutional"]["path_length"]
    )
    md = (tmp_path / "t.md").read_text()
    assert max(map(len, md.splitlines())) <= 120, max(md.splitlines(), key=len)
    block = [line for line in md.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in block]
    assert cells[0] == ["Layer Type", "Complexity per Layer", "Sequential Operations", "Maximum Path Length"]
    assert cells[2] == ["Self-Attention", "O(n²·d)", "O(1)", "O(1)"] and cells[3] == [
        "ours [1]",
        "n^2.00·d^1.00",
        "1",
        "1, 1",
    ]
    assert (
        cells[4] == ["Recurrent", "O(n·d²)", "O(n)", "O(n)"]
        and cells[5][0] == "ours [2]"
        and cells[5][2:] == ["64", "8, 16"]
    )
    assert cells[8][0] == "Self-Attention (restricted)" and cells[9][3] == "2, 4"  # ceil((n - 1) / r), r = 4
    assert cells[10][0] == "ours: separable conv. [5]" and cells[10][3] == "not measured"
    assert "5. §4's separable convolution" in md and "Crossover, in this machine's wall time when it ran" in md
    page = (tmp_path / "t.html").read_text()
    assert page.index("<table>") < page.index("<ol>") and '<tr class="ours"><td>ours [1]</td>' in page
    assert (tmp_path / "t.png").stat().st_size > 1000
