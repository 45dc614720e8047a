"""Checkpoint averaging against a hand-computed mean; both BLEU protocols against hand and the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, real_data, sacrebleu_cli

from aiayn.errors import UserError
from aiayn.evaluation.score import bleu_scores, compound_split, paper_tokenize
from aiayn.runtime import checkpoint
from aiayn.training.average import average, newest_on_grid


def fake_checkpoint(path, step, value, config=None, vocab="v1"):
    payload = {
        "model_config": config or {"d_model": 2},
        "model": {"w": torch.full((2, 2), float(value)), "b": torch.tensor([value, -value])},
        "step": step,
        "vocab": {"src": vocab, "tgt": vocab},
    }
    checkpoint.save(payload, path)


def test_average_of_the_last_k(tmp_path):
    for step, value in ((100, 1.0), (200, 2.0), (300, 4.0), (400, 9.0)):
        fake_checkpoint(tmp_path / f"checkpoint_{step:07d}.pt", step, value)
    paths = newest_on_grid(tmp_path, 3, 100, 400)
    assert [p.name for p in paths] == ["checkpoint_0000200.pt", "checkpoint_0000300.pt", "checkpoint_0000400.pt"]
    result = average(paths)
    assert torch.equal(result["model"]["w"], torch.full((2, 2), 5.0))  # (2 + 4 + 9) / 3
    assert torch.equal(result["model"]["b"], torch.tensor([5.0, -5.0]))
    assert result["averaged_steps"] == [200, 300, 400]


def test_only_grid_checkpoints_are_averaged(tmp_path):
    """A checkpoint written on a stop signal (step 250, off the grid of 100) is for resuming only: the
    average is of evenly spaced checkpoints, plus the final step (430, not a multiple of 100)."""
    for step in (100, 200, 250, 300, 400, 430):
        fake_checkpoint(tmp_path / f"checkpoint_{step:07d}.pt", step, float(step))
    paths = newest_on_grid(tmp_path, 3, 100, 430)
    assert [p.name for p in paths] == ["checkpoint_0000300.pt", "checkpoint_0000400.pt", "checkpoint_0000430.pt"]
    paths = newest_on_grid(tmp_path, 4, 100, 1000)  # training not done: 430 is off the grid too
    assert [p.name for p in paths] == [f"checkpoint_{s:07d}.pt" for s in (100, 200, 300, 400)]
    with pytest.raises(UserError, match="steps 250, 430 are off that grid: written on a stop signal, or under another"):
        newest_on_grid(tmp_path, 5, 100, 1000)  # (a checkpoint_interval changed after training: 250 and 430 said)
    with pytest.raises(UserError, match="must be at least 1, got 0"):
        newest_on_grid(tmp_path, 0, 100, 430)


def test_average_refuses_mismatched_checkpoints(tmp_path):
    fake_checkpoint(tmp_path / "checkpoint_0000001.pt", 1, 1.0)
    fake_checkpoint(tmp_path / "checkpoint_0000002.pt", 2, 1.0, config={"d_model": 4})
    with pytest.raises(UserError, match="checkpoint_0000002.pt has another model"):
        average(newest_on_grid(tmp_path, 2, 1, 2))
    fake_checkpoint(tmp_path / "checkpoint_0000002.pt", 2, 1.0, vocab="v2")
    with pytest.raises(UserError, match="checkpoint_0000002.pt has another source vocabulary"):
        average(newest_on_grid(tmp_path, 2, 1, 2))
    with pytest.raises(UserError, match="2 step checkpoint\\(s\\) every 1 updates, 5 are to be averaged"):
        newest_on_grid(tmp_path, 5, 1, 2)


def test_average_command_writes_a_loadable_model(tmp_path):
    import toy

    assert toy.train_in_process(tmp_path, toy.settings(steps=8, checkpoint_interval=2)) == 0
    out = tmp_path / "average.pt"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "aiayn",
            "average",
            "--checkpoints",
            str(tmp_path / "checkpoints"),
            "--last",
            "3",
            "--interval",
            "2",
            "--final-step",
            "8",
            "--out",
            str(out),
            "--record",
            str(tmp_path / "average.json"),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    state = checkpoint.load(out)
    assert state["averaged_steps"] == [4, 6, 8]
    assert json.loads((tmp_path / "average.json").read_text())["steps"] == [4, 6, 8]
    states = [checkpoint.load(tmp_path / f"checkpoints/checkpoint_{s:07d}.pt")["model"] for s in (4, 6, 8)]
    for key, value in state["model"].items():
        torch.testing.assert_close(value, sum(s[key] for s in states) / 3)
    checkpoint.rebuild(state)


# -- scoring ---------------------------------------------------------------------------------------
def test_compound_split_as_the_perl_one_liner():
    assert (
        compound_split("state-of-the-art Kosten-Nutzen")
        == "state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art Kosten ##AT##-##AT## Nutzen"
    )
    assert compound_split("a - b --") == "a - b --"


def test_tokenized_bleu_by_hand():
    hyp = ["the quick brown fox jumps over the dog"]
    ref = ["the quick brown fox jumped over the lazy dog"]
    # n-gram matches: 7/8, 4/7, 2/6, 1/5; brevity penalty exp(1 - 9/8)
    want = (
        100
        * math.exp(1 - 9 / 8)
        * math.exp((math.log(7 / 8) + math.log(4 / 7) + math.log(2 / 6) + math.log(1 / 5)) / 4)
    )
    scores = bleu_scores(hyp, ref, moses_lang="en", compound_split=False, sacrebleu_tokenize="13a")
    assert scores["tokenized_bleu"]["score"] == pytest.approx(want, abs=1e-9)
    assert scores["tokenized_bleu"]["hyp_len"] == 8 and scores["tokenized_bleu"]["ref_len"] == 9


def test_moses_tokenization_reaches_bleu():
    hyp, ref = ["Das ist gut, oder?"], ["Das ist gut , oder ?"]
    assert paper_tokenize(hyp, "de", False) == ["Das ist gut , oder ?"]
    assert bleu_scores(hyp, ref, moses_lang="de", compound_split=False, sacrebleu_tokenize="13a")["tokenized_bleu"][
        "score"
    ] == pytest.approx(100)


def newstest2014_de():
    return real_data("wmt14", "en-de", "newstest2014.de")


def test_real_reference_against_itself_scores_100_and_counts_the_paper_tokens(tmp_path):
    path = newstest2014_de()
    from aiayn.runtime.lines import read_lines

    ref = list(read_lines(path))
    assert len(ref) == 3003  # the full newstest2014, not the 2737-line filtered one
    scores = bleu_scores(ref, ref, moses_lang="de", compound_split=True, sacrebleu_tokenize="13a")
    assert scores["sacrebleu"]["score"] == pytest.approx(100) and scores["tokenized_bleu"]["score"] == pytest.approx(
        100
    )
    assert scores["tokenized_bleu"]["ref_len"] == 64496  # paper.md: fairseq's reflen for this protocol
    assert scores["lines"] == 3003 and "tok:13a" in scores["sacrebleu"]["signature"]


def test_sacrebleu_equals_its_command_line(tmp_path):
    ref = newstest2014_de()
    from aiayn.runtime.lines import read_lines

    lines = list(read_lines(ref))
    hyp = [
        " ".join(line.split()[::-1]) if i % 3 == 0 else line.lower() for i, line in enumerate(lines)
    ]  # degraded output
    (tmp_path / "hyp.de").write_text("".join(h + "\n" for h in hyp), encoding="utf-8")
    # with -b, two metrics come as a JSON list
    bleu_cli, chrf_cli = json.loads(sacrebleu_cli(ref, tmp_path / "hyp.de", "bleu", "chrf"))
    ours = bleu_scores(hyp, lines, moses_lang="de", compound_split=True, sacrebleu_tokenize="13a")
    assert ours["sacrebleu"]["score"] == pytest.approx(bleu_cli, abs=1e-6)
    assert ours["chrf"]["score"] == pytest.approx(chrf_cli, abs=1e-6)
    assert 0 < ours["sacrebleu"]["score"] < 100


def test_score_command_checks_lines(tmp_path):
    (tmp_path / "hyp").write_text("a\nb\n")
    (tmp_path / "ref").write_text("a\nb\nc\n")
    base = [sys.executable, "-m", "aiayn", "score", "--hyp", str(tmp_path / "hyp"), "--out", str(tmp_path / "s.json")]
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": ""}
    run = subprocess.run([*base, "--ref", str(tmp_path / "ref")], capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "has 2 lines but" in run.stderr and not (tmp_path / "s.json").exists()
    (tmp_path / "hyp").write_text("the cat sat on the mat\nthe dog ran far away\n")
    (tmp_path / "ref").write_text("the cat sat on the mat\nthe dog ran far away\n")
    run = subprocess.run(
        [*base, "--ref", str(tmp_path / "ref"), "--expect-lines", "3003"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 2 and "has 2 lines, the test set has 3003" in run.stderr
    run = subprocess.run(
        [*base, "--ref", str(tmp_path / "ref"), "--scoring", json.dumps({"moses_lang": "en"})],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "s.json").read_text())["sacrebleu"]["score"] == pytest.approx(100)
