"""Which code a check measured: the identity of the modules that build and train a model, so that
the check stage runs again when they change (and only then), without retraining finished runs.

The check (aiayn.check) measures the trainer, the loss, the schedule and the decoder as this code
makes them; a check.json records `checked_code()`, and the workflow's check rule takes
it as a parameter, so that Snakemake reruns every experiment's check when the code changes.
A finished training takes its check.json as an ancient input: a check run again retrains nothing
(`check_is_ancient`, which says when, and why not before).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from aiayn.io import parse_json

PACKAGE = Path(__file__).resolve().parents[1]
# what builds, trains and decodes a model: its layers and attention, the trainer's step, batching, loss,
# optimizer and schedule, precision, the beam search the check runs (evaluation/translate.py's), and
# the checks themselves
CHECKED = ("model", "training", "check", "runtime/schedule.py", "runtime/precision.py", "data/binary.py",
           "evaluation/translate.py")  # fmt: skip


def checked_files(package: Path = PACKAGE) -> list[Path]:
    """The files of CHECKED under `package`, in a stable order."""
    found = []
    for name in CHECKED:
        path = package / name
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def checked_code(package: Path = PACKAGE) -> str:
    """ "code-sha256:<hex>": the SHA-256 over the names and bytes of `checked_files`. Comments and
    docstrings count too: a changed file is a changed file (a check is seconds)."""
    digest = hashlib.sha256()
    for path in checked_files(package):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return "code-sha256:" + digest.hexdigest()


def check_is_ancient(final: str | Path, forced: Iterable[str] = ()) -> bool:
    """Whether the train rule takes its check.json as an ancient input: only once the training has
    run (its final checkpoint `final` exists), and not when the train rule or `final` is among
    `forced` (what --forcerun, or --forcetargets with its targets, names).

    Ancient, a check run again (changed code, --forcerun check) retrains nothing. But Snakemake
    (9.27.1 and the floor 9.16.3) plans a job behind a re-run job only through that job: it leaves out
    every job downstream of a re-run check while it decides, and skips the ancient edge, so a
    training that must run for its own reason - its output missing, --forcerun train - and everything
    after it would not be planned at all (snakemake/snakemake#4166): after a code change the study's
    untrained runs got their checks and an exit 0, no training. Before its training has run, or when it
    is forced, the edge is therefore a plain one: the check runs, then the training. What stays:
    behind a finished run's re-run check, a job due for its own reason waits for the next
    invocation (`stale_checks` says so; docs/falls-short.md, "The check stage")."""
    if not Path(final).exists():
        return False
    named = {os.path.normpath(name) for name in forced}
    return "train" not in named and os.path.normpath(final) not in named


def stale_checks(checks: Iterable[str | Path], code: str) -> str | None:
    """One line for the terminal when some of `checks` (check.json files) measured other code than
    `code`: they run again first, and in this invocation Snakemake plans nothing behind a finished
    run's re-run check (what `check_is_ancient` cannot change: snakemake/snakemake#4166), so a job
    of such a run due for its own reason (--forcerun translate, a changed beam, a new test set) is
    planned by the next invocation. None when every existing check measured `code`."""
    stale = []
    for path in map(Path, checks):
        try:
            recorded = parse_json(path.read_text(), finite=False).get("code")
        except (OSError, ValueError, AttributeError):
            continue  # absent or unreadable: the check rule remakes it and says so
        if recorded != code:
            stale.append(path.parent.name)
    if not stale:
        return None
    names = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
    return (
        f"the checked code changed since the checks of {names} ran: they run again first, and behind a "
        "finished run's re-run check Snakemake plans nothing in this invocation (snakemake/snakemake#4166): "
        "once they pass, run the command again for what follows (or run `snakemake checks` first)"
    )
