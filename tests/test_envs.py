"""Each rule's conda environment lists every third-party package its command imports: read from
the source (every import statement, also inside functions), and proven by running the command in a
Python where the packages its env file does not list cannot be imported."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from aiayn.cli import COMMANDS

# import name -> package name in an env file
PACKAGE = {
    "yaml": "pyyaml",
    "jsonschema": "jsonschema",
    "torch": "torch",
    "numpy": "numpy",
    "sentencepiece": "sentencepiece",
    "sacrebleu": "sacrebleu",
    "pandas": "pandas",
    "matplotlib": "matplotlib",
    "snakemake": "snakemake",
    "pygments": "pygments",
    "sacremoses": "sacremoses",
    "google": "protobuf",
    "tabulate": "tabulate",
}

# Runs `python -m aiayn ARGS...` with the import names in argv[1] unimportable from aiayn's own code
# (a package may still import them itself, as conda would have installed them as its dependencies).
RESTRICTED = r"""
import importlib.abc, sys
blocked = set(filter(None, sys.argv[1].split(",")))

class Unlisted(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in blocked:
            return None
        frame = sys._getframe(1)
        while frame and frame.f_globals.get("__name__", "").startswith(("importlib", "_frozen_importlib")):
            frame = frame.f_back
        if frame and frame.f_globals.get("__name__", "").startswith("aiayn"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Unlisted())
from aiayn.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_restricted(blocked: set[str], *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", RESTRICTED, ",".join(sorted(blocked)), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)


def rules_with_envs():
    """(rule, env file, aiayn command) for every rule of workflow/rules that runs a command."""
    found = []
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text()):
            head = re.match(r"rule (\w+):", block)
            env = re.search(r'conda:\s*\n\s*"([^"]+)"', block)
            cmd = re.search(r"-m aiayn ([\w-]+)", block)
            if head and cmd:
                found.append((head.group(1), (smk.parent / env.group(1)).resolve() if env else None, cmd.group(1)))
    return found


def module_path(module: str) -> Path:
    path = ROOT / "src" / (module.replace(".", "/") + ".py")
    return path if path.exists() else path.with_suffix("") / "__init__.py"


def is_module(module: str) -> bool:
    return module.split(".")[0] == "aiayn" and module_path(module).exists()


def optional_imports(tree: ast.Module) -> set[int]:
    """The ids of the import statements under `try:` with an `except ImportError` (or
    ModuleNotFoundError): the code goes on without the package, so no env file needs it."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            h.type is not None and {n.id for n in ast.walk(h.type) if isinstance(n, ast.Name)} & {
                "ImportError", "ModuleNotFoundError"}
            for h in node.handlers
        ):  # fmt: skip
            found |= {
                id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))
            }
    return found


def third_party_imports(module: str, seen: set[str] | None = None) -> set[str]:
    """Third-party imports of an aiayn module (also inside functions; not the optional ones) and of
    the aiayn modules it imports."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    path = module_path(module)
    out = set()
    tree = ast.parse(path.read_text())
    optional = optional_imports(tree)
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from aiayn.runtime import checkpoint`: the package and each name that is one of its modules
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [node.module] + [m for m in subs if is_module(m)]
        for name in names:
            top = name.split(".")[0]
            if top == "aiayn":
                out |= third_party_imports(name, seen)
            elif top not in sys.stdlib_module_names:
                out.add(top)
    return out


def env_packages(path: Path) -> set[str]:
    deps = yaml.safe_load(path.read_text())["dependencies"]
    names = set()
    for dep in deps:
        for item in dep["pip"] if isinstance(dep, dict) else [dep]:
            names.add(re.split(r"[ =<>!]", item.strip())[0])
    return names


def test_every_rule_with_a_command_has_an_env():
    rules = rules_with_envs()
    assert len(rules) >= 10
    assert [r for r, env, _ in rules if env is None or not env.exists()] == []


@pytest.mark.parametrize("rule, env, command", rules_with_envs(), ids=lambda x: getattr(x, "name", str(x)))
def test_env_lists_what_the_command_imports(rule, env, command):
    assert command in COMMANDS, f"rule {rule} runs `python -m aiayn {command}`, which does not exist"
    needed = third_party_imports("aiayn.cli") | third_party_imports(COMMANDS[command][0])
    missing = {PACKAGE.get(m, m) for m in needed} - env_packages(env)
    assert missing == set(), f"rule {rule}: {env.name} lacks {missing}"


@pytest.mark.parametrize("rule, env, command", rules_with_envs(), ids=lambda x: getattr(x, "name", str(x)))
def test_command_runs_with_only_its_env_packages(rule, env, command):
    """The command starts (its module and everything it imports at the top) without the packages
    its env file does not list: `download` without torch, `tables` without torch, and so on."""
    unlisted = {name for name, package in PACKAGE.items() if package not in env_packages(env)}
    out = run_restricted(unlisted, command, "--help")
    assert out.returncode == 0, f"rule {rule} ({env.name} lacks {sorted(unlisted)}): {out.stderr.strip()}"
    assert "usage:" in out.stdout


def test_a_missing_package_is_one_clear_line(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    args = ["--checkpoints", str(tmp_path / "checkpoints"), "--last", "1", "--interval", "1", "--final-step", "1"]
    # the arguments are complete: with torch the command gets as far as the (empty) folder
    assert "0 step checkpoint(s)" in run_restricted(set(), "average", *args, "--out", str(tmp_path / "y")).stderr
    out = run_restricted({"torch"}, "average", *args, "--out", str(tmp_path / "y"))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "aiayn average: error: needs the Python package 'torch', which this environment lacks; "
        "install the project (pip install -e .) or use the rule's envs/ file"
    ]


def pyproject_ranges() -> dict[str, str]:
    """package -> its version range in pyproject.toml (dependencies and every extra)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    return {
        re.match(r"[\w.\-]+", r)[0].lower(): r[len(re.match(r"[\w.\-]+", r)[0]) :].split(";")[0] for r in requirements
    }


@pytest.mark.parametrize("env", sorted((ROOT / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_env_pins_are_inside_pyprojects_ranges(env):
    """A conda pin `=X.Y` (any X.Y.*) or pip pin `==X.Y.Z` of an env file is a version pyproject.toml
    admits, and its Python one requires-python admits: the envs install what is tested."""
    import tomllib

    from packaging.specifiers import SpecifierSet

    ranges = pyproject_ranges()
    requires_python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    outside = []
    for dep in yaml.safe_load(env.read_text())["dependencies"]:
        for item in dep["pip"] if isinstance(dep, dict) else [dep]:
            m = re.match(r"([\w.\-]+)\s*(==|=)\s*([\w.]+)", item)
            if not m:
                continue
            name, op, version = m[1].lower(), m[2], m[3]
            spec = SpecifierSet(requires_python if name == "python" else ranges.get(name, ""))
            candidates = [version] if op == "==" else [version, *(f"{version}.{n}" for n in range(30))]
            if name != "pip" and not any(spec.contains(v, prereleases=False) for v in candidates):
                outside.append(f"{name} {op}{version} (pyproject: {spec})")
    assert outside == []


# dependencies that no module imports, with what uses them
USED_OTHERWISE = {
    "snakemake": "the workflow engine itself: the Snakefile and the `snakemake` command",
    "snakemake-executor-plugin-slurm": "`--profile slurm` (profiles/slurm: executor slurm)",
    "pygments": "snakemake --report (its code listings)",
    "pytest": "the test runner",
    "snakefmt": "tests/test_workflow.py formats the Snakefile and rules with it",
    "ruff": "tests/test_workflow.py lints with it",
    "mkdocs": "builds docs/ as a site (tests/test_readme.py, CI)",
    "mkdocs-material": "the site's theme (mkdocs.yml)",
    "tensorboard": "torch.utils.tensorboard writes the event files with it (aiayn.training.progress.Board)",
}
IMPORT_NAMES = {"pyyaml": "yaml", "protobuf": "google", "snakemake-executor-plugin-slurm": None}


def imported_top_names(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_declared_dependency_is_used():
    """Each package pyproject.toml declares is imported by the package (runtime, export) or the tests
    (test extra), or is one USED_OTHERWISE says what for: none declared and unused."""
    code, tests = imported_top_names(ROOT / "src"), imported_top_names(ROOT / "tests")
    unused = []
    for name in pyproject_ranges():
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        if name not in USED_OTHERWISE and module not in code | tests:
            unused.append(name)
    assert unused == []


def private_names_of_ours() -> set[str]:
    """Every name with a leading underscore that aiayn itself defines or sets (functions, classes,
    variables, attributes, keyword arguments such as argparse's set_defaults(_module=...))."""
    ours = set()
    for path in (ROOT / "src" / "aiayn").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                ours.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                ours.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                ours.add(node.attr)
            elif isinstance(node, ast.keyword) and node.arg:
                ours.add(node.arg)
            elif isinstance(node, ast.arg):
                ours.add(node.arg)
    return {n for n in ours if n.startswith("_")}


def test_no_private_name_of_another_package():
    """No module imports from another package's private module or name, nor reads an attribute with a
    leading underscore that aiayn does not define itself (a private method of another package's
    object, such as sacreBLEU's `_extract_corpus_statistics` or CTranslate2's `_MODEL_LOADERS`)."""
    ours = private_names_of_ours()
    private = lambda name: name.startswith("_") and not (name.startswith("__") and name.endswith("__"))  # noqa: E731
    found = []
    for path in sorted((ROOT / "src" / "aiayn").rglob("*.py")):
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] != "aiayn":
                names = node.module.split(".") + [a.name for a in node.names]
                found += [f"{where}:{node.lineno} from {node.module} import {n}" for n in names if private(n)]
            elif isinstance(node, ast.Import):
                found += [
                    f"{where}:{node.lineno} import {a.name}" for a in node.names if any(map(private, a.name.split(".")))
                ]
            elif isinstance(node, ast.Attribute) and private(node.attr) and node.attr not in ours:
                found.append(f"{where}:{node.lineno} .{node.attr}")
    assert found == []
