"""One module per `python -m aiayn <command>`: `add_arguments(parser)` and `run(args)`.

`aiayn.cli` imports a command's module only when that command runs, so each module imports at
the top only what its command needs (the packages of its rule's `envs/` file).
"""

from __future__ import annotations

import json

from aiayn.errors import UserError


def load_json(text: str, option: str, *, expect: type = object):
    """The value of a JSON command-line option; a clear error naming the option otherwise."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{option} is not valid JSON: {exc}") from None
    if expect is not object and not isinstance(value, expect):
        raise UserError(f"{option}: expected a JSON {'object' if expect is dict else expect.__name__}, got {text!r}")
    return value
