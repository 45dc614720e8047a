"""The inventory of inputs (aiayn.inventory) against the code: every option of every command, every
value on a rule's shell line and every environment variable the package reads is in it, and every
check it names exists. A new option, shell-line value or variable without its check fails here."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from conftest import ROOT, command_options

from aiayn import cli, inventory
from aiayn.cli import COMMANDS
from aiayn.study import config as cfg


def resolve(dotted: str):
    """The object a dotted path names (module, then attributes)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def schema_kinds(what: str) -> list[str]:
    return what.split("+")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_every_command_is_in_the_inventory(command):
    """Each argument argparse knows (read from argparse's own list) has its check (aiayn.cli.options:
    its `type`, a number's bounds, its choices, a flag)."""
    given = set(command_options(command))
    listed = set(cli.options(command)) | set(inventory.COMMON)
    assert given - listed == set(), f"{command}: options without a check (an aiayn.inventory.Check as its type)"
    assert listed - given == set(), f"{command}: the inventory lists options the command does not have"


# path options the working arguments (tests/working.py) leave out, each with where it is exercised instead
NOT_IN_WORKING = {
    ("train", "--dev"): "the demo (a dev pass per checkpoint, test_e2e.py)",
    ("train", "--spm-src"): "test_train_rule.py (the vocabularies a corpus was encoded with)",
    ("train", "--spm-tgt"): "test_train_rule.py (the vocabularies a corpus was encoded with)",
    ("train", "--metrics"): "derived beside --checkpoints (train.derived_files), guarded through it",
    ("train", "--tensorboard"): "test_train.py's TensorBoard test (the tensorboard extra)",
    ("tables", "--config"): "the demo's tables rule (test_e2e.py)",
    ("tables", "--out-html"): "derived from --out-md (tables.derived_files), guarded through it",
    ("figures", "--seed-metrics"): "the demo's figures (several seeds)",
    ("export", "--ctranslate2"): "test_export.py (the export extra)",
    ("plan", "--costs"): "test_plan.py (cost.csv read as data)",
    ("plan", "--benchmark"): "test_plan.py (gpu.json of this GPU or another)",
}
PATHS = ("file", "folder", "run folder", "optional file", "output", "output folder", "output appended")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_path_option_is_in_the_working_arguments_or_said_where_it_is_tested(command):
    """The fault, output-guard and bad-input tests build on tests/working.py's arguments: a path option
    a command gains is refused here until it is given there (or its other test is named above)."""
    from working import options_given

    paths = {o for o, check in cli.options(command).items() if check.kind in PATHS}
    left = paths - options_given(command) - {o for c, o in NOT_IN_WORKING if c == command}
    assert left == set(), f"{command}: path options neither in tests/working.py's ARGS nor in NOT_IN_WORKING"
    assert {o for c, o in NOT_IN_WORKING if c == command} <= paths - options_given(command)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_check_the_inventory_names_exists(command):
    actions = command_options(command)
    for option, check in {**cli.options(command), **inventory.COMMON}.items():
        action = actions[option]
        if check.kind == "file":
            assert callable(resolve(inventory.FILE_KINDS[check.what])), (option, check)
        elif check.kind in ("text", "folder", "run folder", "experiment settings", "optional file"):
            assert callable(resolve(check.what)), (option, check)
        elif check.kind in ("settings", "settings list"):
            for name in schema_kinds(check.what):
                assert name in cfg.schema()["$defs"] or name in cfg.schema()["properties"], (option, name)
        elif check.kind == "number":
            assert getattr(action.type, "bound", None), f"{command} {option}: a number without bounds (at_least)"
        elif check.kind == "choice":
            assert action.choices, (option, check)
        elif check.kind == "flag":
            assert action.nargs == 0, (option, check)
        else:
            assert check.kind in ("output", "output folder", "output appended"), (option, check)


def test_every_json_option_goes_through_the_schema():
    """An option the inventory calls settings is read by settings() / settings_list() of that kind,
    and no command reads JSON any other way (load_json is theirs alone)."""
    for path in (ROOT / "src/aiayn/commands").glob("*.py"):
        if path.name == "__init__.py":
            continue
        command = path.stem.replace("_", "-")
        text = path.read_text()
        for option in re.findall(r'load_json\(args\.\w+, "(--[\w-]+)"', text):  # JSON read without settings():
            check = cli.options(command)[option]  # then its checker must be named
            assert check.kind in ("experiment settings", "text"), f"{command} {option} reads JSON unchecked"
        found = re.findall(r'settings(?:_list)?\(args\.\w+, "(--[\w-]+)", (\([^)]*\)|"[^"]*")', text)
        calls = {option: "+".join(re.findall(r'"([\w]+)"', kinds)) for option, kinds in found}
        for option, check in cli.options(command).items():
            if check.kind in ("settings", "settings list"):
                assert option in calls, f"{command} {option}: not read through settings()"
                assert calls[option] == check.what, (command, option, calls[option])


def shell_lines() -> list[tuple[str, str, str]]:
    """(rule, its command, its shell line) of every rule that runs `-m aiayn <command>`."""
    found = []
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text()):
            rule = re.match(r"rule (\w+):", block)
            shell = re.search(r"shell:\s*\n(.*?)(?:\n\n|\Z)", block, re.S)
            if rule and shell:
                line = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', shell.group(1)))
                command = re.search(r"-m aiayn ([\w-]+)", line)
                found.append((rule.group(1), command.group(1) if command else "", line))
    return found


@pytest.mark.parametrize("rule, command, line", shell_lines(), ids=[r for r, _, _ in shell_lines()])
def test_every_value_on_a_rule_s_shell_line_is_bound_to_a_check_and_quoted(rule, command, line):
    """Each {value} of a shell line is an option's value (`--option {value:q}`: the option's check),
    a value that carries its option with it, or one of the inventory's SHELL_VALUES; every one is
    quoted but the launcher (a command prefix built by aiayn.study.launch from whole numbers)."""
    assert command in COMMANDS, f"rule {rule} runs no command of the inventory"
    unbound = []
    for m in re.finditer(r"(?:(--[\w-]+)\s+)?\{([\w.]+)(?::(\w+))?\}", line):
        option, value, fmt = m.groups()
        if value in inventory.UNQUOTED:
            assert value in inventory.SHELL_VALUES
            continue
        if fmt != "q":
            unbound.append(f"{{{value}}} is not quoted")
        elif option:
            if option not in {**cli.options(command), **inventory.COMMON}:
                unbound.append(f"{option} {{{value}}}: {command} has no such option in the inventory")
        elif value in inventory.OPTION_LISTS:
            if inventory.OPTION_LISTS[value] not in cli.options(command):
                unbound.append(f"{{{value}}}: carries {inventory.OPTION_LISTS[value]}, not an option of {command}")
        elif value not in inventory.SHELL_VALUES:
            unbound.append(f"{{{value}}}: neither an option's value nor in aiayn.inventory.SHELL_VALUES")
    assert unbound == [], f"rule {rule}: {unbound}"


def environment_reads(path: Path) -> set[str]:
    """The names of environment variables a module reads: environ.get("X"), environ["X"],
    environ.setdefault("X", ...), os.getenv("X")."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args:
            owner = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) else ""
            reads = getattr(node.func, "attr", "") in ("get", "setdefault", "pop") and owner.endswith("environ")
            helper = ast.unparse(node.func) in ("os.getenv", "environment")  # distributed.environment reads one
            if (reads or helper) and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            if isinstance(node.slice, ast.Constant):
                found.add(node.slice.value)
    return found


def test_every_environment_variable_read_is_in_the_inventory():
    read = set().union(*(environment_reads(p) for p in (ROOT / "src/aiayn").rglob("*.py")))
    assert {"WORLD_SIZE", "OMP_NUM_THREADS", "SLURM_JOB_ID"} <= read  # the walk finds them
    assert read - set(inventory.ENVIRONMENT) == set()
    for check in inventory.ENVIRONMENT.values():
        assert callable(resolve(check.what))


def test_every_file_kind_has_a_reader_and_every_reader_is_used():
    assert all(callable(resolve(reader)) for reader in inventory.FILE_KINDS.values())
    used = {c.what for command in COMMANDS for c in cli.options(command).values() if c.kind == "file"}
    assert used <= set(inventory.FILE_KINDS)
