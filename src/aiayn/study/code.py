"""Which code a check measured: the identity of the modules that build and train a model, so that
the check stage runs again when they change (and only then), without retraining finished runs.

The check (aiayn.training.check) measures the model, the trainer's step, the loss and the schedule
as this code makes them; a check.json records `checked_code()`, and the workflow's check rule takes
it as a parameter, so that Snakemake reruns every experiment's check when the code changes.
Training takes check.json as an ancient input: a check run again retrains nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
# what builds and trains a model: its layers and attention, the trainer's step, batching, loss,
# optimizer and schedule, precision, and the checks themselves
CHECKED = ("model", "training", "runtime/schedule.py", "runtime/precision.py", "data/binary.py")


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
