"""The plan before launch (`python -m aiayn plan`, rule `plan`): its FLOPs and disk figures against
hand computations for base and big, its MFU source, its rows for the paper study, and what the
profile gives it."""

from __future__ import annotations

import json
import re

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
    assert list(totals["mfu_sources"]) == ["paper, at fp32's rate"]  # config.yaml's auto: fp16 on a P100


def test_the_papers_runs_take_its_hours_on_its_gpus_at_its_precision_and_no_less_at_fp16(paper):
    """MFU from the paper's own figures: base 100,000 updates in 12 h and big 300,000 in 3.5 days on
    8 P100s at their FP32 peak. Planned at fp32 on 8 P100s the paper's runs take its hours again;
    at config.yaml's precision (auto: fp16 there, unmeasured) no less: fp16 is assumed no faster."""
    fp32 = [{**paper[n], "train": {**paper[n]["train"], "precision": "fp32"}} for n in ("base-en-de", "big-en-de")]
    rows, totals = plan.plan(fp32, gpu="P100", gpus=8)
    assert [round(r["wall_hours"], 6) for r in rows] == [12.0, 84.0]
    assert [r["mfu_from"] for r in rows] == ["paper", "paper"] and "fp32 on P100, the paper's own" in str(totals)
    mfu = plan.paper_mfu()
    assert 0.2 < mfu["base"] < 0.4 and 0.3 < mfu["big"] < 0.5, mfu
    rows, totals = plan.plan([paper["base-en-de"], paper["big-en-de"]], gpu="P100", gpus=8)
    assert [(r["precision"], round(r["wall_hours"], 6)) for r in rows] == [("fp16", 12.0), ("fp16", 84.0)]
    assert rows[0]["mfu"] == pytest.approx(mfu["base"] / 2)  # of the fp16 peak, twice the fp32 one
    (said,) = totals["mfu_sources"].values()
    assert said.startswith("fp16 on P100, at which no MFU was measured: assumed no faster than fp32")


def gpu_json(path, device: str, runs: list[tuple[str, str, float]]):
    """A result as benchmarks/gpu.py writes it (tests/test_benchmarks.py reads its keys back from a run)."""
    training = [{"preset": p, "precision": prec, "mfu": mfu, "compile": False} for p, prec, mfu in runs]
    path.write_text(json.dumps({"date": "2026-12-06", "device": device, "training": training}))
    return path


def test_a_measured_mfu_is_taken_only_on_its_gpu_at_its_precision(paper, tmp_path):
    bench = gpu_json(tmp_path / "gpu.json", "NVIDIA H100 80GB HBM3", [("base", "bf16", 0.25), ("big", "bf16", 0.4)])
    rows, totals = plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, benchmark=bench)
    assert rows[0]["mfu_from"] == "measured" and rows[0]["mfu"] == 0.25
    assert "measured by benchmarks/gpu.py on NVIDIA H100 80GB HBM3 (2026-12-06" in totals["mfu_sources"]["measured"]
    assert rows[0]["gpu_hours"] == pytest.approx(rows[0]["model_flops"] / (0.25 * 989e12 * 3600))
    # fp32 on that H100: its bf16 MFU of the fp32 peak, the lower one, and said so
    fp32 = {**paper["base-en-de"], "train": {**paper["base-en-de"]["train"], "precision": "fp32"}}
    rows, totals = plan.plan([fp32], gpu="H100", gpus=8, benchmark=bench)
    assert rows[0]["mfu_from"] == "measured, at bf16's rate" and rows[0]["mfu"] == 0.25
    assert rows[0]["gpu_hours"] == pytest.approx(rows[0]["model_flops"] / (0.25 * 67e12 * 3600))
    # benchmarked elsewhere: the paper's MFU, of the A100's bf16 peak, named as assumed
    rows, other = plan.plan([paper["base-en-de"]], gpu="A100", gpus=8, benchmark=bench)
    assert rows[0]["mfu_from"] == "paper, of A100's peak" and rows[0]["mfu"] == plan.paper_mfu()["base"]
    assert (
        "assumed the paper's fp32 MFU of the A100's bf16 peak (312 TFLOP/s)"
        in other["mfu_sources"][rows[0]["mfu_from"]]
    )  # and the H100's measurement named as not used, not dropped in silence
    assert (
        f"not used: the MFU measured by benchmarks/gpu.py on NVIDIA H100 80GB HBM3 (2026-12-06, {bench}), not on A100"
        in (other["mfu_sources"][rows[0]["mfu_from"]])
    )
    bench.write_text("{not json")
    with pytest.raises(UserError, match="gpu.json: not a result of benchmarks/gpu.py"):
        plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, benchmark=bench)
    gpu_json(bench, "NVIDIA H100 80GB HBM3", [("base", "bf16", 25.0), ("big", "bf16", 0.4)])  # a percentage
    with pytest.raises(UserError, match=r"gpu.json: an MFU outside \(0, 1\]"):
        plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, benchmark=bench)


def test_the_header_agrees_with_the_requests_and_every_blank_column_says_why(paper):
    requests = {"train": {"gpu": 1, "nodes": 1}, "prepare": {}}
    rows, totals = plan.plan([paper["base-en-de"]], gpu="P100", gpus=8, requests=requests)
    text = plan.document(rows, totals, requests)
    assert "Planned for 8 x P100 on 1 node(s) a training" in text
    assert (
        "The train jobs request 1 GPU(s) on 1 node(s) each, not these: at 1 GPU(s) the trainings take 96.0 hours"
        in text
    )
    assert "prepare: none set (the executor's default)" in text
    header = next(line for line in text.splitlines() if line.startswith("| experiment"))
    for column in ("host_memory_GiB", "short", "requested_GiB"):  # nothing measured, no mem_mb requested
        assert column not in header and f"No column {column}: " in text
    requests["train"] = {"gpu": 8, "nodes": 1}
    assert "The train jobs request" not in plan.document(
        *plan.plan([paper["base-en-de"]], gpu="P100", gpus=8), requests
    )


@pytest.mark.parametrize("column", ["max_rss_mib", "max_rss_mb"])  # the record's name, and its earlier one
def test_a_job_that_needs_more_memory_than_it_asks_is_named(paper, tmp_path, column):
    costs = tmp_path / "cost.csv"
    costs.write_text(f"rule,job,wall_s,{column}\ntrain,base-en-de,10,70000\ntrain,big-en-de,10,9000\n")
    rows, totals = plan.plan([paper["base-en-de"], paper["big-en-de"]], gpu="H100", gpus=1, costs=costs,
                             requests={"train": {"mem_mb": 64000}})  # fmt: skip
    assert totals["short"] == ["base-en-de"]  # 70,000 MiB measured against Slurm's --mem 64000 (MiB)
    assert rows[0]["host_memory_GiB"] == pytest.approx(70000 / 1024) and rows[1]["host_memory_GiB"] == 9000 / 1024
    assert rows[0]["requested_GiB"] == pytest.approx(62.5)
    text = plan.document(rows, totals)
    assert "Ask for more memory: base-en-de" in text and "host_memory_GiB" in text and "requested_GiB" in text
    assert [r["short"] for r in rows] == ["yes", "no"]
    rows, totals = plan.plan([paper["base-en-de"], paper["t3-A-h1"]], gpu="H100", gpus=8, costs=costs,
                             requests={"train": {"mem_mb": 64000}})  # fmt: skip
    assert "host_memory_GiB blank for t3-A-h1: no rehearsal record" in plan.document(rows, totals)


def test_a_nodes_memory_is_each_trainer_process_times_the_processes(paper, tmp_path):
    """8 trainer processes of 7.09 GiB each (the rehearsal's peak RSS is one process's) on one node
    need 56.7 GiB, not the 7.09 that passed against a request of 15.62 GiB; a failed start's row (its
    low peak) never stands for the job's good one."""
    costs = tmp_path / "cost.csv"
    costs.write_text("rule,job,exit,max_rss_mib\ntrain,base-en-de,0,7260\ntrain,base-en-de,1,300\n")
    rows, totals = plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, costs=costs,
                             requests={"train": {"mem_mb": 16000}})  # fmt: skip
    assert rows[0]["host_memory_GiB"] == pytest.approx(8 * 7260 / 1024) and totals["short"] == ["base-en-de"]
    rows, _ = plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, nodes=4, costs=costs)
    assert rows[0]["host_memory_GiB"] == pytest.approx(2 * 7260 / 1024)  # 2 processes a node


@pytest.mark.parametrize(
    "given, said",
    [
        ("folder", "not found|is a folder, where the rehearsal's cost table"),
        ("markdown", "not the rehearsal's cost table (its header"),
        ("empty", "not the rehearsal's cost table (its header None"),
        ("requests 64G", '--requests: train: {"mem_mb": "64G"} is not {resource: whole number}'),
        ("requests list", "--requests: train: \\[64000\\] is not"),
        ("requests of a rule misspelt", "--requests: 'trian' is no rule of the workflow"),
        ("bytes for MiB", "the train job base-en-de's peak memory 5400000000000.0 MiB is not in [0, 2^24]"),
        ("benchmark folder", "--benchmark {tmp}/gpu: a folder, not benchmarks/gpu.py's JSON result"),
    ],
)
def test_what_the_plan_reads_is_read_as_data(paper, tmp_path, given, said):
    """A --costs that is a folder, the Markdown table or an empty file, and --requests that are not
    whole numbers, are refused in one line naming them, never taken as "no measurement"."""
    costs, requests, benchmark = tmp_path / "cost.csv", {"train": {"mem_mb": 64000}}, None
    if given == "folder":
        costs.mkdir()
    elif given == "markdown":
        costs.write_text("| rule | job | max_rss_mib |\n|---|---|---|\n| train | base-en-de | 7260 |\n")
    elif given == "empty":
        costs.write_text("")
    elif given == "bytes for MiB":
        costs.write_text("rule,job,max_rss_mib\ntrain,base-en-de,5400000000000\n")
    elif given == "benchmark folder":
        (benchmark := tmp_path / "gpu").mkdir()
    elif given == "requests of a rule misspelt":
        requests = {"trian": {"mem_mb": 64000}}
    else:
        requests = {"train": {"mem_mb": "64G"}} if given == "requests 64G" else {"train": [64000]}
        costs = None
    literal = given in ("requests of a rule misspelt", "bytes for MiB", "benchmark folder")
    with pytest.raises(UserError, match=re.escape(said.format(tmp=tmp_path)) if literal else
                       said.replace("(", "\\(").replace(")", "\\)")):  # fmt: skip
        plan.plan([paper["base-en-de"]], gpu="H100", gpus=8, costs=costs, requests=requests, benchmark=benchmark)


def test_a_benchmark_not_there_yet_is_said(paper, tmp_path):
    """The plan rule always passes benchmarks/gpu.json, there or not: where it is not, the plan takes the
    paper's MFU and says so, naming the path (a typo among them)."""
    said = []
    plan.write_plan([paper["base-en-de"]], tmp_path / "plan.md", gpu="H100", gpus=8, benchmark=tmp_path / "gpu.jsn",
                    log=said.append)  # fmt: skip
    assert f"--benchmark {tmp_path / 'gpu.jsn'}: no such file yet, the plan takes the paper's MFU" in said[0]


def test_the_command_prints_the_paper_studys_totals_for_p100_and_h100(tmp_path, capsys):
    for gpu in ("P100", "H100"):
        out = tmp_path / f"{gpu}.md"
        assert cli.main(["plan", "--config", str(ROOT / "config.yaml"), "--gpu-model", gpu, "--gpus", "8",
                         "--out", str(out)]) == 0  # fmt: skip
        text = out.read_text()
        assert f"Planned for 8 x {gpu} on 1 node(s) a training" in text
        assert text.count("| t3-") == 19 and "In total: 3.96e+19 model FLOPs" in text
        assert {"P100": "| paper, at fp32's rate |", "H100": "| paper, of H100's peak |"}[gpu] in text
    table = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| ")]
    wall = {row[0]: row[table[0].index("wall_hours")] for row in table[1:]}
    assert (wall["base-en-de"], wall["big-en-de"]) == ("0.12", "0.81")  # H100, the last planned
    p100 = (tmp_path / "P100.md").read_text()
    assert "| base-en-de " in p100 and "| 12.00 " in p100.split("| base-en-de ")[1].splitlines()[0]
    assert "| 84.00 " in p100.split("| big-en-de ")[1].splitlines()[0]
    assert cli.main(["plan", "--config", str(ROOT / "config.yaml"), "--gpu-model", "Voodoo2", "--gpus", "8",
                     "--out", str(tmp_path / "x.md")]) == 2  # fmt: skip
    assert "--gpu-model 'Voodoo2': no peak FLOP/s known" in capsys.readouterr().err


def test_the_plan_rule_takes_the_training_jobs_gpus_from_the_slurm_profile():
    run = snakemake("--profile", "slurm", "plan", "-n", "-p", "--set-resources", "train:mem_mb=99000")
    assert run.returncode == 0, run.stderr[-3000:]
    (job,) = [j for j in planned_jobs(run.stdout + run.stderr) if j["rule"] == "plan"]
    assert "--gpu-model P100 --gpus 8 --nodes 1" in job["shell"], job["shell"]
    assert '"train": {' in job["shell"] and '"mem_mb": 99000' in job["shell"]
    assert f"--benchmark {ROOT / 'benchmarks' / 'gpu.json'}" in job["shell"]  # where benchmarks/gpu.py writes
    # plan:gpu_model=H100 reaching the command: tests/test_readme.py (study_plan_h100), as README types it
