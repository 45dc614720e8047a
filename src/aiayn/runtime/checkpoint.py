"""Checkpoints on disk: self-describing files, written atomically, loaded with weights_only=True;
a run's folder of step checkpoints (listing, the newest readable one, pruning).

A checkpoint is a dict of plain types and tensors. It always holds "model_config" (the
`ModelConfig` as a dict) and "model" (the state dict), so a model can be rebuilt from the file
alone; training adds step, optimizer, scheduler, loss scaler, batch plan ("data"), settings, the
vocabularies' identity ("vocab"), the run's identity ("identity", `aiayn.training.resume`) and the
world size it was written at. No random state: dropout masks follow the micro-batch
(`aiayn.training.objective.seed_dropout`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import torch

from aiayn.errors import UserError
from aiayn.io import atomic_path, readable, write_failure
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import Transformer, build

STEP_FILE = re.compile(r"checkpoint_(\d+)\.pt$")


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be used; the message names the file."""


def save(payload: dict, path: str | os.PathLike) -> None:
    """Write a checkpoint atomically. torch reports a failed write (a full disk) as a RuntimeError
    naming no file: it is raised as the OSError it is, naming the checkpoint."""
    with atomic_path(path) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:
            tmp.write_bytes(b"")  # what was written of it is no longer counted against the disk
            raise write_failure(path, exc, needed=_tensor_bytes(payload)) from None


def _tensor_bytes(obj) -> int:
    """The bytes of the tensors in a (nested) checkpoint payload: what writing it needs."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


class CheckpointReadError(UserError, OSError):
    """The file system failed to read a checkpoint (not a corrupt file): the message names it. A
    resume stops on it rather than fall back to an older checkpoint and lose the progress."""


def _read_error(path: Path, exc: OSError) -> CheckpointReadError:
    return CheckpointReadError(
        f"{path}: reading failed ({exc.strerror or exc}); not falling back to an older checkpoint, which would "
        "lose the progress since: run again once the file system reads it"
    )


def _probe(path: Path, block: int = 1 << 24) -> None:
    """Read the whole file plainly: an OSError here is the file system's, not the file's contents."""
    with open(path, "rb") as f:
        while f.read(block):
            pass


def verify(path: Path) -> None:
    """Check every record of a checkpoint file against its CRC-32 (torch writes a zip file; its load
    does not check them, so a flipped bit would be used): a damaged one raises CheckpointError."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    except zlib.error as exc:
        bad = f"({exc})"
    if bad is not None:
        raise CheckpointError(
            f"{path}: a damaged checkpoint (record {bad} does not match its checksum); delete it and rerun the step "
            "that wrote it"
        )


def load(path: str | os.PathLike, map_location="cpu") -> dict:
    """Read a checkpoint, every record checked against its checksum first. A missing, truncated,
    damaged or foreign file raises CheckpointError naming it; a file the file system cannot read
    (an I/O error) raises CheckpointReadError."""
    path = readable(path, "a checkpoint")
    try:
        verify(path)
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except CheckpointError:
        raise
    except OSError as exc:
        raise _read_error(path, exc) from None
    except Exception as exc:  # torch raises RuntimeError, EOFError, pickle errors, zipfile errors...
        try:
            _probe(path)  # torch wraps some I/O errors: tell those from corruption
        except OSError as io_exc:
            raise _read_error(path, io_exc) from None
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {first})") from None
    if not isinstance(payload, dict) or "model_config" not in payload or "model" not in payload:
        raise CheckpointError(f"{path}: not an aiayn checkpoint (no model_config/model)")
    return payload


def read_identity(path: str | os.PathLike) -> dict | None:
    """The run identity a checkpoint records (None if it records none), its tensors left on disk
    (memory-mapped, not read): what averaging compares before it loads the checkpoints it averages."""
    readable(path, "a checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return load(path).get("identity")  # which names the damage, or the I/O error, in one line
    return payload.get("identity") if isinstance(payload, dict) else None


def model_payload(model: Transformer) -> dict:
    return {"model_config": model.cfg.to_dict(), "model": model.state_dict()}


def rebuild(payload: dict, device="cpu") -> Transformer:
    """The model a checkpoint describes, with its weights."""
    model = build(ModelConfig.from_stored(payload["model_config"]), device=device)
    model.load_state_dict(payload["model"])
    return model


# -- a run's folder of step checkpoints ------------------------------------------------------------
def step_path(folder: str | os.PathLike, step: int) -> Path:
    return Path(folder) / f"checkpoint_{step:07d}.pt"


def list_checkpoints(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of the step checkpoints of `folder`, newest first."""
    found = [(int(m.group(1)), p) for p in Path(folder).glob("checkpoint_*.pt") if (m := STEP_FILE.search(p.name))]
    return sorted(found, reverse=True)


def newest_readable(folder: str | os.PathLike, log: Callable[[str], None]) -> dict | None:
    """The newest checkpoint of `folder` that loads; corrupt newer ones (cut short by a kill, say)
    are reported and skipped. An I/O error is raised (CheckpointReadError), never skipped."""
    for _, path in list_checkpoints(folder):
        try:
            return load(path)
        except CheckpointError as exc:
            log(f"warning: {exc}; falling back to the previous checkpoint")
    return None


LOCK = ".train.lock"  # beside a run's folder of checkpoints: held by its one trainer while it trains


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike):
    """Hold a run's folder of checkpoints for this process while the block runs: a second trainer
    of the same folder (an orphaned job and its rerun, two Snakemake runs) is refused, naming the
    process that holds it, instead of two runs writing each other's checkpoints. (flock on the file
    LOCK beside the folder, which stays when the folder is set aside; released when the process
    ends, however it ends.)"""
    folder = Path(os.path.realpath(folder))  # one lock per folder, whatever link names it
    lock = folder.parent / LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "another process"
            raise UserError(
                f"{folder} is being trained by {holder}; stop that job (scancel or kill it) or let it finish, "
                "then run again"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"the process {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError as exc:
            exc.filename = str(lock)
            raise
        yield
    finally:
        os.close(fd)


def on_grid(step: int, interval: int, final: int) -> bool:
    """Whether `step` is one of the run's regular checkpoints: every `interval` updates, and the
    final one. A checkpoint written on a stop signal at another step is for resuming only."""
    return step % interval == 0 or step == final


def prune(folder: str | os.PathLike, keep: int, interval: int, final: int) -> None:
    """Keep the `keep` newest checkpoints on the grid (what averaging reads) and the newest of all
    (what a resume reads); remove the rest."""
    found = list_checkpoints(folder)
    grid = [path for step, path in found if on_grid(step, interval, final)][:keep]
    kept = set(grid) | {found[0][1]} if found else set()
    for _, path in found:
        if path not in kept:
            path.unlink(missing_ok=True)
