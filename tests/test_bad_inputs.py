"""Every bad input a careless user, a flaky server or a broken disk gives a command: exit 2, one
line on stderr naming the file, key or line and what to do, no traceback, nothing under the final
output name. One row per case; a bad input found later is added as a row.

The commands run in-process (`aiayn.cli.main`), so a traceback is an exception escaping `main`.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import toy
from conftest import ROOT

from aiayn import cli
from aiayn.data import binary as encoded
from aiayn.training.trainer import RunFiles, Trainer, run

# -- a small world of real inputs, made once -----------------------------------------------------
WORDS = "the cat sat on a mat and dog ran far away from home to see big red ball in park".split()


def sentences(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def make_tar(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Text, two unrelated sentencepiece vocabularies, encoded data and a trained checkpoint."""
    from aiayn.data import vocab
    from aiayn.data.encode import encode_corpus

    w = tmp_path_factory.mktemp("world")
    (w / "a.txt").write_text("\n".join(sentences(300, 1)) + "\n")
    (w / "b.txt").write_text("\n".join(s.upper() + " xyzzy" for s in sentences(300, 2)) + "\n")
    for name, text in (("spm-a", "a.txt"), ("spm-b", "b.txt")):
        vocab.train([str(w / text)], w / f"{name}.model", model_type="bpe", size=60, input_sentence_size=0)
    encode_corpus(
        str(w / "a.txt"), str(w / "a.txt"), str(w / "spm-a.model"), str(w / "spm-a.model"), str(w / "train.bin")
    )
    settings = toy.settings(steps=2)
    train = encoded.read(w / "train.bin")
    files = RunFiles(w / "checkpoints", w / "model.pt", w / "metrics.jsonl")
    assert (
        run(Trainer({**settings, "vocab": {**settings["vocab"], "shared": True}}, train, None, files, _env()), 0) == 0
    )
    encode_corpus(
        str(w / "b.txt"), str(w / "b.txt"), str(w / "spm-b.model"), str(w / "spm-b.model"), str(w / "dev-b.bin")
    )
    (w / "empty.txt").write_text("")
    (w / "ref.txt").write_text("the cat sat\n")
    (w / "settings.json").write_text(json.dumps(settings))
    return w


def _env():
    from aiayn.training.distributed import Env

    return Env()


@dataclass
class Case:
    id: str
    argv: callable  # (world, tmp) -> argv
    says: str  # a fragment of the one stderr line
    out: str | None = None  # an output that must not exist afterwards (relative to tmp)


def translate(w, tmp, *extra, model="model.pt", spm="spm-a", input_="a.txt"):
    return ["translate", "--model", str(w / model), "--input", str(w / input_ if "/" not in input_ else input_),
            "--spm-src", str(w / f"{spm}.model"), "--spm-tgt", str(w / f"{spm}.model"), "--out", str(tmp / "out.txt"),
            *extra]  # fmt: skip


def write(tmp: Path, name: str, data: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


GRID = ["--interval", "1", "--final-step", "2"]

CASES = [
    # -- translate ---------------------------------------------------------------------------------
    Case(
        "translate: vocabularies of another dataset",
        lambda w, t: translate(w, t, spm="spm-b"),
        "spm-b.model is not the source vocabulary",
        "out.txt",
    ),
    Case(
        "translate: beam 0",
        lambda w, t: translate(w, t, "--decode", '{"beam": 0}'),
        "--decode: beam must be a whole number >= 1",
        "out.txt",
    ),
    Case(
        "translate: alpha a string",
        lambda w, t: translate(w, t, "--decode", '{"alpha": "x"}'),
        "--decode: alpha must be a number",
        "out.txt",
    ),
    Case(
        "translate: unknown decode key",
        lambda w, t: translate(w, t, "--decode", '{"beem": 4}'),
        "--decode: unknown key 'beem'",
        "out.txt",
    ),
    Case(
        "translate: decode not JSON",
        lambda w, t: translate(w, t, "--decode", "{beam: 4"),
        "--decode is not valid JSON",
        "out.txt",
    ),
    Case(
        "translate: missing model",
        lambda w, t: translate(w, t, model="nope.pt"),
        "nope.pt: checkpoint not found",
        "out.txt",
    ),
    Case(
        "translate: model not a checkpoint",
        lambda w, t: translate(w, t, model="a.txt"),
        "a.txt: not a readable checkpoint",
        "out.txt",
    ),
    Case("translate: missing input", lambda w, t: translate(w, t, input_=str(t / "none.txt")), "none.txt", "out.txt"),
    Case(
        "translate: input not UTF-8",
        lambda w, t: translate(w, t, input_=str(write(t, "x.txt", b"ok\n\xff\xfe\n"))),
        "x.txt, line 2: not valid UTF-8",
        "out.txt",
    ),
    Case("translate: nbest 0", lambda w, t: translate(w, t, "--nbest", "0"), "--nbest must be >= 1", "out.txt"),
    Case(
        "translate: batch tokens 0",
        lambda w, t: translate(w, t, "--batch-tokens", "0"),
        "--batch-tokens must be >= 1",
        "out.txt",
    ),
    # -- score -------------------------------------------------------------------------------------
    Case(
        "score: two empty files",
        lambda w, t: [
            "score",
            "--hyp",
            str(w / "empty.txt"),
            "--ref",
            str(w / "empty.txt"),
            "--out",
            str(t / "s.json"),
        ],
        "empty.txt: no lines to score",
        "s.json",
    ),
    Case(
        "score: line counts differ",
        lambda w, t: ["score", "--hyp", str(w / "a.txt"), "--ref", str(w / "ref.txt"), "--out", str(t / "s.json")],
        "lines",
        "s.json",
    ),
    Case(
        "score: missing hypothesis",
        lambda w, t: ["score", "--hyp", str(t / "no.txt"), "--ref", str(w / "ref.txt"), "--out", str(t / "s.json")],
        "no.txt",
        "s.json",
    ),
    Case(
        "score: scoring not JSON",
        lambda w, t: [
            "score",
            "--hyp",
            str(w / "ref.txt"),
            "--ref",
            str(w / "ref.txt"),
            "--scoring",
            "[",
            "--out",
            str(t / "s.json"),
        ],
        "--scoring is not valid JSON",
        "s.json",
    ),
    # -- evalb -------------------------------------------------------------------------------------
    Case(
        "evalb: two empty files",
        lambda w, t: ["evalb", str(w / "empty.txt"), str(w / "empty.txt")],
        "empty.txt: no trees to score",
    ),
    Case("evalb: missing gold", lambda w, t: ["evalb", str(t / "gold.txt"), str(w / "empty.txt")], "gold.txt"),
    # -- average -----------------------------------------------------------------------------------
    Case(
        "average: --last 0",
        lambda w, t: [
            "average",
            "--checkpoints",
            str(w / "checkpoints"),
            "--last",
            "0",
            *GRID,
            "--out",
            str(t / "avg.pt"),
        ],
        "checkpoints to average must be at least 1",
        "avg.pt",
    ),
    Case(
        "average: --last -1",
        lambda w, t: [
            "average",
            "--checkpoints",
            str(w / "checkpoints"),
            "--last",
            "-1",
            *GRID,
            "--out",
            str(t / "avg.pt"),
        ],
        "checkpoints to average must be at least 1",
        "avg.pt",
    ),
    Case(
        "average: empty folder",
        lambda w, t: ["average", "--checkpoints", str(t), "--last", "2", *GRID, "--out", str(t / "avg.pt")],
        "0 step checkpoint(s) every 1 updates, 2 are to be averaged",
        "avg.pt",
    ),
    # -- train -------------------------------------------------------------------------------------
    Case(
        "train: settings lacking keys",
        lambda w, t: [
            "train",
            "--settings",
            str(write(t, "s.json", '{"name": "x"}')),
            "--train",
            str(w / "train.bin"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "s.json: the settings lack model, train, vocab",
        "last.pt",
    ),
    Case(
        "train: settings not JSON",
        lambda w, t: [
            "train",
            "--settings",
            str(write(t, "s.json", "{")),
            "--train",
            str(w / "train.bin"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "s.json is not valid JSON",
        "last.pt",
    ),
    Case(
        "train: training data not a corpus",
        lambda w, t: [
            "train",
            "--settings",
            str(w / "settings.json"),
            "--train",
            str(w / "a.txt"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "a.txt: not an encoded corpus",
        "last.pt",
    ),
    Case(
        "train: vocabulary not the data's",
        lambda w, t: [
            "train",
            "--settings",
            str(w / "settings.json"),
            "--train",
            str(w / "train.bin"),
            "--spm-src",
            str(w / "spm-b.model"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "spm-b.model is not the src vocabulary",
        "last.pt",
    ),
    # -- encode ------------------------------------------------------------------------------------
    Case(
        "encode: a line not UTF-8",
        lambda w, t: [
            "encode",
            "--src",
            str(write(t, "x.src", b"ok\nbad \xff\n")),
            "--tgt",
            str(write(t, "x.tgt", "ok\nfine\n")),
            "--spm-src",
            str(w / "spm-a.model"),
            "--spm-tgt",
            str(w / "spm-a.model"),
            "--out",
            str(t / "x.bin"),
        ],
        "x.src, line 2: not valid UTF-8",
        "x.bin",
    ),
    Case(
        "encode: sides of different length",
        lambda w, t: [
            "encode",
            "--src",
            str(write(t, "x.src", "a\nb\n")),
            "--tgt",
            str(write(t, "x.tgt", "a\n")),
            "--spm-src",
            str(w / "spm-a.model"),
            "--spm-tgt",
            str(w / "spm-a.model"),
            "--out",
            str(t / "x.bin"),
        ],
        "the two must align",
        "x.bin",
    ),
    Case(
        "encode: missing vocabulary",
        lambda w, t: [
            "encode",
            "--src",
            str(w / "a.txt"),
            "--tgt",
            str(w / "a.txt"),
            "--spm-src",
            str(t / "none.model"),
            "--spm-tgt",
            str(w / "spm-a.model"),
            "--out",
            str(t / "x.bin"),
        ],
        "none.model",
        "x.bin",
    ),
    Case(
        "encode: vocabulary not a model",
        lambda w, t: [
            "encode",
            "--src",
            str(w / "a.txt"),
            "--tgt",
            str(w / "a.txt"),
            "--spm-src",
            str(w / "a.txt"),
            "--spm-tgt",
            str(w / "spm-a.model"),
            "--out",
            str(t / "x.bin"),
        ],
        "a.txt: not a sentencepiece model",
        "x.bin",
    ),
    # -- generate ----------------------------------------------------------------------------------
    Case(
        "generate: unknown kind",
        lambda w, t: ["generate", "--spec", '{"kind": "nonsense", "sizes": {}}', "--out", str(t / "g.tgz")],
        "--spec: kind must be 'translation' or 'treebank'",
        "g.tgz",
    ),
    Case(
        "generate: no sizes",
        lambda w, t: ["generate", "--spec", '{"kind": "translation"}', "--out", str(t / "g.tgz")],
        "--spec: sizes",
        "g.tgz",
    ),
    # -- prepare-eval (archives, SGML) -------------------------------------------------------------
]


def prepare_eval(w, t, members: dict[str, bytes], spec: dict, links=None):
    archive = make_tar(t / "dev.tgz", members, links)
    return ["prepare-eval", "--spec", json.dumps(spec), "--name", "dev", "--archive", str(archive),
            "--src", str(t / "dev.src"), "--tgt", str(t / "dev.tgt")]  # fmt: skip


SGM = (
    '<srcset><doc docid="d">\n<seg id="1">one</seg>\n<seg id="2">two</seg>\n<seg id="3">three</seg>\n</doc></srcset>\n'
)
SPEC = {"src": "dev.xx.sgm", "tgt": "dev.yy.sgm"}
CASES += [
    Case(
        "prepare-eval: </seg> missing on both sides",
        lambda w, t: prepare_eval(w, t, {n: SGM.replace("two</seg>", "two").encode() for n in SPEC.values()}, SPEC),
        'dev.xx.sgm: segment 2 (<seg id="2">) has no </seg>',
        "dev.src",
    ),
    Case(
        "prepare-eval: </seg> missing on one side",
        lambda w, t: prepare_eval(
            w, t, {"dev.xx.sgm": SGM.encode(), "dev.yy.sgm": SGM.replace("two</seg>", "two").encode()}, SPEC
        ),  # noqa: E501
        'dev.yy.sgm: segment 2 (<seg id="2">) has no </seg>',
        "dev.src",
    ),
    Case(
        "prepare-eval: a member is a link",
        lambda w, t: prepare_eval(w, t, {"dev.xx.sgm": SGM.encode()}, SPEC, links={"dev.yy.sgm": "dev.xx.sgm"}),
        "member dev.yy.sgm is a link; links are refused",
        "dev.src",
    ),
    Case(
        "prepare-eval: a .gz member that is not gzip",
        lambda w, t: prepare_eval(
            w, t, {"d.xx.gz": b"plain text\n", "d.yy.gz": gzip.compress(b"x\n")}, {"src": "d.xx.gz", "tgt": "d.yy.gz"}
        ),
        "d.xx.gz: not a gzip file",
        "dev.src",
    ),
    Case(
        "prepare-eval: archive not a tar",
        lambda w, t: [
            "prepare-eval",
            "--spec",
            json.dumps(SPEC),
            "--name",
            "dev",
            "--archive",
            str(w / "a.txt"),
            "--src",
            str(t / "dev.src"),
            "--tgt",
            str(t / "dev.tgt"),
        ],
        "a.txt: not a readable archive",
        "dev.src",
    ),
    Case(
        "prepare-eval: member missing",
        lambda w, t: prepare_eval(w, t, {"dev.xx.sgm": SGM.encode()}, SPEC),
        "has no member dev.yy.sgm",
        "dev.src",
    ),
]


def config_text(w: Path, t: Path, mutate=None, text: str | None = None) -> Path:
    """The project's config.yaml, changed by `mutate` (or replaced by `text`), written to t/config.yaml."""
    import yaml

    path = t / "config.yaml"
    if text is not None:
        path.write_text(text)
        return path
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    mutate(config)
    path.write_text(yaml.safe_dump(config))
    return path


def tables(w, t, *extra):
    return ["tables", "--table", "2", "--results", str(t / "results"), "--out-md", str(t / "t.md"), *extra]


def corrupt_score(w, t, text='{"tokenized_bleu": '):
    (t / "results" / "base").mkdir(parents=True)
    (t / "results" / "base" / "newstest2014.score.json").write_text(text)
    spec = [{"name": "base", "row": "base", "dataset": "d", "testset": "newstest2014", "model": {}, "steps": 10,
             "average": 1, "paper": {}, "preset": "base", "task": "translation", "train": {}}]  # fmt: skip
    return tables(w, t, "--experiments", json.dumps(spec))


def prepare(w, t, corpora='[{"archive": "a", "src": "x", "tgt": "y"}]', archives=None, cleaning=None):
    archives = archives or json.dumps({"a": str(make_tar(t / "a.tgz", {"x": b"one\n", "y": b"eins\n"}))})
    return ["prepare", "--corpora", corpora, "--archives", archives, "--src", str(t / "train.src"),
            "--tgt", str(t / "train.tgt"), "--report", str(t / "report.json"),
            *(["--cleaning", cleaning] if cleaning else [])]  # fmt: skip


def vocab_cmd(w, t, spec='{"model_type": "bpe", "size": 40, "shared": true, "input_sentence_size": 0}', src=None):
    return ["vocab", "--vocab", spec, "--train-src", str(src or w / "a.txt"), "--train-tgt", str(w / "a.txt"),
            "--out-src", str(t / "spm.src.model"), "--out-tgt", str(t / "spm.tgt.model")]  # fmt: skip


def treebank(w, t, dataset):
    return ["prepare-treebank", "--dataset", json.dumps(dataset), "--split", "train", "--src", str(t / "w.src"),
            "--tgt", str(t / "w.tgt"), "--gold", str(t / "w.gold")]  # fmt: skip


def select(w, t, candidates):
    return ["select", "--candidates", candidates, "--out-model", str(t / "last.pt"),
            "--out-metrics", str(t / "m.jsonl"), "--record", str(t / "selected.json")]  # fmt: skip


def set_key(path: str, value):
    def mutate(config):
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


CASES += [
    # -- config (read by tables --config and params --config) --------------------------------------
    Case(
        "config: YAML syntax error",
        lambda w, t: ["params", "--config", str(config_text(w, t, text="a: [1, 2\nb: 3\n"))],
        "config.yaml, line 2, column 2: not valid YAML",
    ),
    Case(
        "config: not a mapping",
        lambda w, t: ["params", "--config", str(config_text(w, t, text="- a\n- b\n"))],
        "expected a mapping of settings at the top level",
    ),
    Case(
        "config: missing file",
        lambda w, t: ["params", "--config", str(t / "nope.yaml")],
        "nope.yaml: config file not found",
    ),
    Case(
        "config: unknown top-level key",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("trainnig", {})))],
        "trainnig",
    ),
    Case(
        "config: misspelt training key",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("training.warmup", 4000)))],
        "warmup",
    ),
    Case(
        "config: steps a string",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("training.steps", "many")))],
        "training.steps",
    ),
    Case(
        "config: unknown preset",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("experiments.base-en-de.preset", "huge")))],
        "huge",
    ),
    Case(
        "config: unknown dataset",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("experiments.base-en-de.dataset", "wmt99")))],
        "wmt99",
    ),
    Case(
        "config: archive without sha256",
        lambda w, t: [
            "params",
            "--config",
            str(config_text(w, t, set_key("archives.europarl-v7", {"url": "http://h/x.tgz"}))),
        ],
        "archives.europarl-v7: needs url and sha256",
    ),
    Case(
        "config: table 5",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("experiments.base-en-de.tables", [5])))],
        "tables",
    ),
    Case(
        "config: odd d_model with sinusoids",
        lambda w, t: [
            "params",
            "--config",
            str(config_text(w, t, set_key("experiments.base-en-de.model", {"d_model": 511}))),
        ],
        "d_model",
    ),
    Case(
        "config: averaging more than kept",
        lambda w, t: ["params", "--config", str(config_text(w, t, set_key("experiments.big-en-de.average", 50)))],
        "keep at least as many",
    ),
    Case(
        "config: tables --config with a syntax error",
        lambda w, t: ["tables", "--table", "2", "--config", str(config_text(w, t, text="results: [\n"))],
        "config.yaml, line 2, column 1: not valid YAML",
    ),
    Case(
        "config: params of an unknown experiment",
        lambda w, t: ["params", "--experiment", "base-en-xx", "--config", str(ROOT / "config.yaml")],
        "base-en-xx",
    ),
    # -- tables ------------------------------------------------------------------------------------
    Case("tables: a corrupt score file", corrupt_score, "newstest2014.score.json: not a readable record", "t.md"),
    Case(
        "tables: a score file of another kind",
        lambda w, t: corrupt_score(w, t, "[1, 2]"),
        "newstest2014.score.json: not a record of this pipeline",
        "t.md",
    ),
    Case(
        "tables: experiments lacking keys",
        lambda w, t: tables(w, t, "--experiments", '[{"name": "base"}]'),
        "--experiments: experiment base lacks row, dataset, testset",
        "t.md",
    ),
    Case(
        "tables: experiments not a list",
        lambda w, t: tables(w, t, "--experiments", '{"name": "base"}'),
        "--experiments: expected a JSON list",
        "t.md",
    ),
    Case("tables: neither experiments nor config", lambda w, t: tables(w, t), "give --experiments", "t.md"),
    Case("tables: table 5", lambda w, t: ["tables", "--table", "5"], "invalid choice: 5"),
    # -- prepare -----------------------------------------------------------------------------------
    Case(
        "prepare: corpora not JSON", lambda w, t: prepare(w, t, corpora="["), "--corpora is not valid JSON", "train.src"
    ),
    Case(
        "prepare: archive missing",
        lambda w, t: prepare(w, t, archives=json.dumps({"a": str(t / "none.tgz")})),
        "none.tgz",
        "train.src",
    ),
    Case(
        "prepare: member missing",
        lambda w, t: prepare(w, t, corpora='[{"archive": "a", "src": "x", "tgt": "z"}]'),
        "has no member z",
        "train.src",
    ),
    Case(
        "prepare: unknown archive name",
        lambda w, t: prepare(w, t, corpora='[{"archive": "b", "src": "x", "tgt": "y"}]'),
        "'b'",
        "train.src",
    ),
    Case(
        "prepare: an archive member not UTF-8",
        lambda w, t: prepare(
            w, t, archives=json.dumps({"a": str(make_tar(t / "a.tgz", {"x": b"one\n\xff\n", "y": b"eins\nzwei\n"}))})
        ),
        "x, line 2: not valid UTF-8",
        "train.src",
    ),
    Case(
        "prepare: sides misaligned",
        lambda w, t: prepare(
            w, t, archives=json.dumps({"a": str(make_tar(t / "a.tgz", {"x": b"one\ntwo\n", "y": b"eins\n"}))})
        ),
        "misaligned",
        "train.src",
    ),
    Case(
        "prepare: cleaning not JSON",
        lambda w, t: prepare(w, t, cleaning="{"),
        "--cleaning is not valid JSON",
        "train.src",
    ),
    Case(
        "prepare: an archive with an unsafe member",
        lambda w, t: prepare(
            w, t, archives=json.dumps({"a": str(make_tar(t / "a.tgz", {"x": b"1\n", "y": b"1\n", "../evil": b"x"}))})
        ),
        "is unsafe",
        "train.src",
    ),
    # -- vocab -------------------------------------------------------------------------------------
    Case("vocab: spec not JSON", lambda w, t: vocab_cmd(w, t, spec="{"), "--vocab is not valid JSON", "spm.src.model"),
    Case("vocab: missing training text", lambda w, t: vocab_cmd(w, t, src=t / "none.txt"), "none.txt", "spm.src.model"),
    Case("vocab: empty training text", lambda w, t: vocab_cmd(w, t, src=w / "empty.txt"), "empty.txt", "spm.src.model"),
    # -- prepare-treebank --------------------------------------------------------------------------
    Case(
        "prepare-treebank: no treebank set",
        lambda w, t: treebank(w, t, {"task": "parsing", "treebank": None, "train_sections": ["02"]}),
        "treebank is not set",
        "w.src",
    ),
    Case(
        "prepare-treebank: treebank folder missing",
        lambda w, t: treebank(w, t, {"task": "parsing", "treebank": str(t / "ptb"), "train_sections": ["02"]}),
        "ptb",
        "w.src",
    ),
    Case(
        "prepare-treebank: dataset not JSON",
        lambda w, t: [
            "prepare-treebank",
            "--dataset",
            "{",
            "--split",
            "train",
            "--src",
            str(t / "w.src"),
            "--tgt",
            str(t / "w.tgt"),
            "--gold",
            str(t / "w.gold"),
        ],
        "--dataset is not valid JSON",
        "w.src",
    ),
    # -- resolve, select, download, figures ---------------------------------------------------------
    Case(
        "resolve: settings not JSON",
        lambda w, t: ["resolve", "--settings", "{", "--out", str(t / "e.json")],
        "--settings is not valid JSON",
        "e.json",
    ),
    Case("select: candidates not JSON", lambda w, t: select(w, t, "{"), "--candidates is not valid JSON", "last.pt"),
    Case(
        "select: a candidate's score missing",
        lambda w, t: select(
            w,
            t,
            json.dumps(
                [
                    {
                        "name": "c1",
                        "setting": {},
                        "score": str(t / "c1.json"),
                        "model": str(w / "model.pt"),
                        "metrics": str(w / "metrics.jsonl"),
                    }
                ]
            ),
        ),
        "c1.json",
        "last.pt",
    ),
    Case(
        "download: missing mirror file",
        lambda w, t: ["download", "--url", f"file://{t}/none.tgz", "--sha256", "0" * 64, "--out", str(t / "d.tgz")],
        "none.tgz: not found",
        "d.tgz",
    ),
    Case(
        "download: wrong checksum",
        lambda w, t: ["download", "--url", f"file://{w}/a.txt", "--sha256", "0" * 64, "--out", str(t / "d.tgz")],
        "config.yaml expects 0000",
        "d.tgz",
    ),
    Case(
        "download: wrong size",
        lambda w, t: [
            "download",
            "--url",
            f"file://{w}/a.txt",
            "--sha256",
            "0" * 64,
            "--size",
            "5",
            "--out",
            str(t / "d.tgz"),
        ],
        "config.yaml expects 5",
        "d.tgz",
    ),
    Case(
        "download: unreachable server",
        lambda w, t: [
            "download",
            "--url",
            "http://127.0.0.1:9/x.tgz",
            "--sha256",
            "0" * 64,
            "--retries",
            "0",
            "--wait",
            "0",
            "--out",
            str(t / "d.tgz"),
        ],
        "download failed after 1 attempts",
        "d.tgz",
    ),
    Case(
        "figures: metrics missing",
        lambda w, t: [
            "figures",
            "--name",
            "x",
            "--metrics",
            str(t / "m.jsonl"),
            "--model",
            str(w / "model.pt"),
            "--spm-src",
            str(w / "spm-a.model"),
            "--dev-src",
            str(w / "a.txt"),
            "--curves",
            str(t / "c.png"),
            "--lr-plot",
            str(t / "lr.png"),
            "--attention",
            str(t / "a.png"),
        ],
        "m.jsonl",
        "c.png",
    ),
    Case(
        "figures: a torn metrics line mid-file",
        lambda w, t: [
            "figures",
            "--name",
            "x",
            "--metrics",
            str(
                write(
                    t, "m.jsonl", '{"event": "start", "st\n{"step": 1, "dev_ppl": 2.0, "dev_nll": 1, "dev_loss": 1}\n'
                )
            ),
            "--model",
            str(w / "model.pt"),
            "--spm-src",
            str(w / "spm-a.model"),
            "--dev-src",
            str(w / "a.txt"),
            "--curves",
            str(t / "c.png"),
            "--lr-plot",
            str(t / "lr.png"),
            "--attention",
            str(t / "a.png"),
        ],
        "m.jsonl, line 1: not a JSON record; remove that line",
        "c.png",
    ),
    # -- more of the same commands -----------------------------------------------------------------
    Case(
        "train: a dev set of other vocabularies",
        lambda w, t: [
            "train",
            "--settings",
            str(w / "settings.json"),
            "--train",
            str(w / "train.bin"),
            "--dev",
            str(w / "dev-b.bin"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "dev-b.bin was encoded with another src vocabulary",
        "last.pt",
    ),
    Case(
        "train: settings file missing",
        lambda w, t: [
            "train",
            "--settings",
            str(t / "none.json"),
            "--train",
            str(w / "train.bin"),
            "--checkpoints",
            str(t / "c"),
            "--out",
            str(t / "last.pt"),
        ],
        "none.json: cannot read",
        "last.pt",
    ),
    Case("translate: unknown device", lambda w, t: translate(w, t, "--device", "gpu9"), "--device", "out.txt"),
    Case(
        "average: folder missing",
        lambda w, t: ["average", "--checkpoints", str(t / "none"), "--last", "2", *GRID, "--out", str(t / "avg.pt")],
        "none",
        "avg.pt",
    ),
    Case(
        "evalb: line counts differ",
        lambda w, t: [
            "evalb",
            str(write(t, "g.txt", "(S (NN a))\n(S (NN b))\n")),
            str(write(t, "p.txt", "(S (NN a))\n")),
        ],
        "p.txt",
    ),
    Case(
        "prepare-eval: spec not JSON",
        lambda w, t: [
            "prepare-eval",
            "--spec",
            "{",
            "--name",
            "dev",
            "--archive",
            str(w / "a.txt"),
            "--src",
            str(t / "dev.src"),
            "--tgt",
            str(t / "dev.tgt"),
        ],
        "--spec is not valid JSON",
        "dev.src",
    ),
    Case(
        "prepare-eval: archive missing",
        lambda w, t: [
            "prepare-eval",
            "--spec",
            json.dumps(SPEC),
            "--name",
            "dev",
            "--archive",
            str(t / "none.tgz"),
            "--src",
            str(t / "dev.src"),
            "--tgt",
            str(t / "dev.tgt"),
        ],
        "none.tgz",
        "dev.src",
    ),
    Case(
        "score: expected lines differ",
        lambda w, t: [
            "score",
            "--hyp",
            str(w / "ref.txt"),
            "--ref",
            str(w / "ref.txt"),
            "--expect-lines",
            "3003",
            "--out",
            str(t / "s.json"),
        ],
        "the test set has 3003",
        "s.json",
    ),
    Case(
        "tables: config with an unknown key",
        lambda w, t: ["tables", "--table", "2", "--config", str(config_text(w, t, set_key("scoring.bootstrap", 5)))],
        "bootstrap",
    ),
    # -- the command line itself -------------------------------------------------------------------
    Case("cli: unknown command", lambda w, t: ["trian"], "invalid choice: 'trian'"),
    Case("cli: missing required option", lambda w, t: ["score", "--hyp", "x"], "the following arguments are required"),
    Case(
        "cli: a number that is not one",
        lambda w, t: ["average", "--checkpoints", ".", "--last", "five", *GRID, "--out", "x"],
        "invalid int value: 'five'",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_clear_line(case, world, tmp_path, capsys):
    argv = case.argv(world, tmp_path)
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse: its own usage line, exit 2
        code = exc.code
    except BaseException as exc:  # noqa: BLE001
        pytest.fail(f"a traceback instead of one line: {type(exc).__name__}: {exc}")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 or (err and err[0].startswith("usage:")), err
    assert case.says in err[-1], err[-1]
    if case.out:
        assert not (tmp_path / case.out).exists(), f"{case.out} was left under its final name"


def test_a_line_longer_than_learned_positions_is_cut_and_said(world, tmp_path, capsys):
    """One overlong line must not fail the whole file (the right result, not an error): on a model
    with learned positions it is cut to the model's positions, and the log says which line."""
    settings = toy.settings(steps=1)
    settings["model"].update(positional="learned", max_positions=64)
    files = RunFiles(tmp_path / "c", tmp_path / "learned.pt", tmp_path / "m.jsonl")
    assert run(Trainer(settings, encoded.read(world / "train.bin"), None, files, _env()), 0) == 0
    long = " ".join(["the cat sat on a mat"] * 20)
    (tmp_path / "in.txt").write_text(f"the cat\n{long}\nred ball\n")
    argv = ["translate", "--model", str(tmp_path / "learned.pt"), "--input", str(tmp_path / "in.txt"),
            "--spm-src", str(world / "spm-a.model"), "--spm-tgt", str(world / "spm-a.model"),
            "--out", str(tmp_path / "out.txt")]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "in.txt, line 2:" in out and "cut to the model's 63 positions" in out
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 3
