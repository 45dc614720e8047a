"""Arguments that work, for every command (`ARGS`; `WORKING`: those of the commands that write a
file): what the fault, settings, output and bad-input tests give each command before they change
one thing."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import toy
from conftest import ROOT
from world import SGM, make_tar

from aiayn import cli
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


def world(name: str):
    return lambda w, o: w / name


def out(name: str):
    return lambda w, o: o / name


# each command's arguments that work (an option by its name as a keyword, a value: a string, or a
# function of the world w and the output folder o): what the fault, settings, output and bad-input
# tests give each command before they change one thing
ARGS = {
    "resolve": {"settings": json.dumps(toy.settings()), "out": out("e.json")},
    "download": {"url": lambda w, o: f"file://{w}/a.txt", "sha256": lambda w, o: sha(w / "a.txt"), "out": out("d.tgz")},
    "generate": {"spec": '{"kind": "translation", "sizes": {"train": 30, "dev": 5}}', "out": out("g.tgz")},
    "example-corpus": {"out": out("my-pair"), "train": "30", "dev": "5", "test": "5"},
    "prepare": {
        "corpora": '[{"archive": "a", "src": "x", "tgt": "y"}]',
        "archives": lambda w, o: json.dumps({"a": str(w / "corpus.tgz")}),
        "src": out("train.src"),
        "tgt": out("train.tgt"),
        "report": out("report.json"),
    },
    "prepare-eval": {
        "spec": '{"src": "dev.xx.sgm", "tgt": "dev.yy.sgm"}',
        "name": "dev",
        "archive": world("dev.tgz"),
        "src": out("dev.src"),
        "tgt": out("dev.tgt"),
    },
    "prepare-treebank": {
        "dataset": '{"task": "parsing", "train_sections": ["02"]}',
        "split": "train",
        "treebank_archive": world("treebank.tgz"),
        "src": out("w.src"),
        "tgt": out("w.tgt"),
        "gold": out("w.gold"),
    },
    "vocab": {
        "vocab": '{"size": 40, "input_sentence_size": 0}',
        "train_src": world("a.txt"),
        "train_tgt": world("a.txt"),
        "out_src": out("spm.src.model"),
        "out_tgt": out("spm.tgt.model"),
    },
    "vocab-info": {
        "vocab": '{"size": 60}',
        "spm_src": world("spm-a.model"),
        "spm_tgt": world("spm-a.model"),
        "train_src": world("a.txt"),
        "train_tgt": world("a.txt"),
        "out": out("v.json"),
    },
    "encode": {
        "src": world("a.txt"),
        "tgt": world("a.txt"),
        "spm_src": world("spm-a.model"),
        "spm_tgt": world("spm-a.model"),
        "out": out("x.bin"),
    },
    "check": {"settings": world("settings.json"), "train": world("train.bin"), "out": out("check.json")},
    "train": {
        "settings": world("settings.json"),
        "train": world("train.bin"),
        "checkpoints": out("c"),
        "out": out("last.pt"),
    },  # fmt: skip
    "average": {
        "checkpoints": world("checkpoints"),
        "last": "1",
        "interval": "4",
        "final_step": "2",
        "out": out("avg.pt"),
        "record": out("avg.json"),
    },  # fmt: skip
    "select": {
        "candidates": lambda w, o: json.dumps(
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
        "out_model": out("last.pt"),
        "out_metrics": out("m.jsonl"),
        "record": out("selected.json"),
    },
    "translate": {
        "model": world("model.pt"),
        "input": world("ref.txt"),
        "spm_src": world("spm-a.model"),
        "spm_tgt": world("spm-a.model"),
        "out": out("out.txt"),
    },
    "score": {"hyp": world("a.txt"), "ref": world("a.txt"), "out": out("s.json")},
    "table1": {
        "settings": '{"d_model": 16, "n": [8, 16], "d": [8, 16], "r": 2, "path_n": [8], "repeats": 1}',
        "out_md": out("t1.md"),
        "out_csv": out("t1.csv"),
        "out_html": out("t1.html"),
        "figure": out("t1.png"),
    },
    "tables": {
        "table": "3",
        "experiments": "[]",
        "results": lambda w, o: w,
        "out_md": out("t.md"),
        "out_csv": out("t.csv"),
    },  # fmt: skip
    "figures": {
        "name": "x",
        "metrics": world("metrics.jsonl"),
        "model": world("model.pt"),
        "spm_src": world("spm-a.model"),
        "dev_src": world("a.txt"),
        "curves": out("c.png"),
        "lr_plot": out("lr.png"),
        "attention": out("a.png"),
        "spm_tgt": world("spm-a.model"),
        "dev_tgt": world("a.txt"),
        "cross_attention": out("x.png"),
        "diagonal": out("d.json"),
    },
    # export takes settings too (--decode), read before it needs its extra
    "export": {
        "model": world("model.pt"),
        "spm_src": world("spm-a.model"),
        "spm_tgt": world("spm-a.model"),
        "out": out("hf"),
    },  # fmt: skip
    "evalb": {"gold": world("ref.txt"), "test": world("ref.txt")},
    "params": {"config": str(ROOT / "config.yaml")},
    "plan": {"config": str(ROOT / "config.yaml"), "gpu_model": "H100", "gpus": "8", "out": out("plan.md")},
}
POSITIONAL = {"evalb": ("gold", "test")}
NO_OUTPUT = {"evalb", "params", "export"}  # export: tests/test_export.py (it needs the export extra)


def option(command: str, key: str) -> str:
    """How an argument of ARGS is given: `--key-as-typed`, or a positional argument's name."""
    return key if key in POSITIONAL.get(command, ()) else f"--{key.replace('_', '-')}"


def arguments(command: str, w: Path, o: Path, **changes) -> list[str]:
    """The argv of `command` (without its name): its ARGS with `changes` over them (None drops one)."""
    found = []
    for key, value in {**ARGS[command], **changes}.items():
        value = value(w, o) if callable(value) else value
        if value is not None:
            found += [str(value)] if key in POSITIONAL.get(command, ()) else [option(command, key), str(value)]
    return found


def options_given(command: str) -> set[str]:
    """The options (and positional arguments) the working arguments of `command` give."""
    return {option(command, key) for key in ARGS[command]}


def output_options(command: str) -> list[str]:
    """The outputs of `command`'s working arguments (the inventory's): each option, or "option/file"
    for a file of the folder it writes whole (example-corpus's)."""
    checks, found = cli.options(command), []
    for given in map(functools.partial(option, command), ARGS[command]):
        kind = checks[given].kind if given in checks else ""
        if kind == "output":
            found.append(given)
        elif kind == "output folder":
            found += [f"{given}/{name}" for pair in EXAMPLE_FILES.values() for name in pair]
    return found


# command -> (its arguments, given the world and the output folder o; the options that are outputs)
WORKING = {c: (functools.partial(arguments, c), output_options(c)) for c in ARGS if c not in NO_OUTPUT}
# what runs twice gives the same bytes (training, averaging and timing give the same model or table,
# not the same file: a checkpoint names its temporary file inside, Table 1 holds times)
SAME_BYTES = set(WORKING) - {"train", "average", "table1"}


def argv(command: str, w: Path, o: Path) -> list[str]:
    return [command, *arguments(command, w, o)]


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
