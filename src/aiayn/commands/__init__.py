"""One module per `python -m aiayn <command>`: `add_arguments(add)`, which declares each argument
with `add` (its parser's add_argument) and its check as its `type` (aiayn.inventory), and `run(args)`,
which calls one library function (the helpers here turn options into values).

`aiayn.cli` imports a command's module only when that command runs, so each module imports at
the top only what its command needs (the packages of its rule's `envs/` file).
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import math
import sys
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import parse_json
from aiayn.study import config


def load_json(text: str, option: str, *, expect: type = object):
    """The value of a JSON command-line option; a clear error naming the option otherwise (a key given
    twice in one object too, as the YAML files refuse it)."""
    try:
        value = parse_json(text, finite=False)
    except ValueError as exc:
        raise UserError(f"{option} is not valid JSON: {exc}") from None
    if expect is not object and not isinstance(value, expect):
        raise UserError(f"{option}: expected a JSON {'object' if expect is dict else expect.__name__}, got {text!r}")
    return value


def settings(text: str, option: str, name: str | tuple[str, ...], *, partial: bool = False) -> dict:
    """A JSON option holding settings of the schema's kind `name` (say --decode: "decode"), checked
    against the schema and completed with its defaults, as config.yaml's are (`partial`: a part of
    such settings, the keys it requires may be left out)."""
    return config.complete(name, load_json(text, option, expect=dict), option, partial=partial)


def settings_list(text: str, option: str, name: str) -> list[dict]:
    """A JSON option holding a list of settings of the schema's kind `name` (prepare's --corpora:
    "member_pair"), each checked and completed as `settings` does."""
    items = load_json(text, option, expect=list)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError(f"{option}[{i}]: expected a JSON object, got {json.dumps(item)}")
    return [config.complete(name, item, f"{option}[{i}]") for i, item in enumerate(items)]


CHAIN_KEYS = ("table", "preset", "task", "decode", "average")


def evaluation_chain(text: str, option: str) -> dict | None:
    """A JSON option holding a row's evaluation chain (Study.evaluation_chain), or null: an object
    with CHAIN_KEYS, table 2, 3 or 4, its decode settings checked against the schema."""
    row = load_json(text, option)
    if row is None:
        return None
    missing = [k for k in CHAIN_KEYS if not isinstance(row, dict) or k not in row]
    unknown = [k for k in (row if isinstance(row, dict) else {}) if k not in CHAIN_KEYS]
    if missing:  # (keys of its own a row may carry besides; one of them may be a misspelt key it lacks)
        said = f"unknown key {unknown[0]!r}; " if unknown else ""
        keys, lacks = ", ".join(CHAIN_KEYS), ", ".join(missing)
        raise UserError(f"{option}: {said}expected null or an object with {keys}; lacks {lacks}")
    if row["table"] not in (2, 3, 4) or not isinstance(row["decode"], dict):
        raise UserError(f"{option}: table must be 2, 3 or 4 and decode an object, got {text}")
    return {**row, "decode": config.complete("decode", row["decode"], f"{option}'s decode")}


def at_least(low: int):
    """An argparse type: a whole number >= `low` (its `bound`: the inventory's check of a number)."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {low}, not {value}")
        return value

    whole.bound = f"a whole number >= {low}"
    return whole


def finite_at_least(low: float):
    """An argparse type: a finite number >= `low` (NaN and infinities refused)."""

    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {low:g}, not {text}")
        return value

    number.bound = f"a finite number >= {low:g}"
    return number


@functools.cache
def _signature_defaults(function: str) -> dict:
    module, _, name = function.rpartition(".")
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    args = node.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    return {a.arg: d for a, d in pairs}


def library_default(function: str, parameter: str):
    """The default of `parameter` of the library function `function` ("aiayn.data.encode.encode_corpus"),
    read from its source, not imported (a command's --help imports no torch): an option that the
    command passes on to that function has one default, the function's."""
    return ast.literal_eval(_signature_defaults(function)[parameter])


def say(message: str) -> None:
    """What a command logs: a line on stdout, flushed at once (the rule's log file shows progress)."""
    print(message, flush=True)


# the log of `--log-to FILE` while a command runs with it (set by aiayn.cli.log_to), else None
DETAIL_LOG = None


def say_to_log(message: str) -> None:
    """A detail a command logs: a line in its log only when it runs with --log-to (a rule's job,
    whose terminal shows the progress lines), on stdout otherwise; never on stderr, which keeps to
    a failure's one line."""
    print(message, file=DETAIL_LOG or sys.stdout, flush=True)
