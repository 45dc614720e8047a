"""Nothing a command writes can destroy what it did not make. Generated from the inventory
(aiayn.inventory): for every command, every output option against every input option it was given
(the same path, a link to it, a hard link to it, an input inside an output folder), against every
other output, and an output folder that holds someone else's files: each is refused before any
work, in one line naming both, and what was there is left as it was. A new option is covered the
day it is in the inventory, without anyone writing its case."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from working import WORKING, arguments, options_given, prepare_world
from world import build_world

from aiayn import cli, inventory
from aiayn.io import LEFTOVER, OUTPUT_MARK

COMMANDS = sorted({*WORKING, "export"})
OUTPUT_KINDS = {"output", "output folder", "output appended"}
INPUT_KINDS = {"file", "folder", "run folder", "optional file"}


def checks(command: str) -> dict:
    return {**cli.options(command), **inventory.COMMON}


def given(command: str, w: Path, o: Path) -> list[str]:
    return arguments(command, w, o)


def cases() -> list[tuple[str, str, str, str]]:
    """(command, output option, the other option, how) of every pair the inventory makes, whose
    other option the command's working arguments give (an optional input left out is not read)."""
    out = []
    for command in sorted(COMMANDS):
        present = options_given(command) | {"--log-to"}
        kinds = checks(command)
        outs = [o for o, c in kinds.items() if c.kind in OUTPUT_KINDS and o in present]
        ins = [i for i, c in kinds.items() if c.kind in INPUT_KINDS and i in present]
        for o in outs:
            for i in ins:
                ways = ["inside"] if kinds[o].kind == "output folder" else ["same path", "symlink"]
                if kinds[i].kind == "folder" and kinds[o].kind != "output folder":  # a folder it only reads
                    ways.append("a file inside the input folder")
                if kinds[i].kind == "file" and kinds[o].kind != "output folder":
                    ways.append("hard link")
                out += [(command, o, i, way) for way in ways]
            out += [(command, o, p, "two outputs") for p in outs if p != o and outs.index(p) > outs.index(o)]
            if kinds[o].kind == "output folder":
                out.append((command, o, "", "someone else's folder"))
    return out


CASES = cases()


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    return prepare_world(build_world(tmp_path_factory.mktemp("world")))


def value_of(args: list[str], option: str) -> str | None:
    return args[args.index(option) + 1] if option in args else None


def set_value(args: list[str], option: str, value: str) -> list[str]:
    if option in args:
        args = list(args)
        args[args.index(option) + 1] = value
        return args
    return [*args, option, value]


def state(path: Path) -> tuple:
    """What a test compares before and after: a file's bytes and mtime, a folder's listing."""
    if path.is_dir():
        return ("folder", sorted((p.name, p.read_bytes() if p.is_file() else None) for p in path.iterdir()))
    return ("file", path.read_bytes(), path.stat().st_mtime_ns) if path.exists() else ("absent",)


def test_the_cases_cover_every_command_that_writes():
    """Every command with an output option has cases, and they are many (every pair of the inventory)."""
    with_outputs = {c for c in COMMANDS if any(k.kind in OUTPUT_KINDS for k in checks(c).values())}
    assert {c for c, *_ in CASES} == with_outputs and len(CASES) > 150


@pytest.mark.parametrize("command, output, other, how", CASES, ids=[" ".join(c).strip() for c in CASES])
def test_an_output_that_would_destroy_what_the_command_did_not_make_is_refused(
    command, output, other, how, world, tmp_path, capsys
):
    args = given(command, world, tmp_path / "o")
    if how == "someone else's folder":
        target = Path(value_of(args, output))
        target.mkdir(parents=True)
        (target / "mine.txt").write_text("a user's file\n")
        protected = target
    elif how == "two outputs":
        protected = Path(value_of(args, other) or tmp_path / "log.txt")
        args = set_value(args, other, str(protected))
        args = set_value(args, output, str(protected))
    else:
        source = Path(value_of(args, other))
        copy = tmp_path / "inputs" / source.name  # a copy of the world's input: the test may not spoil the world
        copy.parent.mkdir(exist_ok=True)
        if checks(command)[other].kind in ("folder", "run folder") and not source.exists():
            source.mkdir(parents=True)  # a folder the command would make itself (train's --checkpoints)
        if source.is_dir():
            os.symlink(source, copy)  # a folder input is read, never written: a link to it will do
        else:
            copy.write_bytes(source.read_bytes())
        args = set_value(args, other, str(copy))
        protected = copy
        if how == "same path":
            target = copy
        elif how == "symlink":
            target = tmp_path / "link-to-input"
            os.symlink(copy, target)
        elif how == "a file inside the input folder":
            target = copy / sorted(os.listdir(copy))[0]  # a file the command reads (average: a checkpoint)
            protected = source
        elif how == "hard link":
            target = tmp_path / "hard-link-to-input"
            os.link(copy, target)
        else:  # an input inside an output folder
            target = copy.parent
            (copy.parent / OUTPUT_MARK).write_text("")  # the folder is aiayn's: only the input inside it matters
        args = set_value(args, output, str(target))
    before = state(protected)
    code = cli.main([command, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], (code, err)
    assert output in err[0] and (how == "someone else's folder" or other in err[0]), err[0]
    assert state(protected) == before, f"{protected} was changed"


WATCHED: list | None = None  # the file events of the command being watched, else None


def _heard(event: str, args: tuple) -> None:
    if WATCHED is None:
        return
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        mode, flags = args[1] or "", args[2] or 0
        wrote = any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        WATCHED.append(("write" if wrote else "read", args[0]))
    elif event in ("os.rename", "shutil.copyfile", "os.link", "os.symlink", "os.mkdir", "os.remove", "os.truncate"):
        path = args[1] if event in ("os.rename", "shutil.copyfile", "os.link", "os.symlink") else args[0]
        if isinstance(path, (str, bytes, os.PathLike)):  # not a file descriptor
            WATCHED.append(("write", path))


sys.addaudithook(_heard)


@pytest.mark.parametrize("command", sorted(WORKING))
def test_every_file_a_command_touches_is_one_its_guard_sees(command, world, tmp_path, capsys):
    """The guard's view of an invocation (`aiayn.cli.paths`: its options, the paths inside its JSON
    options, the files its command derives) holds every file the command opens, writes, renames or
    removes in the world and its output folder (watched through Python's audit hooks): the day a
    command gains a path the guard does not see, this fails naming it."""
    global WATCHED
    argv = [command, *given(command, world, tmp_path / "o")]
    outputs, inputs = cli.paths(command, cli.build_parser(command).parse_args(argv))
    known = [(os.path.realpath(p), kind) for _, p, kind in outputs + inputs]
    WATCHED = []
    try:
        assert cli.main(argv) == 0, capsys.readouterr().err
    finally:
        events, WATCHED = WATCHED, None
    roots = [os.path.realpath(world), os.path.realpath(tmp_path)]
    for what, path in events:
        path = os.path.realpath(os.fsdecode(path))
        if not any(path == r or path.startswith(r + os.sep) for r in roots):
            continue
        within = [path, *map(str, Path(path).parents)]  # a temporary file or folder, and what is in it
        seen = any(
            path == k
            or k.startswith(path + os.sep)  # a folder made or synced on the way to it
            or (kind in ("folder", "run folder", "appended") and path.startswith(k + os.sep))
            or any(os.path.dirname(p) == os.path.dirname(k) and LEFTOVER.match(os.path.basename(p)) for p in within)
            for k, kind in known
        )  # the file itself, a folder above it, a file in a folder it names, or its temporary file
        assert seen, f"{command} {what}s {path}, which aiayn.cli.paths does not give the guard"


def test_a_file_a_json_option_names_is_an_input_no_output_may_overwrite(world, tmp_path, capsys):
    """A path inside a JSON option (select's candidates, prepare's archives: the schema's `x-path`)
    is an input as an option's is: an output pointed at it is refused before any work, naming both."""
    refused = set()
    for command in sorted(WORKING):
        argv = [command, *given(command, world, tmp_path / "o")]
        outputs, inputs = cli.paths(command, cli.build_parser(command).parse_args(argv))
        output = next((o for o, _, kind in outputs if kind == "file" and o in checks(command)), None)
        for where, path, _ in [i for i in inputs if output and i[0] not in checks(command)]:  # inside a JSON option
            before = state(Path(path))
            assert cli.main(set_value(argv, output, path)) == 2
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and f"{output} {path} is the input {where} {path}" in err, err
            assert state(Path(path)) == before
            refused.add(command)
    assert refused >= {"select", "prepare"}


def drop(args: list[str], option: str) -> list[str]:
    i = args.index(option) if option in args else len(args)
    return args[:i] + args[i + 2 :]


DERIVED = {"--out-csv": None, "--out-html": None}  # the CSV and the HTML beside the Markdown


@pytest.mark.parametrize(
    "command, options, said",
    [
        ("tables", {"--out-md": "t.csv", **DERIVED}, "--out-md {o}/t.csv and --out-csv (default) {o}/t.csv are one"),
        ("tables", {"--out-md": "/dev/null", **DERIVED}, "--out-csv (default) /dev/null.csv: would be a new"),
        ("translate", {"--out": "/dev/null", "--nbest": "2"}, "--out's .nbest /dev/null.nbest: would be a new file in"),
        ("vocab", {"--out-tgt": "s.vocab", "--out-src": "s.model"}, "--out-tgt {o}/s.vocab and --out-src's .vocab"),
        ("train", {"--out": "metrics.jsonl", "--checkpoints": "checkpoints"}, "--out {o}/metrics.jsonl and --metrics"),
        ("train", {"--checkpoints": "ck", "--tensorboard": "ck"}, "--checkpoints {o}/ck and --tensorboard {o}/ck"),
    ],
)
def test_an_output_a_command_derives_is_guarded_as_one_it_is_given(command, options, said, world, tmp_path, capsys):
    """Files written where no option names them (the CSV and HTML beside the Markdown, sentencepiece's
    .vocab, a run's default metrics) collide with no other output, and none is derived from a device."""
    o = tmp_path / "o"
    o.mkdir()
    argv = [command, *given(command, world, o)]
    for option, value in options.items():
        argv = (
            drop(argv, option)
            if value is None
            else set_value(argv, option, value if value[0] == "/" or value.isdigit() else str(o / value))
        )
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and said.format(o=o) in err, err
    assert not [p for p in o.iterdir()], "nothing is written"


def test_a_derived_output_never_writes_over_a_file_no_option_names(world, tmp_path, capsys):
    """sentencepiece's .vocab beside --out-src: over the pieces of an earlier model of that name it is
    this command's own output; over a file with no model beside it, a user's, refused and untouched."""
    o = tmp_path / "o"
    o.mkdir()
    (o / "mine.vocab").write_text("my own word list\n")
    argv = set_value(["vocab", *given("vocab", world, o)], "--out-src", str(o / "mine.model"))
    assert cli.main(argv) == 2
    assert f"{o}/mine.vocab: a file no option names" in capsys.readouterr().err
    assert (o / "mine.vocab").read_text() == "my own word list\n"
    (o / "mine.vocab").write_text("<unk>\t0\n<s>\t0\n")  # pieces whose model a rerun's Snakemake removed
    assert cli.main(argv) == 0 and (o / "mine.model").is_file()


def test_a_training_text_sentencepiece_would_misread_is_refused(world, tmp_path, capsys):
    """Compressed, or with a line that is not UTF-8 (its last), where sentencepiece would read the bytes."""
    import gzip

    argv = ["vocab", *given("vocab", world, tmp_path)]
    src = argv[argv.index("--train-src") + 1]
    (tmp_path / "t.gz").write_bytes(gzip.compress(Path(src).read_bytes()))
    assert cli.main(set_value(argv, "--train-src", str(tmp_path / "t.gz"))) == 2
    assert "t.gz: gzip-compressed, where sentencepiece reads plain text" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_bytes(Path(src).read_bytes() + b"caf\xe9\n")  # Latin-1 on its last line
    assert cli.main(set_value(argv, "--train-src", str(tmp_path / "bad.txt"))) == 2
    assert "bad.txt, line " in (err := capsys.readouterr().err) and ": not valid UTF-8" in err, err


def test_an_output_on_a_file_a_command_reads_in_its_own_folder_is_refused(world, tmp_path, capsys):
    """A folder a command writes in holds files it reads (train's step and resume checkpoints, the
    results' records tables reads: the inventory's `reads`): those are its inputs, and an output on
    one (train --out checkpoints/checkpoint_N.pt, tables --out-md a score file) is refused."""
    o = tmp_path / "o"
    folder = o / "checkpoints"
    folder.mkdir(parents=True)
    step = folder / "checkpoint_0000004.pt"
    shutil.copy(world / "model.pt", step)
    score = o / "results" / "base" / "newstest2014.score.json"
    score.parent.mkdir(parents=True)
    score.write_text((world / "score.json").read_text())
    cases = [
        ("train", ["--checkpoints", str(folder), "--out", str(folder / step.name)], step),
        ("tables", ["--results", str(o / "results"), "--out-md", str(score)], score),
    ]  # fmt: skip
    for command, options, protected in cases:
        argv = [command, *given(command, world, o)]
        for option, value in zip(options[::2], options[1::2]):
            argv = set_value(argv, option, value)
        before = state(protected)
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"is the input {options[0]} (a file in it) {protected}" in err, err
        assert state(protected) == before


def test_translates_nbest_beside_its_output_is_guarded(world, tmp_path, capsys):
    """translate --nbest N writes OUT.nbest too: an input there is refused, as one at OUT would be."""
    o = tmp_path / "o"
    o.mkdir()
    text = o / "x.nbest"
    shutil.copy(world / "ref.txt", text)
    argv = set_value(
        set_value(["translate", *given("translate", world, o)], "--input", str(text)), "--out", str(o / "x")
    )
    before = state(text)
    assert cli.main([*argv, "--nbest", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out's .nbest {text} is the input --input {text}" in err and state(text) == before


# a name no command should trip on: a leading dash, a space, a quote, a comma, a newline, a byte not UTF-8
HOSTILE = os.fsdecode(b"-a b'c,\n\xfe")


@pytest.mark.parametrize("folder", ["plain", "hostile"])
@pytest.mark.parametrize("command", sorted(WORKING))
def test_every_output_is_written_under_a_hostile_name(command, folder, world, tmp_path, capsys):
    """Each output of every command that writes one (the inventory's), given a name that starts
    with a dash and holds a space, a quote, a comma, a newline and a byte not UTF-8, in a folder so
    named or not, is written there."""
    args = given(command, world, tmp_path / (HOSTILE if folder == "hostile" else "o"))
    wanted = []
    for name in WORKING[command][1]:
        opt, _, inside = name.partition("/")
        path = Path(value_of(args, opt))
        hostile = path if path.name.startswith(HOSTILE) else path.with_name(HOSTILE + path.name)
        args = set_value(args, opt, str(hostile))
        wanted.append(hostile / inside if inside else hostile)
    if command == "vocab" and folder == "hostile":  # sentencepiece takes no folder name that is not UTF-8
        assert cli.main([command, *args]) == 2 and "folder names that are UTF-8" in capsys.readouterr().err
        return
    assert cli.main([command, *args]) == 0, capsys.readouterr().err
    assert all(p.is_file() for p in wanted), [p for p in wanted if not p.is_file()]


@pytest.mark.parametrize("command", sorted(WORKING))
def test_every_input_is_read_under_a_hostile_name(command, world, tmp_path, capsys):
    """Each file input of every command (the inventory's), copied to a name as hostile as the one
    above, is read there: the command runs as it does on the original."""
    args, kinds = given(command, world, tmp_path / "o"), checks(command)
    for opt in [o for o in options_given(command) if o in kinds and kinds[o].kind == "file"]:
        path = Path(value_of(args, opt))
        hostile = tmp_path / "in" / (HOSTILE + path.name)
        hostile.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, hostile)
        args = set_value(args, opt, str(hostile))
    assert cli.main([command, *args]) == 0, capsys.readouterr().err
