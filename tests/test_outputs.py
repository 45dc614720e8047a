"""Nothing a command writes can destroy what it did not make. Generated from the inventory
(aiayn.inventory): for every command, every output option against every input option it was given
(the same path, a link to it, a hard link to it, an input inside an output folder), against every
other output, and an output folder that holds someone else's files: each is refused before any
work, in one line naming both, and what was there is left as it was. A new option is covered the
day it is in the inventory, without anyone writing its case."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from working import EXPORT, WORKING, prepare_world
from world import build_world

from aiayn import cli, inventory
from aiayn.io import OUTPUT_MARK

COMMANDS = {**WORKING, "export": EXPORT}
OUTPUT_KINDS = {"output", "output folder", "output appended"}
INPUT_KINDS = {"file", "folder", "optional file"}


def checks(command: str) -> dict:
    return {**inventory.COMMANDS[command], **inventory.COMMON}


def given(command: str, w: Path, o: Path) -> list[str]:
    return [str(a) for a in COMMANDS[command][0](w, o)]


def options_given(command: str) -> set[str]:
    """The options the working arguments of `command` give (tests/working.py, read as source: they
    need the world's files to be called)."""
    import ast

    from conftest import ROOT

    tree = ast.parse((ROOT / "tests" / "working.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == command:
                    return {
                        n.value
                        for n in ast.walk(value)
                        if isinstance(n, ast.Constant) and str(n.value).startswith("--")
                    }
        if isinstance(node, ast.Assign) and command == "export" and ast.unparse(node.targets[0]) == "EXPORT":
            return {
                n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and str(n.value).startswith("--")
            }
    raise AssertionError(f"tests/working.py gives no arguments of {command}")


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
        if checks(command)[other].kind == "folder" and not source.exists():
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
