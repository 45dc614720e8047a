"""The plan before launch (`python -m aiayn plan`, rule `plan`): its FLOPs and disk figures against
hand computations for base and big, its MFU source, its rows for the paper study, and what the
profile gives it."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, planned_jobs, snakemake

from aiayn import cli
from aiayn.errors import UserError
from aiayn.report import plan
from aiayn.study import config as cfg
from aiayn.study.grid import Study


@pytest.fixture(scope="module")
def paper():
    return {e["name"]: e for e in Study(cfg.load(ROOT / "config.yaml")).plan_spec()}


def hand_flops_per_update(d: int, d_ff: int, qk: int, v: int, N: int, V: int) -> float:
    """§3 by hand: 25,000 source and target tokens in 833 sentence pairs of 30 pieces each side
    (MEAN_LENGTH); per layer and position the Q, K, V, O projections, the FFN and the attention
    products; the decoder's encoder-decoder attention; the output projection. x2 for a
    multiply-accumulate, x3 for backward."""
    S = T = 30
    projections = d * (2 * qk + v) + v * d
    ffn = 2 * d * d_ff
    encoder = S * (projections + ffn + S * (qk + v))
    decoder = T * (projections + ffn + T * (qk + v)) + T * (d * qk + v * d + S * (qk + v)) + S * d * (qk + v)
    per_pair = N * (encoder + decoder) + T * d * V
    return 6.0 * 833 * per_pair


def test_flops_and_disk_of_base_and_big_by_hand(paper):
    rows, totals = plan.plan([paper["base-en-de"], paper["big-en-de"]], gpu="P100", gpus=8)
    base, big = rows
    assert base["model_flops"] == pytest.approx(100_000 * hand_flops_per_update(512, 2048, 512, 512, 6, 37000))
    assert big["model_flops"] == pytest.approx(300_000 * hand_flops_per_update(1024, 4096, 1024, 1024, 6, 37000))
    assert base["model_flops"] == pytest.approx(9.5268e17, rel=1e-4)
    # the weights of the 5 (20) checkpoints averaged and of last.pt at 4 bytes a parameter, and the two
    # newest resume checkpoints at 12 (weights and Adam's two moments)
    assert base["params_M"] * 1e6 == 63_045_632 and big["params_M"] * 1e6 == 214_171_648
    assert base["checkpoints_GB"] * 1e9 == pytest.approx(63_045_632 * (4 * 6 + 12 * 2))
    assert big["checkpoints_GB"] * 1e9 == pytest.approx(214_171_648 * (4 * 21 + 12 * 2))
    assert totals["mfu_source"] == "the paper's (8 P100, FP32 peak)"


def test_the_papers_own_runs_give_its_hours_at_its_mfu(paper):
    """MFU from the paper's own figures: base 100,000 updates in 12 h and big 300,000 in 3.5 days on
    8 P100s; planned at FP32 on 8 P100s the paper's runs take the paper's hours again."""
    fp32 = {name: {**paper[name], "train": {**paper[name]["train"], "precision": "fp32"}} for name in paper}
    rows, _ = plan.plan([fp32["base-en-de"], fp32["big-en-de"]], gpu="P100", gpus=8)
    assert [round(r["wall_hours"], 6) for r in rows] == [12.0, 84.0]
    mfu = plan.paper_mfu()
    assert 0.2 < mfu["base"] < 0.4 and 0.3 < mfu["big"] < 0.5, mfu


def test_a_measured_mfu_is_taken_where_the_gpu_was_benchmarked(paper, tmp_path):
    bench = tmp_path / "gpu.json"
    bench.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "training": [
        {"model": "base", "mfu": 0.25}, {"model": "big", "mfu": 0.4}]}))  # fmt: skip
    rows, totals = plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, benchmark=bench)
    assert totals["mfu_source"] == "benchmarks/gpu.py on H100" and rows[0]["mfu"] == 0.25
    assert rows[0]["gpu_hours"] == pytest.approx(rows[0]["model_flops"] / (0.25 * 989e12 * 3600))
    _, other = plan.plan([paper["base-en-de"]], gpu="A100", gpus=8, benchmark=bench)  # benchmarked elsewhere
    assert other["mfu_source"] == "the paper's (8 P100, FP32 peak)"
    bench.write_text("{not json")
    with pytest.raises(UserError, match="gpu.json: not a result of benchmarks/gpu.py"):
        plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, benchmark=bench)


@pytest.mark.parametrize("column", ["max_rss_mib", "max_rss_mb"])  # the record's name, and its earlier one
def test_a_job_that_needs_more_memory_than_it_asks_is_named(paper, tmp_path, column):
    costs = tmp_path / "cost.csv"
    costs.write_text(f"rule,job,wall_s,{column}\ntrain,base-en-de,10,70000\ntrain,big-en-de,10,9000\n")
    rows, totals = plan.plan([paper["base-en-de"], paper["big-en-de"]], gpu="H100", gpus=8, costs=costs,
                             requests={"train": {"mem_mb": 64000}})  # fmt: skip
    assert totals["short"] == ["base-en-de"]  # 70,000 MiB measured against Slurm's --mem 64000 (MiB)
    assert rows[0]["host_memory_GiB"] == pytest.approx(70000 / 1024) and rows[1]["host_memory_GiB"] == 9000 / 1024
    assert rows[0]["requested_GiB"] == pytest.approx(62.5)
    text = plan.document(rows, totals)
    assert "Ask for more memory: base-en-de" in text and "host_memory_GiB" in text and "requested_GiB" in text


def test_the_command_prints_the_paper_studys_totals_for_p100_and_h100(tmp_path, capsys):
    for gpu in ("P100", "H100"):
        out = tmp_path / f"{gpu}.md"
        assert cli.main(["plan", "--config", str(ROOT / "config.yaml"), "--gpu-model", gpu, "--gpus", "8",
                         "--out", str(out)]) == 0  # fmt: skip
        text = out.read_text()
        assert f"On 8 x {gpu} on 1 node(s); MFU: the paper's (8 P100, FP32 peak)" in text
        assert text.count("| t3-") == 19 and "In total: 3.96e+19 model FLOPs" in text
    assert cli.main(["plan", "--config", str(ROOT / "config.yaml"), "--gpu-model", "Voodoo2", "--gpus", "8",
                     "--out", str(tmp_path / "x.md")]) == 2  # fmt: skip
    assert "--gpu-model 'Voodoo2': no peak FLOP/s known" in capsys.readouterr().err


def test_the_plan_rule_takes_the_training_jobs_gpus_from_the_slurm_profile():
    run = snakemake("--profile", "slurm", "plan", "-n", "-p", "--set-resources", "train:mem_mb=99000")
    assert run.returncode == 0, run.stderr[-3000:]
    (job,) = [j for j in planned_jobs(run.stdout + run.stderr) if j["rule"] == "plan"]
    assert "--gpu-model P100 --gpus 8 --nodes 1" in job["shell"], job["shell"]
    assert '"train": {' in job["shell"] and '"mem_mb": 99000' in job["shell"]
    h100 = snakemake("--profile", "slurm", "plan", "-n", "-p", "--set-resources", "plan:gpu_model=H100")
    assert "--gpu-model H100 --gpus 8" in h100.stdout + h100.stderr
