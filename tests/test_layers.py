"""The package's shape: folders are the pipeline's stages, imports run one way down them, no module
imports itself back in a cycle, and a command is argument parsing plus one library call.

Read from the source (every import statement, also those inside functions), so a new module or
import is checked the day it is written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

from aiayn.cli import COMMANDS

PACKAGE = ROOT / "src" / "aiayn"
DEVELOPMENT = ROOT / "docs" / "development.md"


def documented_layers() -> list[set[str]]:
    """The layers docs/development.md states, bottom to top: the line after "Imports run one way, up
    these layers" of `name/` and `name.py` groups joined by arrows (the package's `aiayn` itself with
    the first)."""
    text = " ".join(DEVELOPMENT.read_text(encoding="utf-8").split())
    found = re.search(r"Imports run one way, up these layers.*?: ((?:`[^`]+`[,\s→]*)+)", text)
    assert found, f"{DEVELOPMENT}: no line 'Imports run one way, up these layers ...: `a` → `b` ...'"
    layers = [set(re.findall(r"`(\w+)(?:/|\.py)`", part)) for part in found[1].split("→")]
    layers[0].add("aiayn")
    return layers


# bottom to top: a module may import from its own layer and the layers before it
LAYERS = documented_layers()
STAGES = ["study", "data", "parsing", "model", "training", "evaluation", "check", "report", "commands"]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """The aiayn modules a file imports (`from aiayn.x import y` counts aiayn.x.y when y is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "aiayn"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "aiayn":
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES}
    return found


def layer(module: str) -> int:
    key = module.split(".")[1] if "." in module else "aiayn"
    return next(i for i, names in enumerate(LAYERS) if key in names)


def test_every_module_is_in_a_layer():
    assert len(MODULES) > 40
    assert LAYERS[:4] == [{"aiayn", "errors", "io"}, {"model"}, {"runtime"}, {"study"}], LAYERS
    assert {m: layer(m) for m in MODULES}  # raises StopIteration for a folder no layer names


def test_the_model_imports_nothing_of_aiayn_but_itself():
    """docs/development.md: `model/` imports nothing of aiayn but `model/`."""
    outside = {
        m: sorted(t for t in imports(p) if not t.startswith("aiayn.model"))
        for m, p in MODULES.items()
        if m.startswith("aiayn.model")
    }
    assert {m: t for m, t in outside.items() if t} == {}


SHARED = ["runtime"]  # folders that are no stage: what the stages share


def test_stage_folders_are_the_snakefile_s_stages():
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(STAGES + SHARED)


def test_no_stage_imports_training_but_the_commands():
    """The shared runtime (checkpoint format, device, precision, the run record, the line reader) lives
    below training and evaluation: decoding, evaluation and the report run without importing training;
    only the commands (the train and average steps) and the check stage (which runs the trainer as
    it is) call into it."""
    outside = {
        m: sorted(t for t in imports(p) if t.startswith("aiayn.training"))
        for m, p in MODULES.items()
        if not m.startswith(("aiayn.training", "aiayn.commands", "aiayn.check"))
    }
    assert {m: t for m, t in outside.items() if t} == {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_down_the_layers(module):
    up = [target for target in imports(MODULES[module]) if layer(target) > layer(module)]
    assert up == [], f"{module} (layer {layer(module)}) imports from a later stage: {up}"


def test_no_import_cycle():
    graph = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    # a package's __init__ is imported with each of its modules: an edge to the package is no cycle by itself
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1 and not m.startswith(t + "."):
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(t) :], t]))
            if t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_every_folder_and_module_says_what_it_is():
    missing = [m for m, p in MODULES.items() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert missing == [], f"modules without a docstring: {missing}"
    for folder in STAGES + SHARED:
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
        assert len(doc) > 200, f"{folder}/__init__.py: say what the stage takes in, writes, and which rules call it"


def test_every_function_reads_on_a_screen_and_names_past_four_arguments():
    """Issue 61: no function of the package over 60 lines, none taking more than 4 positional
    parameters (self and cls aside): past four, a call names what it passes."""
    long, positional = [], []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = f"{module}.{node.name} (line {node.lineno})"
                if node.end_lineno - node.lineno + 1 > 60:
                    long.append(where)
                taken = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(taken) > 4:
                    positional.append(where)
    assert long == [], f"over 60 lines: {long}"
    assert positional == [], f"more than 4 positional parameters (make the rest keyword-only): {positional}"


def library_names(tree: ast.Module) -> set[str]:
    """Names a command module imports from the library (not from aiayn.commands, its option helpers),
    at the top or inside run() (where torch would cost every --help its import)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiayn"):
            if node.module != "aiayn.commands":
                names |= {a.asname or a.name for a in node.names}
    return names


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_parses_its_arguments_and_calls_one_library_function(command):
    tree = ast.parse(MODULES[COMMANDS[command][0]].read_text())
    defs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
    others = [
        type(n).__name__ for n in tree.body[1:] if not isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef))
    ]
    assert defs == ["add_arguments", "run"] and others == [], (
        f"{command}: only add_arguments and run, got {defs} {others}"
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiayn.commands."):
            pytest.fail(f"{command} imports another command ({node.module}): move what it shares into the library")
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    library = library_names(tree)

    def called(node: ast.Call) -> str | None:
        f = node.func
        root = f
        while isinstance(root, ast.Attribute):
            root = root.value
        return ast.unparse(f) if isinstance(root, ast.Name) and root.id in library else None

    calls = [c for c in (called(n) for n in ast.walk(run) if isinstance(n, ast.Call)) if c]
    assert len(calls) == 1, f"{command}: run() calls {calls or 'no library function'}, not exactly one"


def test_no_test_module_imports_another():
    """Helpers two test modules share live in conftest.py (or toy.py, the toy task), not in a test module."""
    found = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            found += [f"{path.name} imports {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert found == []
