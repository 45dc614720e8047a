"""Every bad input a careless user, a flaky server or a broken disk gives a command: exit 2, one
line on stderr naming the file, key or line and what to do, no traceback, nothing under the final
output name. One row per case, in the order of `aiayn.cli.COMMANDS`; a bad input found later is
added as a row of its command.

Each case runs one command in-process (`aiayn.cli.main`, so a traceback is an exception escaping
`main`), its argv built one way: `cmd(command, option=value, ...)` over the arguments that work
(tests/working.py), a value given as a function of (world, tmp) where it is a path of either.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import toy
import yaml
from conftest import ROOT
from working import arguments, prepare_world
from world import SGM, build_world, make_tar

from aiayn import cli
from aiayn.data import binary
from aiayn.training.distributed import Env
from aiayn.training.train import RunFiles, Trainer, run


# -- a small world of real inputs, made once (tests/world.py) -----------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    return prepare_world(build_world(tmp_path_factory.mktemp("world")))


# -- how a case's argv is built ------------------------------------------------------------------------
SPEC = {"src": "dev.xx.sgm", "tgt": "dev.yy.sgm"}


def write(tmp: Path, name: str, data: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def dev_archive(members: dict[str, bytes], links: dict[str, str] | None = None):
    """A --archive value: a dev archive of `members` made in the case's folder."""
    return lambda w, t: make_tar(t / "dev.tgz", members, links)


def train_archive(members: dict[str, bytes]):
    """A --archives value of prepare: archive "a" of `members`."""
    return lambda w, t: json.dumps({"a": str(make_tar(t / "a.tgz", members))})


def config_file(mutate=None, text: str | None = None):
    """A --config value: the project's config.yaml changed by `mutate` (or replaced by `text`)."""

    def make(w, t):
        path = t / "config.yaml"
        if text is not None:
            path.write_text(text)
            return path
        config = yaml.safe_load((ROOT / "config.yaml").read_text())
        mutate(config)
        path.write_text(yaml.safe_dump(config))
        return path

    return make


def set_key(path: str, value):
    def mutate(config):
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def score_file(text: str):
    """A --experiments value of tables whose one experiment's score file holds `text`."""

    def make(w, t):
        (t / "results" / "base").mkdir(parents=True)
        (t / "results" / "base" / "newstest2014.score.json").write_text(text)
        spec = {k: {} for k in ("model", "paper", "scoring", "train", "decode")}
        spec.update(name="base", row="base", dataset="d", testset="newstest2014", eps_ls=0.1, steps=10, average=1,
                    preset="base", task="translation", pair=["en", "de"])  # fmt: skip
        return json.dumps([spec])

    return make


def candidate(score: str):
    return lambda w, t: json.dumps(
        [
            {
                "name": "c1",
                "setting": {},
                "score": str(t / score),
                "model": str(w / "model.pt"),
                "metrics": str(w / "metrics.jsonl"),
            }
        ]  # fmt: skip
    )


def learned_positions(n: int) -> dict:
    settings = toy.settings()
    settings["model"].update(positional="learned", max_positions=n)
    return settings


def figures_metrics(text: str):
    return lambda w, t: write(t, "m.jsonl", text)


# where a command's cases start from other arguments than its working ones (tests/working.py)
CHANGED = {"tables": {"table": "2", "experiments": None, "results": lambda w, t: t / "results", "out_csv": None}}


def cmd(command: str, **options):
    """The argv of `command`: its working arguments (tests/working.py, CHANGED over them) with
    `options` over them (None drops one)."""
    return lambda w, t: [command, *arguments(command, w, t, **{**CHANGED.get(command, {}), **options})]


def two_vocabularies(w: Path, t: Path) -> Path:
    """The world's corpus as if its target side were encoded with another vocabulary (its record of
    the target's sentencepiece model another's), under settings that share one."""
    c = binary.read(w / "train.bin")
    meta = {**c.header["meta"], "spm_tgt_sha256": "another vocabulary"}
    binary.write(t / "two.bin", (c.src_tokens, c.src_offsets), (c.tgt_tokens, c.tgt_offsets), dtype=c.src_tokens.dtype,
                 meta=meta)  # fmt: skip
    return t / "two.bin"


def empty_corpus(w: Path, t: Path) -> Path:
    """An encoded corpus of no pairs, of the world's vocabularies (encode refuses to write one from
    text; a script or another tool may)."""
    import numpy as np

    none = (np.zeros(0, np.uint16), np.zeros(1, np.int64))
    binary.write(t / "empty.bin", none, none, dtype=np.uint16, meta=binary.read(w / "train.bin").header["meta"])
    return t / "empty.bin"


NO_GPU = not torch.cuda.is_available()  # --device cuda is a bad input only where there is none


@dataclass
class Case:
    id: str
    argv: callable  # (world, tmp) -> argv
    says: str  # a fragment of the one stderr line
    out: str | None = None  # an output that must not exist afterwards (relative to tmp)


BLEU_150 = json.dumps({"lines": 3, "tokenized_bleu": {"score": 150.0}, "sacrebleu": {"score": 11, "signature": "s"}})
CASES = [
    # -- resolve -------------------------------------------------------------------------------------
    Case("resolve: settings not JSON", cmd("resolve", settings="{"), "--settings is not valid JSON", "e.json"),
    # -- download ------------------------------------------------------------------------------------
    Case(
        "download: missing mirror file",
        cmd("download", url=lambda w, t: f"file://{t}/none.tgz"),
        "none.tgz: not found",
        "d.tgz",
    ),
    Case("download: wrong checksum", cmd("download", sha256="0" * 64), "config.yaml expects 0000", "d.tgz"),
    Case("download: wrong size", cmd("download", size="5"), "config.yaml expects 5", "d.tgz"),
    Case(
        "download: unreachable server",
        cmd("download", url="http://127.0.0.1:9/x.tgz", retries="0", wait="0"),
        "download failed after 1 attempts",
        "d.tgz",
    ),
    # -- generate ------------------------------------------------------------------------------------
    Case(
        "generate: unknown kind",
        cmd("generate", spec='{"kind": "nonsense", "sizes": {"train": 1}}'),
        "--spec: kind: 'nonsense' is not one of ['translation', 'treebank']",
        "g.tgz",
    ),
    Case("generate: no sizes", cmd("generate", spec='{"kind": "translation"}'), "--spec: sizes", "g.tgz"),
    # -- example-corpus ------------------------------------------------------------------------------
    Case(
        "example-corpus: no pairs",
        cmd("example-corpus", train="0"),
        "argument --train: must be a whole number >= 1, not 0",
        "my-pair",
    ),
    Case(
        "example-corpus: not a number",
        cmd("example-corpus", dev="many"),
        "argument --dev: invalid int value: 'many'",
        "my-pair",
    ),
    Case(
        "example-corpus: --out is a file",
        cmd("example-corpus", out=lambda w, t: w / "a.txt"),
        "a.txt: a file, where the folder the command writes is meant",
    ),
    # -- prepare -------------------------------------------------------------------------------------
    Case("prepare: corpora not JSON", cmd("prepare", corpora="["), "--corpora is not valid JSON", "train.src"),
    Case(
        "prepare: archive missing",
        cmd("prepare", archives=lambda w, t: json.dumps({"a": str(t / "none.tgz")})),
        "none.tgz",
        "train.src",
    ),
    Case(
        "prepare: member missing",
        cmd("prepare", corpora='[{"archive": "a", "src": "x", "tgt": "z"}]'),
        "has no member z",
        "train.src",
    ),
    Case(
        "prepare: unknown archive name",
        cmd("prepare", corpora='[{"archive": "b", "src": "x", "tgt": "y"}]'),
        "'b'",
        "train.src",
    ),
    Case(
        "prepare: an archive member not UTF-8",
        cmd("prepare", archives=train_archive({"x": b"one\n\xff\n", "y": b"eins\nzwei\n"})),
        "x, line 2: not valid UTF-8",
        "train.src",
    ),
    Case(
        "prepare: sides misaligned",
        cmd("prepare", archives=train_archive({"x": b"one\ntwo\n", "y": b"eins\n"})),
        "misaligned",
        "train.src",
    ),
    Case("prepare: cleaning not JSON", cmd("prepare", cleaning="{"), "--cleaning is not valid JSON", "train.src"),
    Case(
        "prepare: an archive with an unsafe member",
        cmd("prepare", archives=train_archive({"x": b"1\n", "y": b"1\n", "../evil": b"x"})),
        "is unsafe",
        "train.src",
    ),
    # -- prepare-eval (archives, SGML) -----------------------------------------------------------------
    Case(
        "prepare-eval: </seg> missing on both sides",
        cmd("prepare-eval", archive=dev_archive({n: SGM.replace("two</seg>", "two").encode() for n in SPEC.values()})),
        'dev.xx.sgm: segment 2 (<seg id="2">) has no </seg>',
        "dev.src",
    ),
    Case(
        "prepare-eval: </seg> missing on one side",
        cmd(
            "prepare-eval",
            archive=dev_archive({"dev.xx.sgm": SGM.encode(), "dev.yy.sgm": SGM.replace("two</seg>", "two").encode()}),
        ),
        'dev.yy.sgm: segment 2 (<seg id="2">) has no </seg>',
        "dev.src",
    ),
    Case(
        "prepare-eval: a member is a link",
        cmd("prepare-eval", archive=dev_archive({"dev.xx.sgm": SGM.encode()}, links={"dev.yy.sgm": "dev.xx.sgm"})),
        "member dev.yy.sgm is a link; links are refused",
        "dev.src",
    ),
    Case(
        "prepare-eval: a .gz member that is not gzip",
        cmd(
            "prepare-eval",
            spec=json.dumps({"src": "d.xx.gz", "tgt": "d.yy.gz"}),
            archive=dev_archive({"d.xx.gz": b"plain text\n", "d.yy.gz": gzip.compress(b"x\n")}),
        ),
        "d.xx.gz: not a gzip file",
        "dev.src",
    ),
    Case(
        "prepare-eval: archive not a tar",
        cmd("prepare-eval", archive=lambda w, t: w / "a.txt"),
        "a.txt: not a readable archive",
        "dev.src",
    ),
    Case(
        "prepare-eval: member missing",
        cmd("prepare-eval", archive=dev_archive({"dev.xx.sgm": SGM.encode()})),
        "has no member dev.yy.sgm",
        "dev.src",
    ),
    Case("prepare-eval: spec not JSON", cmd("prepare-eval", spec="{"), "--spec is not valid JSON", "dev.src"),
    Case(
        "prepare-eval: archive missing",
        cmd("prepare-eval", archive=lambda w, t: t / "none.tgz"),
        "none.tgz",
        "dev.src",
    ),
    # -- prepare-treebank ------------------------------------------------------------------------------
    Case(
        "prepare-treebank: no treebank set",
        cmd("prepare-treebank", treebank_archive=None),
        "treebank is not set",
        "w.src",
    ),
    Case(
        "prepare-treebank: treebank folder missing",
        cmd(
            "prepare-treebank",
            dataset=lambda w, t: json.dumps({"task": "parsing", "treebank": str(t / "ptb"), "train_sections": ["02"]}),
            treebank_archive=None,
        ),
        "ptb",
        "w.src",
    ),
    Case(
        "prepare-treebank: dataset not JSON",
        cmd("prepare-treebank", dataset="{"),
        "--dataset is not valid JSON",
        "w.src",
    ),
    # -- vocab ---------------------------------------------------------------------------------------
    Case("vocab: spec not JSON", cmd("vocab", vocab="{"), "--vocab is not valid JSON", "spm.src.model"),
    Case(
        "vocab: missing training text",
        cmd("vocab", train_src=lambda w, t: t / "none.txt"),
        "none.txt",
        "spm.src.model",
    ),
    Case(
        "vocab: empty training text",
        cmd("vocab", train_src=lambda w, t: w / "empty.txt"),
        "empty.txt",
        "spm.src.model",
    ),
    # -- encode --------------------------------------------------------------------------------------
    Case(
        "encode: a line not UTF-8",
        cmd(
            "encode",
            src=lambda w, t: write(t, "x.src", b"ok\nbad \xff\n"),
            tgt=lambda w, t: write(t, "x.tgt", "ok\nfine\n"),
        ),
        "x.src, line 2: not valid UTF-8",
        "x.bin",
    ),
    Case(
        "encode: sides of different length",
        cmd("encode", src=lambda w, t: write(t, "x.src", "a\nb\n"), tgt=lambda w, t: write(t, "x.tgt", "a\n")),
        "the two must align",
        "x.bin",
    ),
    Case("encode: missing vocabulary", cmd("encode", spm_src=lambda w, t: t / "none.model"), "none.model", "x.bin"),
    Case(
        "encode: vocabulary not a model",
        cmd("encode", spm_src=lambda w, t: w / "a.txt"),
        "a.txt: not a sentencepiece model",
        "x.bin",
    ),
    # -- check ---------------------------------------------------------------------------------------
    Case(
        "check: a path holding a line break",
        cmd("check", settings=lambda w, t: t / "no\nsuch.json"),
        "no\\nsuch.json: not found",
        "check.json",
    ),
    Case(
        "check: settings lacking keys",
        cmd("check", settings=lambda w, t: write(t, "s.json", '{"name": "x"}')),
        "s.json: the settings lack preset, dataset, task, model, train, vocab",
        "check.json",
    ),
    Case(
        "check: training data not a corpus",
        cmd("check", train=lambda w, t: w / "a.txt"),
        "a.txt: not an encoded corpus",
        "check.json",
    ),
    Case(
        "check: learned positions shorter than the data",
        cmd("check", settings=lambda w, t: write(t, "s.json", json.dumps(learned_positions(4)))),
        "experiments.toy.model.max_positions: 4 learned positions, but",
        "check.json",
    ),
    # -- train ---------------------------------------------------------------------------------------
    Case(
        "train: settings lacking keys",
        cmd("train", settings=lambda w, t: write(t, "s.json", '{"name": "x"}')),
        "s.json: the settings lack preset, dataset, task, model, train, vocab",
        "last.pt",
    ),
    Case(
        "train: settings not JSON",
        cmd("train", settings=lambda w, t: write(t, "s.json", "{")),
        "s.json is not valid JSON",
        "last.pt",
    ),
    Case(
        "train: settings file missing",
        cmd("train", settings=lambda w, t: t / "none.json"),
        "none.json: not found; check the path",
        "last.pt",
    ),
    Case(
        "train: training data not a corpus",
        cmd("train", train=lambda w, t: w / "a.txt"),
        "a.txt: not an encoded corpus",
        "last.pt",
    ),
    Case(
        "train: vocabulary not the data's",
        cmd("train", spm_src=lambda w, t: w / "spm-b.model"),
        "spm-b.model is not the source vocabulary",
        "last.pt",
    ),
    Case(
        "train: a corpus of two vocabularies under a shared one",
        cmd("train", train=two_vocabularies),
        "two.bin: encoded with two vocabularies (source and target), where vocab.shared says one",
        "last.pt",
    ),
    Case(
        "train: a dev set of other vocabularies",
        cmd("train", dev=lambda w, t: w / "dev-b.bin"),
        "dev-b.bin was encoded with another source vocabulary",
        "last.pt",
    ),
    Case("train: a corpus of no pairs", cmd("train", train=empty_corpus), "no sentence pairs, nothing to", "last.pt"),
    Case("train: a dev set of no pairs", cmd("train", dev=empty_corpus), "nothing to measure the dev", "last.pt"),
    *[Case("train: --device cuda without one", cmd("train", device="cuda"), "--device cuda: ", "last.pt")] * NO_GPU,
    # -- average -------------------------------------------------------------------------------------
    Case(
        "average: --last 0", cmd("average", last="0"), "argument --last: must be a whole number >= 1, not 0", "avg.pt"
    ),
    Case(
        "average: --last -1",
        cmd("average", last="-1"),
        "argument --last: must be a whole number >= 1, not -1",
        "avg.pt",
    ),
    Case(
        "average: empty folder",
        cmd("average", checkpoints=lambda w, t: (t / "ck").mkdir(exist_ok=True) or t / "ck", last="2", interval="1"),
        "0 step checkpoint(s) every 1 updates, 2 are to be averaged",
        "avg.pt",
    ),
    Case("average: folder missing", cmd("average", checkpoints=lambda w, t: t / "none"), "none", "avg.pt"),
    # -- select --------------------------------------------------------------------------------------
    Case("select: candidates not JSON", cmd("select", candidates="{"), "--candidates is not valid JSON", "last.pt"),
    Case("select: a candidate's score missing", cmd("select", candidates=candidate("c1.json")), "c1.json", "last.pt"),
    # -- translate -----------------------------------------------------------------------------------
    Case(
        "translate: vocabularies of another dataset",
        cmd("translate", spm_src=lambda w, t: w / "spm-b.model", spm_tgt=lambda w, t: w / "spm-b.model"),
        "spm-b.model is not the source vocabulary",
        "out.txt",
    ),
    Case(
        "translate: beam 0",
        cmd("translate", decode='{"beam": 0}'),
        "--decode: beam: 0 is less than the minimum of 1",
        "out.txt",
    ),
    Case(
        "translate: alpha a string",
        cmd("translate", decode='{"alpha": "x"}'),
        "--decode: alpha: 'x' is not of type 'number'",
        "out.txt",
    ),
    Case(
        "translate: unknown decode key",
        cmd("translate", decode='{"beem": 4}'),
        "--decode: unknown key 'beem'",
        "out.txt",
    ),
    Case("translate: decode not JSON", cmd("translate", decode="{beam: 4"), "--decode is not valid JSON", "out.txt"),
    Case(
        "translate: missing model",
        cmd("translate", model=lambda w, t: w / "nope.pt"),
        "nope.pt: not found; check the path",
        "out.txt",
    ),
    Case(
        "translate: model not a checkpoint",
        cmd("translate", model=lambda w, t: w / "a.txt"),
        "a.txt: not a readable checkpoint (BadZipFile: File is not a zip file); give a last.pt, an average",
        "out.txt",
    ),
    Case("translate: missing input", cmd("translate", input=lambda w, t: t / "none.txt"), "none.txt", "out.txt"),
    Case(
        "translate: input not UTF-8",
        cmd("translate", input=lambda w, t: write(t, "x.txt", b"ok\n\xff\xfe\n")),
        "x.txt, line 2: not valid UTF-8",
        "out.txt",
    ),
    Case("translate: nbest 0", cmd("translate", nbest="0"), "argument --nbest: must be a whole number >= 1", "out.txt"),
    Case(
        "translate: batch tokens 0",
        cmd("translate", batch_tokens="0"),
        "argument --batch-tokens: must be a whole number >= 1",
        "out.txt",
    ),
    Case("translate: unknown device", cmd("translate", device="gpu9"), "--device", "out.txt"),
    *[Case("translate: --device cuda without one", cmd("translate", device="cuda:1"), "--device cuda:1: ", "out.txt")]
    * NO_GPU,
    # -- score ---------------------------------------------------------------------------------------
    Case(
        "score: two empty files",
        cmd("score", hyp=lambda w, t: w / "empty.txt", ref=lambda w, t: w / "empty.txt"),
        "empty.txt: no lines to score",
        "s.json",
    ),
    Case("score: line counts differ", cmd("score", ref=lambda w, t: w / "ref.txt"), "lines", "s.json"),
    Case("score: missing hypothesis", cmd("score", hyp=lambda w, t: t / "no.txt"), "no.txt", "s.json"),
    Case("score: scoring not JSON", cmd("score", scoring="["), "--scoring is not valid JSON", "s.json"),
    Case("score: expected lines differ", cmd("score", expect_lines="3003"), "the test set has 3003", "s.json"),
    # -- tables --------------------------------------------------------------------------------------
    Case(
        "tables: a corrupt score file",
        cmd("tables", experiments=score_file('{"tokenized_bleu": ')),
        "newstest2014.score.json: not a readable score record",
        "t.md",
    ),
    Case(
        "tables: a BLEU of 150",
        cmd("tables", experiments=score_file(BLEU_150)),
        "newstest2014.score.json: not a translation score record (tokenized_bleu.score: 150.0 is greater than the "
        "maximum of 100.000000001)",
        "t.md",
    ),
    Case(
        "tables: --results names a file",
        cmd("tables", results=lambda w, t: w / "a.txt"),
        "a.txt: not a folder, where a folder is meant",
        "t.md",
    ),
    Case(
        "tables: a score file of another kind",
        cmd("tables", experiments=score_file("[1, 2]")),
        "newstest2014.score.json: not a translation score record (the record: [1, 2] is not of type 'object')",
        "t.md",
    ),
    Case(
        "tables: experiments lacking keys",
        cmd("tables", experiments='[{"name": "base"}]'),
        "--experiments: experiment base lacks row, dataset, testset",
        "t.md",
    ),
    Case(
        "tables: experiments not a list",
        cmd("tables", experiments='{"name": "base"}'),
        "--experiments: expected a JSON list",
        "t.md",
    ),
    Case("tables: neither experiments nor config", cmd("tables"), "give --experiments", "t.md"),
    Case("tables: table 5", cmd("tables", table="5"), "invalid choice: 5"),
    Case(
        "tables: config with an unknown key",
        cmd("tables", results=None, out_md=None, config=config_file(set_key("scoring.bootstrap", 5))),
        "bootstrap",
    ),
    Case(
        "tables: config with a syntax error",
        cmd("tables", results=None, out_md=None, config=config_file(text="results: [\n")),
        "config.yaml, line 2, column 1: not valid YAML",
    ),
    # -- figures -------------------------------------------------------------------------------------
    Case("figures: metrics missing", cmd("figures", metrics=lambda w, t: t / "m.jsonl"), "m.jsonl", "c.png"),
    Case(
        "figures: a torn metrics line mid-file",
        cmd(
            "figures",
            metrics=figures_metrics(
                '{"event": "start", "st\n{"step": 1, "dev_ppl": 2.0, "dev_nll": 1, "dev_loss": 1}\n'
            ),
        ),
        "m.jsonl, line 1: not a metrics record; remove that line",
        "c.png",
    ),
    # -- evalb ---------------------------------------------------------------------------------------
    Case(
        "evalb: two empty files",
        cmd("evalb", gold=lambda w, t: w / "empty.txt", test=lambda w, t: w / "empty.txt"),
        "empty.txt: no trees to score",
    ),
    Case("evalb: missing gold", cmd("evalb", gold=lambda w, t: t / "gold.txt"), "gold.txt"),
    Case(
        "evalb: line counts differ",
        cmd(
            "evalb",
            gold=lambda w, t: write(t, "g.txt", "(S (NN a))\n(S (NN b))\n"),
            test=lambda w, t: write(t, "p.txt", "(S (NN a))\n"),
        ),
        "p.txt",
    ),
    # -- params (and the config it reads, as tables --config does) ---------------------------------------
    Case(
        "params: config YAML syntax error",
        cmd("params", config=config_file(text="a: [1, 2\nb: 3\n")),
        "config.yaml, line 2, column 2: not valid YAML",
    ),
    Case(
        "params: config not a mapping",
        cmd("params", config=config_file(text="- a\n- b\n")),
        "expected a mapping of settings at the top level",
    ),
    Case(
        "params: config file missing",
        cmd("params", config=lambda w, t: t / "nope.yaml"),
        "nope.yaml: config file not found",
    ),
    Case(
        "params: config with an unknown top-level key",
        cmd("params", config=config_file(set_key("trainnig", {}))),
        "trainnig",
    ),
    Case(
        "params: config with a misspelt training key",
        cmd("params", config=config_file(set_key("training.warmup", 4000))),
        "warmup",
    ),
    Case(
        "params: config steps a string",
        cmd("params", config=config_file(set_key("training.steps", "many"))),
        "training.steps",
    ),
    Case(
        "params: config with an unknown preset",
        cmd("params", config=config_file(set_key("experiments.base-en-de.preset", "huge"))),
        "huge",
    ),
    Case(
        "params: config with an unknown dataset",
        cmd("params", config=config_file(set_key("experiments.base-en-de.dataset", "wmt99"))),
        "wmt99",
    ),
    Case(
        "params: config archive without sha256",
        cmd("params", config=config_file(set_key("archives.europarl-v7", {"url": "http://h/x.tgz"}))),
        "archives.europarl-v7: needs url and sha256",
    ),
    Case(
        "params: config table 5",
        cmd("params", config=config_file(set_key("experiments.base-en-de.tables", [5]))),
        "tables",
    ),
    Case(
        "params: config odd d_model with sinusoids",
        cmd("params", config=config_file(set_key("experiments.base-en-de.model", {"d_model": 511}))),
        "d_model",
    ),
    Case(
        "params: config averaging more than kept",
        cmd(
            "params",
            config=config_file(
                lambda c: (set_key("experiments.big-en-de.average", 50)(c), set_key("training.keep_checkpoints", 20)(c))
            ),
        ),  # fmt: skip
        "keep at least as many",
    ),
    Case("params: an unknown experiment", cmd("params", experiment="base-en-xx"), "base-en-xx"),
    # -- the command line itself -----------------------------------------------------------------------
    Case("cli: unknown command", lambda w, t: ["trian"], "invalid choice: 'trian'"),
    Case("cli: missing required option", cmd("score", ref=None, out=None), "the following arguments are required"),
    Case("cli: a number that is not one", cmd("average", last="five"), "invalid int value: 'five'"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_one_clear_line(case, world, tmp_path, capsys):
    argv = case.argv(world, tmp_path)
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse: its own usage line, exit 2
        code = exc.code
    except BaseException as exc:
        pytest.fail(f"a traceback instead of one line: {type(exc).__name__}: {exc}")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 or (err and err[0].startswith("usage:")), err
    assert case.says in err[-1], err[-1]
    if case.out:
        assert not (tmp_path / case.out).exists(), f"{case.out} was left under its final name"


@pytest.mark.parametrize("case", [c for c in CASES if not c.id.startswith("cli:")], ids=lambda c: c.id)
def test_bad_input_under_log_is_one_line_in_the_log_and_on_the_terminal(case, world, tmp_path, capsys):
    """The same cases as a rule runs them (`--log-to FILE`, aiayn.cli.log_to): the one line in the
    log, and on stdout with the log's name; nothing on the terminal's stderr."""
    log = tmp_path / "logs" / "case.log"
    log.parent.mkdir()
    argv = case.argv(world, tmp_path)
    try:
        code = cli.main([*argv, "--log-to", str(log)])
    except SystemExit as exc:  # argparse: its usage on the terminal's stderr, before any log
        code, logged = exc.code, ""
    else:  # refused before any work, its log included (aiayn.cli.guard): on the terminal alone
        logged = log.read_text().strip() if log.exists() else ""
        assert not logged or logged.startswith(f"aiayn {argv[0]}: error: ") and "\n" not in logged, logged
        assert case.says in (logged or case.says)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    if logged:
        assert err == "" and out.strip().splitlines()[-1] == f"{logged} (log: {log})", (out, err)
    elif code == 2 and not err.startswith("usage:"):
        assert err.count("\n") == 1 and case.says in err, err


def test_the_cases_go_in_the_order_of_the_commands():
    order = list(cli.COMMANDS) + ["cli"]
    commands = [c.id.split(":")[0] for c in CASES]
    assert commands == sorted(commands, key=order.index)


def test_a_line_longer_than_learned_positions_is_cut_and_said(world, tmp_path, capsys):
    """One overlong line must not fail the whole file (the right result, not an error): on a model
    with learned positions it is cut to the model's positions, and the log says which line."""
    settings = toy.settings(steps=1)
    settings["model"].update(positional="learned", max_positions=64)
    files = RunFiles(tmp_path / "c", tmp_path / "learned.pt", tmp_path / "m.jsonl")
    assert run(Trainer(settings, binary.read(world / "train.bin"), None, files, env=Env()), 0) == 0
    long = " ".join(["the cat sat on a mat"] * 20)
    (tmp_path / "in.txt").write_text(f"the cat\n{long}\nred ball\n")
    argv = ["translate", "--model", str(tmp_path / "learned.pt"), "--input", str(tmp_path / "in.txt"),
            "--spm-src", str(world / "spm-a.model"), "--spm-tgt", str(world / "spm-a.model"),
            "--out", str(tmp_path / "out.txt")]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "in.txt, line 2:" in out and "cut to the model's 63 positions" in out
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 3


@pytest.mark.parametrize("unset", [["MASTER_ADDR", "MASTER_PORT"], ["MASTER_PORT"]])
def test_several_processes_without_a_meeting_place_are_one_line(unset, world, tmp_path, capsys, monkeypatch):
    """RANK and WORLD_SIZE set by hand (or a launcher half set up), without torchrun's MASTER_ADDR /
    MASTER_PORT: one line saying what is missing, not torch's rendezvous traceback."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29999")
    for name in unset:
        monkeypatch.delenv(name)
    assert cli.main(cmd("train")(world, tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{' and '.join(unset)} {'are' if len(unset) > 1 else 'is'} not set" in err[0], err
    assert "torchrun" in err[0] and not (tmp_path / "last.pt").exists()


@pytest.mark.parametrize(
    "env",
    [{"WORLD_SIZE": "0"}, {"WORLD_SIZE": "1", "RANK": "3"}, {"WORLD_SIZE": "2", "RANK": "2"},
     {"LOCAL_RANK": "1"}, {"GROUP_WORLD_SIZE": "0"}, {"GROUP_WORLD_SIZE": "2"}],
)  # fmt: skip
def test_a_launcher_environment_out_of_range_is_one_line_naming_it(env, world, tmp_path, capsys, monkeypatch):
    """torchrun's variables whole but out of range (no process, a rank past the processes, more
    agents than processes): one line naming the variable, nothing trained or written."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29999")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(cmd("train")(world, tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    named = list(env)[-1]
    assert len(err) == 1 and f"{named}={env[named]!r} is not a whole number from" in err[0], err
    assert not (tmp_path / "last.pt").exists()
