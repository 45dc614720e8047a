"""Selection on the dev set (§6.3): the best candidate by dev score becomes the experiment's model."""

from __future__ import annotations

import json
import zipfile

import pytest

from aiayn.cli import main
from aiayn.errors import UserError
from aiayn.evaluation.select import choose


def candidate(tmp_path, name, score, *, parse=True, dev_ppl=2.0):
    folder = tmp_path / name
    folder.mkdir()
    scores = {"f1": score, "precision": score, "recall": score, "sentences": 10, "error_sentences": 0}
    bleu = {"lines": 10, "tokenized_bleu": {"score": score}, "sacrebleu": {"score": score, "signature": "s"}}
    body = {"all": scores} if parse else bleu
    (folder / "dev.score.json").write_text(json.dumps(body))
    with zipfile.ZipFile(folder / "last.pt", "w") as model:  # a checkpoint's form: a zip, its CRCs checked
        model.writestr("data.pkl", name)
    (folder / "metrics.jsonl").write_text(json.dumps({"step": 1, "dev_ppl": dev_ppl}) + "\n")
    return {
        "name": name,
        "setting": {"P_drop": score / 100},
        "score": str(folder / "dev.score.json"),
        "model": str(folder / "last.pt"),
        "metrics": str(folder / "metrics.jsonl"),
    }


def test_the_best_dev_score_wins_and_the_first_of_equals(tmp_path):
    cands = [candidate(tmp_path, n, s) for n, s in (("a", 80.0), ("b", 88.5), ("c", 88.5), ("d", 10.0))]
    best, scored = choose(cands)
    assert best["name"] == "b" and [c["value"] for c in scored] == [80.0, 88.5, 88.5, 10.0]
    tied = candidate(tmp_path, "f", 88.5, dev_ppl=1.5)  # equal F1, lower dev perplexity
    assert choose([*cands, tied])[0]["name"] == "f"
    (bleu,) = [candidate(tmp_path, "e", 30.0, parse=False)]
    assert choose([bleu])[0]["metric"] == "bleu"


def test_select_command_copies_the_winner_and_records_every_candidate(tmp_path, capsys):
    cands = [candidate(tmp_path, n, s) for n, s in (("a", 80.0), ("b", 88.5))]
    out = tmp_path / "parse"
    assert (
        main(
            [
                "select",
                "--candidates",
                json.dumps(cands),
                "--out-model",
                str(out / "last.pt"),
                "--out-metrics",
                str(out / "metrics.jsonl"),
                "--record",
                str(out / "selected.json"),
            ]
        )
        == 0
    )
    assert (out / "last.pt").read_bytes() == (tmp_path / "b" / "last.pt").read_bytes()
    assert (out / "metrics.jsonl").read_text() == (tmp_path / "b" / "metrics.jsonl").read_text()
    record = json.loads((out / "selected.json").read_text())
    assert record["selected"] == "b" and record["value"] == 88.5 and len(record["candidates"]) == 2
    assert "* b: dev f1 88.50" in capsys.readouterr().out


def test_a_broken_score_file_is_named(tmp_path):
    (c,) = [candidate(tmp_path, "a", 1.0)]
    (tmp_path / "a" / "dev.score.json").write_text("{")
    with pytest.raises(UserError, match="a/dev.score.json: not a readable score record .*; remove it and rerun score"):
        choose([c])
