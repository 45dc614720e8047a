"""Every map of the code against the code: each package's docstring names each of its modules, the
Snakefile's stage order names each rule file and each rule in it, docs/development.md's source map
each module and each rule file, and aiayn.commands holds a module per command of `aiayn.cli`.

The modules and rules are enumerated from the files, so a module or rule added unnamed fails here
the day it is added."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

from aiayn.cli import COMMANDS

PACKAGE = ROOT / "src" / "aiayn"
RULES = ROOT / "workflow" / "rules"
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


def members(package: Path) -> list[str]:
    """A package's modules (`__main__` included) and subpackages, by name."""
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    return sorted(modules + [p.name for p in package.iterdir() if (p / "__init__.py").is_file()])


def rules_of(smk: Path) -> list[str]:
    """The rules a rule file defines, in its order."""
    return re.findall(r"^(?:rule|checkpoint) (\w+):", smk.read_text(encoding="utf-8"), flags=re.M)


STAGES = sorted(p.stem for p in RULES.glob("*.smk") if rules_of(p))  # common.smk defines helpers only


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.relative_to(PACKAGE.parent).as_posix())
def test_each_packages_docstring_names_each_of_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    if package.name == "commands":  # "one module per command": its modules are the commands of aiayn.cli
        assert "One module per `python -m aiayn <command>`" in doc
        assert sorted(module for module, _ in COMMANDS.values()) == [f"aiayn.commands.{m}" for m in members(package)]
        return
    unnamed = [m for m in members(package) if f"`{m}`" not in doc]
    assert not unnamed, f"{package / '__init__.py'}: its docstring does not name {', '.join(unnamed)}"


def test_the_snakefiles_stage_order_is_the_rule_files_and_their_rules():
    text = (ROOT / "Snakefile").read_text(encoding="utf-8")
    header = " ".join(line[2:] for line in text.split("\n\n")[0].splitlines() if line.startswith("# "))
    order = header.split("Read top to bottom:", 1)[1].split(". ")[0]
    said = [(stage, rules.split(", ")) for stage, rules in re.findall(r"(\w+) \(([\w, ]+)\)", order)]
    included = [Path(f).stem for f in re.findall(r'^include: "workflow/rules/(\w+\.smk)"', text, flags=re.M)]
    assert [stage for stage, _ in said] == [s for s in included if s in STAGES], (said, included)
    assert sorted(stage for stage, _ in said) == STAGES
    for stage, rules in said:
        assert rules == rules_of(RULES / f"{stage}.smk"), f"Snakefile's stage order: {stage} has {rules}"


def source_map() -> dict[str, str]:
    """docs/development.md's layout block: each entry's first column -> its whole text (its lines)."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    key = None
    for line in block.splitlines():
        if line[:22].strip():  # a new entry: its name in the first column (22 characters)
            key = line[:22].strip()
            entries[key] = line[22:]
        elif key:
            entries[key] += " " + line.strip()
    return entries


def test_the_development_source_map_lists_each_module_and_rule_file():
    entries = source_map()
    rules = entries["workflow/rules/"]
    assert [s for s in STAGES if not re.search(rf"\b{s}\b", rules)] == [] and "common.smk" in rules
    top = {key: text for key, text in entries.items() if not key.startswith(("src/", "workflow/", "tests/"))}
    for package in PACKAGES:
        if package == PACKAGE:  # its modules and folders: the entries under src/aiayn/
            named = " ".join(f"{key} {text}" for key, text in top.items())
            missing = [m for m in members(package) if f"{m}.py" not in named and f"{m}/" not in named]
        elif package.name == "commands":  # a module per command (test above)
            continue
        else:
            (entry,) = [text for key, text in top.items() if key.endswith(f"{package.name}/")]
            missing = [m for m in members(package) if not re.search(rf"\b{m}\.py\b", entry)]
        assert not missing, f"docs/development.md's source map: {package.name}/ lacks {', '.join(missing)}"
