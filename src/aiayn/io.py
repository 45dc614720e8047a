"""File writing that never leaves a half-written file under a final name: `atomic_paths` is the
one mechanism every writer of the package goes through (text, JSON, checkpoints, corpora,
vocabularies, archives, figures).

A writer gets temporary paths in the targets' folders, unique to it (two writers running at once
never share one), writes them, and on success each is flushed to disk, given the permissions of
an ordinary new file (the umask honoured) and renamed into place; on failure they are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    with open("/proc/self/status", encoding="ascii") as f:  # Linux: read without changing it
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: the classic set-and-restore
    os.umask(mask)
    return mask


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_paths(*targets: str | os.PathLike) -> Iterator[list[Path]]:
    """Temporary paths for `targets`, renamed into place together once the block succeeds.

    Each is a fresh `.<name>.<random>.tmp` beside its target (so the rename stays on one file
    system); the caller writes it (or replaces it). On an exception none of the targets changes.
    """
    finals = [Path(t) for t in targets]
    temps: list[Path] = []
    try:
        for final in finals:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
            os.close(fd)
            temps.append(Path(tmp))
        yield temps
        mode = 0o666 & ~_umask()  # mkstemp makes 0600; a collaborator may need to read results
        for tmp in temps:
            os.chmod(tmp, mode)
            _fsync(tmp)
        for tmp, final in zip(temps, finals):
            os.replace(tmp, final)
        for folder in {final.parent for final in finals}:
            _fsync(folder)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """`atomic_paths` for one target: `with atomic_path(out) as tmp: torch.save(x, tmp)`."""
    with atomic_paths(target) as (tmp,):
        yield tmp


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def write_json(path: str | os.PathLike, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def file_sha256(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()
