"""Arguments that work, for every command that writes a file (`WORKING`): what the fault and
settings tests give each command before they change one thing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import toy
from conftest import ROOT
from world import SGM, make_tar

from aiayn.data import generate
from aiayn.data.generate import EXAMPLE_FILES
from aiayn.io import OUTPUT_MARK


def prepare_world(w: Path) -> Path:
    """`build_world`'s world with what the commands read beside it: a score file, archives."""
    score = {"lines": 3, "tokenized_bleu": {"score": 12.5}, "sacrebleu": {"score": 11.0, "signature": "nrefs:1"}}
    (w / "score.json").write_text(json.dumps(score))
    make_tar(w / "dev.tgz", {"dev.xx.sgm": SGM.encode(), "dev.yy.sgm": SGM.encode()})
    make_tar(w / "corpus.tgz", {"x": b"one two\nthree\n", "y": b"eins zwei\ndrei\n"})
    generate.write_treebank_archive(w / "treebank.tgz", 2, {"02": 20})
    return w


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# command -> (its arguments, given the world and the output folder o; the options that are outputs)
WORKING = {
    "resolve": (lambda w, o: ["--settings", json.dumps(toy.settings()), "--out", o / "e.json"], ["--out"]),
    "download": (
        lambda w, o: ["--url", f"file://{w}/a.txt", "--sha256", sha(w / "a.txt"), "--out", o / "d.tgz"],
        ["--out"],
    ),
    "generate": (
        lambda w, o: ["--spec", '{"kind": "translation", "sizes": {"train": 30, "dev": 5}}', "--out", o / "g.tgz"],
        ["--out"],
    ),
    # a folder of files: each named as "option/file"
    "example-corpus": (
        lambda w, o: ["--out", o / "my-pair", "--train", "30", "--dev", "5", "--test", "5"],
        [f"--out/{name}" for pair in EXAMPLE_FILES.values() for name in pair],
    ),
    "prepare": (
        lambda w, o: [
            "--corpora",
            '[{"archive": "a", "src": "x", "tgt": "y"}]',
            "--archives",
            json.dumps({"a": str(w / "corpus.tgz")}),
            "--src",
            o / "t.src",
            "--tgt",
            o / "t.tgt",
            "--report",
            o / "r.json",
        ],  # fmt: skip
        ["--src", "--tgt", "--report"],
    ),
    "prepare-eval": (
        lambda w, o: [
            "--spec",
            '{"src": "dev.xx.sgm", "tgt": "dev.yy.sgm"}',
            "--name",
            "dev",
            "--archive",
            w / "dev.tgz",
            "--src",
            o / "d.src",
            "--tgt",
            o / "d.tgt",
        ],  # fmt: skip
        ["--src", "--tgt"],
    ),
    "prepare-treebank": (
        lambda w, o: [
            "--dataset",
            '{"task": "parsing", "train_sections": ["02"]}',
            "--split",
            "train",
            "--treebank-archive",
            w / "treebank.tgz",
            "--src",
            o / "w.src",
            "--tgt",
            o / "w.tgt",
            "--gold",
            o / "w.gold",
        ],  # fmt: skip
        ["--src", "--tgt", "--gold"],
    ),
    "vocab": (
        lambda w, o: [
            "--vocab",
            '{"size": 40, "input_sentence_size": 0}',
            "--train-src",
            w / "a.txt",
            "--train-tgt",
            w / "a.txt",
            "--out-src",
            o / "s.model",
            "--out-tgt",
            o / "t.model",
        ],  # fmt: skip
        ["--out-src", "--out-tgt"],
    ),
    "vocab-info": (
        lambda w, o: [
            "--vocab",
            '{"size": 60}',
            "--spm-src",
            w / "spm-a.model",
            "--spm-tgt",
            w / "spm-a.model",
            "--train-src",
            w / "a.txt",
            "--train-tgt",
            w / "a.txt",
            "--out",
            o / "v.json",
        ],  # fmt: skip
        ["--out"],
    ),
    "encode": (
        lambda w, o: [
            "--src",
            w / "a.txt",
            "--tgt",
            w / "a.txt",
            "--spm-src",
            w / "spm-a.model",
            "--spm-tgt",
            w / "spm-a.model",
            "--out",
            o / "x.bin",
        ],  # fmt: skip
        ["--out"],
    ),
    "check": (
        lambda w, o: ["--settings", w / "settings.json", "--train", w / "train.bin", "--out", o / "check.json"],
        ["--out"],
    ),
    "train": (
        lambda w, o: [
            "--settings",
            w / "settings.json",
            "--train",
            w / "train.bin",
            "--checkpoints",
            o / "checkpoints",
            "--out",
            o / "checkpoints" / "last.pt",
        ],  # fmt: skip
        ["--out"],
    ),
    "average": (
        lambda w, o: [
            "--checkpoints",
            w / "checkpoints",
            "--last",
            "1",
            "--interval",
            "4",
            "--final-step",
            "2",
            "--out",
            o / "avg.pt",
            "--record",
            o / "avg.json",
        ],  # fmt: skip
        ["--out", "--record"],
    ),
    "select": (
        lambda w, o: [
            "--candidates",
            json.dumps(
                [
                    {
                        "name": "c",
                        "setting": {},
                        "score": str(w / "score.json"),
                        "model": str(w / "model.pt"),
                        "metrics": str(w / "metrics.jsonl"),
                    }
                ]
            ),
            "--out-model",
            o / "last.pt",
            "--out-metrics",
            o / "m.jsonl",
            "--record",
            o / "sel.json",
        ],
        ["--out-model", "--out-metrics", "--record"],
    ),  # fmt: skip
    "translate": (
        lambda w, o: [
            "--model",
            w / "model.pt",
            "--input",
            w / "ref.txt",
            "--spm-src",
            w / "spm-a.model",
            "--spm-tgt",
            w / "spm-a.model",
            "--out",
            o / "out.txt",
        ],  # fmt: skip
        ["--out"],
    ),
    "score": (lambda w, o: ["--hyp", w / "a.txt", "--ref", w / "a.txt", "--out", o / "s.json"], ["--out"]),
    "table1": (
        lambda w, o: [
            "--settings",
            '{"d_model": 16, "n": [8, 16], "d": [8, 16], "r": 2, "path_n": [8], "repeats": 1}',
            "--out-md",
            o / "t1.md",
            "--out-csv",
            o / "t1.csv",
            "--out-html",
            o / "t1.html",
            "--figure",
            o / "t1.png",
        ],  # fmt: skip
        ["--out-md", "--out-csv", "--out-html", "--figure"],
    ),
    "tables": (
        lambda w, o: [
            "--table",
            "3",
            "--experiments",
            "[]",
            "--results",
            w,
            "--out-md",
            o / "t.md",
            "--out-csv",
            o / "t.csv",
        ],  # fmt: skip
        ["--out-md", "--out-csv"],
    ),
    "figures": (
        lambda w, o: [
            "--name",
            "x",
            "--metrics",
            w / "metrics.jsonl",
            "--model",
            w / "model.pt",
            "--spm-src",
            w / "spm-a.model",
            "--dev-src",
            w / "a.txt",
            "--curves",
            o / "c.png",
            "--lr-plot",
            o / "lr.png",
            "--attention",
            o / "a.png",
            "--spm-tgt",
            w / "spm-a.model",
            "--dev-tgt",
            w / "a.txt",
            "--cross-attention",
            o / "x.png",
            "--diagonal",
            o / "d.json",
        ],  # fmt: skip
        ["--curves", "--lr-plot", "--attention", "--cross-attention", "--diagonal"],
    ),
    "plan": (
        lambda w, o: ["--config", ROOT / "config.yaml", "--gpu-model", "H100", "--gpus", "8", "--out", o / "plan.md"],
        ["--out"],
    ),
}
# what runs twice gives the same bytes (training, averaging and timing give the same model or table,
# not the same file: a checkpoint names its temporary file inside, Table 1 holds times)
SAME_BYTES = set(WORKING) - {"train", "average", "table1"}
NO_OUTPUT = {"evalb", "params", "export"}  # export: tests/test_export.py (it needs the export extra)
# export takes settings too (--decode), read before it needs its extra
EXPORT = (
    lambda w, o: [
        "--model",
        w / "model.pt",
        "--spm-src",
        w / "spm-a.model",
        "--spm-tgt",
        w / "spm-a.model",
        "--out",
        o / "hf",
    ],  # fmt: skip
    ["--out"],
)


def argv(command: str, w: Path, o: Path) -> list[str]:
    return [command, *map(str, (EXPORT if command == "export" else WORKING[command])[0](w, o))]


def outputs(command: str, w: Path, o: Path, *, marked: bool = False) -> list[Path]:
    """The files `command` writes: each option's value, or "option/file": a file in that folder.
    `marked`: a folder of such files made and marked as the command's own (OUTPUT_MARK), as its
    earlier run would leave it (a folder without the mark is someone else's, refused whole)."""
    args = WORKING[command][0](w, o)
    found = []
    for name in WORKING[command][1]:
        opt, _, inside = name.partition("/")
        folder = Path(args[args.index(opt) + 1])
        if inside and marked:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / OUTPUT_MARK).write_text("")
        found.append(folder / inside if inside else folder)
    return found
