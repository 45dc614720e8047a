"""Nothing lost, nothing run, nothing damaged used: identities by content, every artifact verified
on load, every shell line quoted and every name checked, runs that never mix.

Each mechanism is tested across the kinds of file or command it covers: identity of every
identity we compute, a bit flipped at several places of each kind of file we load, every `shell:`
line of every rule and every kind of name."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import toy
import yaml
from conftest import ROOT, fresh_clone, snakemake
from working import prepare_world
from world import build_world

from aiayn import cli
from aiayn.data import binary, vocab
from aiayn.errors import UserError
from aiayn.evaluation.select import choose
from aiayn.io import file_sha256
from aiayn.runtime import checkpoint, metrics
from aiayn.study import config as cfg
from aiayn.training.average import average_run
from aiayn.training.train import EXIT_DONE, lock_of, lock_of_metrics, restore, run

WORDS = "the cat sat on a mat and dog ran far away from home to see big red ball in park".split()


def text(path: Path, n: int = 300, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(rng.choice(WORDS, rng.integers(3, 9))) + "\n" for _ in range(n)))
    return path


def flip(path: Path, offset: int, bit: int = 4) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


# -- 1. identity by content ------------------------------------------------------------------------
def test_a_vocabulary_trained_again_is_the_same_vocabulary(tmp_path):
    """sentencepiece records its output prefix (our scratch folder), its input paths and its threads
    in the model: two trainings of the same text to the same pieces wrote different bytes, and a
    rebuilt vocabulary set finished runs aside. Those fields are left out of the file and its identity."""
    a, b = text(tmp_path / "a" / "train.txt"), tmp_path / "b" / "elsewhere.txt"
    b.parent.mkdir()
    shutil.copy(a, b)
    vocab.train([a], tmp_path / "a" / "spm.model", model_type="bpe", size=40, input_sentence_size=0, threads=1)
    vocab.train([b], tmp_path / "b" / "spm.model", model_type="bpe", size=40, input_sentence_size=0, threads=2)
    one, two = tmp_path / "a" / "spm.model", tmp_path / "b" / "spm.model"
    assert one.read_bytes() == two.read_bytes() and vocab.identity(one) == vocab.identity(two)
    assert str(tmp_path).encode() not in one.read_bytes()  # no path of ours in the model
    assert vocab.load(one).Encode(["the cat sat"]) == vocab.load(two).Encode(["the cat sat"])
    vocab.train([a], tmp_path / "c.model", model_type="bpe", size=50, input_sentence_size=0)
    assert vocab.identity(tmp_path / "c.model") != vocab.identity(one)  # one that really differs
    # a record of an older aiayn (the file's SHA-256) still matches its unchanged file
    assert vocab.matches(file_sha256(one), one) and not vocab.matches(file_sha256(one), tmp_path / "c.model")
    assert vocab.matches(vocab.identity(one), two) and not vocab.matches(vocab.identity(one), tmp_path / "c.model")
    # and the identity of a model as sentencepiece writes it (its prefix and inputs inside) is the same
    import sentencepiece as spm

    spm.set_random_generator_seed(1)
    spm.SentencePieceTrainer.Train(
        input=str(a), model_prefix=str(tmp_path / "raw"), vocab_size=40, model_type="bpe", pad_id=0, unk_id=1,
        bos_id=2, eos_id=3, character_coverage=1.0, input_sentence_size=0, shuffle_input_sentence=True,
        num_threads=3, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    raw = tmp_path / "raw.model"
    assert raw.read_bytes() != one.read_bytes() and str(tmp_path).encode() in raw.read_bytes()
    assert vocab.identity(raw) == vocab.identity(one)


def test_a_corpus_is_its_tokens_not_its_header(tmp_path):
    src, tgt = toy.from_sequences([[5, 6, 7], [8]], [[7, 6, 5], [8, 9]])
    one = binary.write(tmp_path / "a.bin", src, tgt, dtype="<u2", meta={"source_files": ["/x/train.src"]})
    two = binary.write(tmp_path / "b.bin", src, tgt, dtype="<u2", meta={"source_files": ["/y/z/train.src"]})
    assert one["digest"] == two["digest"] == binary.read(tmp_path / "a.bin").identity
    other = binary.write(tmp_path / "c.bin", *toy.from_sequences([[5, 6, 7], [8]], [[7, 6, 5], [9, 9]]), dtype="<u2")
    assert other["digest"] != one["digest"]


# -- 2. integrity on every artifact we load ----------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trained")
    assert toy.train_in_process(folder, toy.settings(steps=8, checkpoint_interval=2, keep_checkpoints=5)) == 0
    return folder


def record_offsets(path: Path) -> list[int]:
    """Byte offsets inside the records (tensors, pickle) of a checkpoint's zip, spread over the file."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        infos = [i for i in z.infolist() if i.file_size > 8]
        data = path.read_bytes()
        offsets = []
        for info in infos:
            start = (
                info.header_offset
                + 30
                + int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
            )
            start += int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
            offsets += [start, start + info.file_size // 2, start + info.file_size - 1]
    return offsets


@pytest.mark.parametrize("where", range(6))
def test_a_flipped_bit_in_a_checkpoint_is_refused_not_used(trained, tmp_path, where, capsys):
    source = trained / "checkpoints" / "last.pt"
    offsets = record_offsets(source)
    damaged = tmp_path / "checkpoints" / "last.pt"
    damaged.parent.mkdir()
    shutil.copy(source, damaged)
    flip(damaged, offsets[where * (len(offsets) - 1) // 5])
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(str(damaged))):
        checkpoint.load(damaged)
    # each command that loads a checkpoint says so in one line and writes nothing
    shutil.copy(damaged, damaged.parent / "checkpoint_0000008.pt")
    (tmp_path / "in.txt").write_text("5 6 7\n")
    commands = {
        "average": ["average", "--checkpoints", str(damaged.parent), "--last", "1", "--interval", "8",
                    "--final-step", "8", "--out", str(tmp_path / "out")],
        "translate": ["translate", "--model", str(damaged), "--input", str(tmp_path / "in.txt"), "--spm-src",
                      str(tmp_path / "none.model"), "--spm-tgt", str(tmp_path / "none.model"), "--out",
                      str(tmp_path / "out")],
    }  # fmt: skip
    for name, argv in commands.items():
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(damaged.parent) in err[0], (name, err)
        assert "damaged" in err[0] or "not a readable checkpoint" in err[0], (name, err)
        assert not re.search(r"record \S*\.pt\.", err[0]), (name, err)  # not by its writer's temporary name
        assert not (tmp_path / "out").exists()


def test_a_resume_falls_back_past_a_damaged_checkpoint(trained, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(trained, folder)
    (folder / "checkpoints" / "last.pt").unlink()
    newest = folder / "checkpoints" / "resume_0000008.pt"
    flip(newest, record_offsets(newest)[-2])
    messages = []
    settings = toy.settings(steps=8, checkpoint_interval=2, keep_checkpoints=5)
    assert run(toy.make_trainer(folder, settings, log=messages.append), False) == EXIT_DONE
    assert any("resume_0000008.pt: a damaged checkpoint" in m and "falling back" in m for m in messages)
    assert any("resumed from step 6" in m for m in messages)  # the resume checkpoint before it


@pytest.mark.parametrize(
    "where", ["magic", "header", "header value", "src tokens", "src offsets", "tgt tokens", "tgt offsets"]
)
def test_a_flipped_bit_in_an_encoded_corpus_is_refused(tmp_path, where, capsys):
    path = toy.corpus(tmp_path / "train.bin", n=50)
    header = binary.read(path).header
    arrays = header["arrays"]
    offset = {
        "magic": 2,
        "header": 30,
        "header value": path.read_bytes().index(b'"src_vocab": 24') + len(b'"src_vocab": '),  # 24 -> 34: valid JSON
        "src tokens": arrays["src_tokens"]["offset"] + 7,
        "src offsets": arrays["src_offsets"]["offset"] + 8 * 20,
        "tgt tokens": arrays["tgt_tokens"]["offset"] + 31,
        "tgt offsets": arrays["tgt_offsets"]["offset"] + 8 * 49,
    }[where]
    flip(path, offset, bit=0 if where == "header value" else 4)
    with pytest.raises(binary.EncodedError, match=re.escape(str(path))):
        binary.read(path)
    (tmp_path / "settings.json").write_text(json.dumps(toy.settings()))
    argv = ["train", "--settings", str(tmp_path / "settings.json"), "--train", str(path), "--checkpoints",
            str(tmp_path / "c"), "--out", str(tmp_path / "last.pt")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "rerun the encode step" in err[0], err


# -- 3. shell-safe by construction ---------------------------------------------------------------------
# every value of every shell line is quoted, or is the launcher: tests/test_inventory.py (the inventory)


NAMED = {
    "experiments": lambda c, bad: c["experiments"].update({bad: c["experiments"]["base-en-de"]}),
    "datasets": lambda c, bad: c["datasets"].update({bad: c["datasets"]["wmt14-en-de"]}),
    "presets": lambda c, bad: c["presets"].update({bad: c["presets"]["base"]}),
    "archives": lambda c, bad: c["archives"].update({bad: c["archives"]["dev"]}),
    "datasets.wmt14-en-de.eval_sets": lambda c, bad: c["datasets"]["wmt14-en-de"]["eval_sets"].update(
        {bad: c["datasets"]["wmt14-en-de"]["eval_sets"]["newstest2013"]}
    ),
}
BAD_NAMES = ["x;touch$IFS$HOME/marker;x", "a b", "it's", "$(id)", "..", "a/../b", "-rf", "tab\there", "base2\n"]


@pytest.mark.parametrize("kind", list(NAMED))
@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_name_that_is_not_a_plain_word_is_refused_naming_its_key(paper_config, kind, bad):
    config = json.loads(json.dumps(paper_config))
    NAMED[kind](config, bad)
    with pytest.raises(cfg.ConfigError, match=re.escape(f"{kind}: {bad!r} is not allowed")):
        cfg.validate(config)


def test_an_experiment_name_runs_no_command(tmp_path):
    """The regression test of the case found: an experiment named x;touch$IFS$HOME/marker;x ran
    `touch`. It is refused before any job runs, naming the key."""
    marker = tmp_path / "marker"
    extra = tmp_path / "extra.yaml"
    name = f"x;touch$IFS{tmp_path}/marker;x"
    extra.write_text(
        yaml.safe_dump({"experiments": {name: {"preset": "base", "dataset": "wmt14-en-de", "tables": [2]}}})
    )
    clone = tmp_path / "clone"  # were the name let through, its jobs would run there, not in the repository
    clone.mkdir()
    fresh_clone(clone)
    run_ = snakemake("results/tables/table2.md", "--cores", "1", "--configfile", str(extra), cwd=clone)
    assert run_.returncode != 0 and f"experiments (in {extra}): " in run_.stderr and "is not allowed" in run_.stderr
    assert not marker.exists() and "Traceback" not in run_.stderr


def test_a_results_folder_with_spaces_and_shell_characters_works(tmp_path):
    """A results path with a space, a quote, `;`, `$` and `..` in it: the first jobs of the demo run
    and write there, and nothing is written anywhere else."""
    work = tmp_path / "study"
    work.mkdir()
    config = yaml.safe_load((ROOT / "profiles/demo/study.yaml").read_text())
    config["results"] = "../study/my res'ults;$HOME x"
    config["archives"]["demo-pair"]["generate"]["sizes"] = {"train": 300, "dev": 20, "test": 20}
    for es in config["datasets"]["eng-zil"]["eval_sets"].values():
        es["lines"] = 20
    (work / "study.yaml").write_text(yaml.safe_dump(config))
    target = "vocabularies"  # the vocabularies of every dataset: the demo's first jobs
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(work), "--cores", "2",
           "--configfile", str(work / "study.yaml"), "--replace-workflow-config", target]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = work / "my res'ults;$HOME x"
    assert (results / "data/eng-zil/spm.src.model").is_file() and (results / "downloads/demo-pair.tar.gz").is_file()
    made = {p.name for p in work.iterdir()} - {".snakemake", "study.yaml"}
    assert made == {"my res'ults;$HOME x"}, made  # no stray file outside the results folder
    assert {p.name for p in tmp_path.iterdir()} == {"study"}


# -- 4. runs never mix --------------------------------------------------------------------------------
def test_average_leaves_out_a_checkpoint_of_another_run(trained, tmp_path):
    folder = tmp_path / "checkpoints"
    shutil.copytree(trained / "checkpoints", folder)
    other = tmp_path / "other"
    assert toy.train_in_process(other, toy.settings(steps=8, checkpoint_interval=2, keep_checkpoints=5, seed=9)) == 0
    shutil.copy(other / "checkpoints" / "checkpoint_0000006.pt", folder / "checkpoint_0000006.pt")
    messages = []
    result = average_run(folder, tmp_path / "avg.pt", k=2, interval=2, final=8, log=messages.append)
    assert result["averaged_steps"] == [4, 8]  # 6 is another run's: the next one of this run instead
    assert any("checkpoint_0000006.pt is of another run (train.seed: 9 -> 1)" in m for m in messages)
    with pytest.raises(UserError, match="1 of another run left out"):
        average_run(folder, tmp_path / "avg.pt", k=4, interval=2, final=8, log=messages.append)


def test_an_average_and_a_trained_model_never_overwrite_each_other(trained, tmp_path):
    """Finished work of the other kind at --out is refused before any work: an average written over
    a run's final model, or a training's result over an average (any other file is an output)."""
    final = trained / "checkpoints" / "last.pt"
    before = final.read_bytes()
    with pytest.raises(UserError, match=r"last.pt: holds a trained model, which writing the average model there"):
        average_run(trained / "checkpoints", final, k=2, interval=2, final=8)
    assert final.read_bytes() == before
    average_run(trained / "checkpoints", tmp_path / "avg.pt", k=2, interval=2, final=8)
    average_run(trained / "checkpoints", tmp_path / "avg.pt", k=2, interval=2, final=8)  # its own: rewritten
    with pytest.raises(UserError, match=r"avg.pt: holds an average of checkpoints, which writing the trained"):
        checkpoint.not_other_work(tmp_path / "avg.pt", "trained")  # what train_job asks before it trains


def test_averaging_a_run_still_training_says_so(tmp_path):
    """The average of a run whose trainer holds its folder is refused naming that trainer (it said "0 step
    checkpoints ... rerun training"), and holds the folder itself while it reads (no prune under it)."""
    from aiayn.training.average import average_run

    (tmp_path / "checkpoints").mkdir()
    with checkpoint.exclusive(tmp_path / "checkpoints", lock_of(tmp_path / "checkpoints")):  # a trainer at work
        with pytest.raises(UserError, match=r"checkpoints is being trained by the process \d+ on .*let it finish"):
            average_run(tmp_path / "checkpoints", tmp_path / "avg.pt", k=2, interval=2, final=4)


def test_averaging_a_run_on_a_read_only_disk_needs_no_lock(tmp_path, monkeypatch):
    """Beside an archived run on a read-only disk no lock can be made, and no trainer writes there: the
    average goes on (here to its own word that the folder holds no checkpoint)."""
    import errno

    from aiayn.training.average import average_run

    def read_only(folder, lock, doing="trained"):
        raise OSError(errno.EROFS, "Read-only file system", str(lock))

    monkeypatch.setattr(checkpoint, "exclusive", read_only)
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(UserError, match=r"0 step checkpoint\(s\) every 2 updates, 2 are to be averaged"):
        average_run(tmp_path / "checkpoints", tmp_path / "avg.pt", k=2, interval=2, final=4)


@pytest.mark.slow
def test_a_second_trainer_of_one_folder_is_refused(tmp_path):
    settings = toy.settings(steps=4)
    trainer = toy.make_trainer(tmp_path, settings)
    with checkpoint.exclusive(tmp_path / "checkpoints", lock_of(tmp_path / "checkpoints")):  # an orphaned job
        with pytest.raises(UserError, match=r"checkpoints is being trained by the process \d+ on "):
            run(trainer, False)
        (tmp_path / "experiment.json").write_text(json.dumps(settings))
        argv = toy.train_command(tmp_path, settings)
        done = subprocess.run([sys.executable, *argv], env=toy.env_for_subprocess(), capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
        assert "is being trained by the process" in done.stderr
    assert run(toy.make_trainer(tmp_path, settings), False) == EXIT_DONE  # free again once it ends
    fd = open(tmp_path / "train.lock")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the trainer finished
    fd.close()


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="the kernel names a lock's holder in /proc/locks (Linux)")
def test_a_lock_held_by_another_program_names_that_program_not_an_earlier_holder(tmp_path):
    lock = tmp_path / "train.lock"
    lock.write_text("the process 1 on an-earlier-host\n")  # what an earlier aiayn holder wrote
    hold = "import fcntl, sys, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print(1, flush=True)"
    hold += "; time.sleep(60)"
    with subprocess.Popen([sys.executable, "-c", hold, str(lock)], stdout=subprocess.PIPE, text=True) as other:
        try:
            other.stdout.readline()
            with pytest.raises(
                UserError, match=rf"is being trained by the process {other.pid} \(python[^)]*\) on this"
            ):
                with checkpoint.exclusive(tmp_path / "checkpoints", lock):
                    pass
        finally:
            other.kill()


def test_two_runs_whose_folders_sit_side_by_side_share_no_file(tmp_path, capsys):
    """Runs A and B with their checkpoints in runs/A and runs/B: each its own metrics, lock and
    TensorBoard folder beside its folder (aiayn.study.layout.Layout.beside), so B trains while A
    holds its lock, and training B leaves A's records as they were."""
    settings = toy.settings(steps=4)
    argv = toy.train_command(tmp_path, settings)[2:]

    def train(name: str) -> int:
        folder = tmp_path / "runs" / name
        return cli.main(
            [*argv[: argv.index("--checkpoints")], "--checkpoints", str(folder), "--out", str(folder / "last.pt")]
        )

    assert train("A") == 0
    records = (tmp_path / "runs" / "A.metrics.jsonl").read_bytes()
    with checkpoint.exclusive(tmp_path / "runs" / "A", lock_of(tmp_path / "runs" / "A")):  # A training again
        assert train("B") == 0, capsys.readouterr().err
    assert (tmp_path / "runs" / "A.metrics.jsonl").read_bytes() == records
    assert metrics.summary(tmp_path / "runs" / "B.metrics.jsonl")["step"] == 4
    assert not (tmp_path / "runs" / "metrics.jsonl").exists()
    shared = tmp_path / "runs" / "A.metrics.jsonl"  # C given A's metrics while A writes them
    with checkpoint.exclusive(shared, lock_of_metrics(shared), "written (metrics)"):
        folder = tmp_path / "runs" / "C"
        argv_c = [*argv[: argv.index("--checkpoints")], "--checkpoints", str(folder), "--out", str(folder / "l.pt")]
        assert cli.main([*argv_c, "--metrics", str(shared)]) == 2
    assert "A.metrics.jsonl is being written (metrics) by the process" in capsys.readouterr().err
    assert shared.read_bytes() == records


def test_select_never_takes_a_candidate_without_a_finite_score(tmp_path):
    """A score file holding NaN (or a BLEU of "n/a") is no score: refused naming the file, never ranked."""

    def candidate(name, value):
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps({"lines": 3, "tokenized_bleu": {"score": value}, "sacrebleu": {"score": 1.0, "signature": "s"}})
        )
        return {"name": name, "score": str(path)}

    assert choose([candidate("b", 3.0)])[0]["name"] == "b"
    with pytest.raises(UserError, match="a.json: not a readable score record .NaN is not a number"):
        choose([candidate("b", 3.0), candidate("a", float("nan"))])
    with pytest.raises(UserError, match="a.json: not a translation score record .tokenized_bleu.score: 'n/a'"):
        choose([candidate("a", "n/a")])


# -- 4. identity wherever a model meets a vocabulary, locks by the real folder, records that restart --
@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    return prepare_world(build_world(tmp_path_factory.mktemp("world")))


def test_export_and_figures_refuse_another_datasets_vocabulary_as_translate_does(world, tmp_path):
    """export wrote a Marian model with the wrong tokenizer, exit 0; figures drew attention over it."""
    from aiayn.evaluation.export import export
    from aiayn.report.figures import write_figures

    with pytest.raises(UserError, match="spm-b.model is not the source vocabulary .*model.pt was trained with"):
        export(world / "model.pt", world / "spm-b.model", world / "spm-b.model", tmp_path / "hf", decode={}, card="")
    with pytest.raises(UserError, match="spm-b.model is not the source vocabulary"):
        write_figures("x", world / "metrics.jsonl", world / "model.pt", world / "spm-b.model", dev_src=world / "a.txt",
                      curves=tmp_path / "c.png", lr_plot=tmp_path / "l.png", attention=tmp_path / "a.png")  # fmt: skip
    assert not list(tmp_path.iterdir())  # no figure of the three was left


def test_a_second_trainer_is_refused_whatever_link_names_the_folder(tmp_path):
    real = tmp_path / "run" / "checkpoints"
    real.mkdir(parents=True)
    (tmp_path / "alias").symlink_to(tmp_path / "run")
    with checkpoint.exclusive(real, lock_of(real)):
        with pytest.raises(UserError, match="is being trained by the process"):
            with checkpoint.exclusive(tmp_path / "alias" / "checkpoints", lock_of(tmp_path / "alias" / "checkpoints")):
                pass


def test_a_training_that_starts_over_starts_its_records_over(tmp_path):
    """A run stopped before its first checkpoint starts from step 0, and its records start over (the
    stopped run's progress lines are not kept beside the new run's). Where finished work is there
    with nothing to resume it, training refuses instead (tests/test_resume.py)."""
    settings = toy.settings(steps=4, checkpoint_interval=3, log_interval=1)
    folder = tmp_path / "run"
    toy.train_in_process(folder, settings, max_updates=2)
    assert not list((folder / "checkpoints").glob("*.pt"))
    assert metrics.read(folder / "metrics.jsonl").progress
    trainer = toy.make_trainer(folder, settings)
    restore(trainer)
    assert trainer.step == 0 and metrics.read(folder / "metrics.jsonl").progress == []


def test_an_output_name_as_long_as_the_file_system_allows_is_written(tmp_path):
    """A legal 249-byte name was "too long": its temporary file's name had the name and more."""
    from aiayn.io import atomic_write_text

    target = tmp_path / ("n" * 249)
    atomic_write_text(target, "x")
    assert target.read_text() == "x" and [p.name for p in tmp_path.iterdir()] == [target.name]
