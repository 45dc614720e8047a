"""Each rule's conda environment lists every third-party package its command imports."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

from aiayn.cli import COMMANDS
from conftest import ROOT

# import name -> package name in an env file
PACKAGE = {"yaml": "pyyaml", "jsonschema": "jsonschema", "torch": "torch", "numpy": "numpy",
           "sentencepiece": "sentencepiece", "sacrebleu": "sacrebleu", "sacremoses": "sacremoses",
           "pandas": "pandas", "matplotlib": "matplotlib"}


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


def third_party_imports(module: str, seen: set[str] | None = None) -> set[str]:
    """Top-level third-party imports of an aiayn module and of the aiayn modules it imports."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    path = ROOT / "src" / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
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
    if command not in COMMANDS:
        pytest.skip(f"`python -m aiayn {command}` is not implemented yet")
    needed = third_party_imports("aiayn.cli") | third_party_imports(COMMANDS[command][0])
    missing = {PACKAGE.get(m, m) for m in needed} - env_packages(env)
    assert missing == set(), f"rule {rule}: {env.name} lacks {missing}"
