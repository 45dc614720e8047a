"""Checkpoints on disk: self-describing files, written atomically, loaded with weights_only=True;
a run's folder of step checkpoints (listing, the newest resumable one, pruning).

A checkpoint is a dict of plain types and tensors. It always holds "model_config" (the
`ModelConfig` as a dict) and "model" (the state dict), so a model can be rebuilt from the file
alone; training adds step, settings, the vocabularies' identity ("vocab"), the run's identity
("identity", `aiayn.training.train`) and the world size it was written at. A run's folder holds
two kinds (fairseq's `--no-save-optimizer-state` for all but the last): `checkpoint_<step>.pt`,
the weights alone, on the checkpoint grid, as many as the run's averaging reads; and
`resume_<step>.pt`, the weights with the optimizer, scheduler, loss scaler, batch plan ("data")
and watch state a resume needs, the newest RESUMABLE of them. At the paper's sizes the optimizer
state is twice the weights: a resume checkpoint of big is 2.6 GB, its weights 0.86 GB. No random
state: dropout masks follow the micro-batch (`aiayn.training.objective.seed_dropout`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path

import torch

from aiayn.errors import UserError
from aiayn.io import atomic_path, readable, write_failure, zip_damage
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import Transformer, build

STEP_FILE = re.compile(r"checkpoint_(\d+)\.pt$")
RESUME_FILE = re.compile(r"resume_(\d+)\.pt$")
RESUMABLE = 2  # resume checkpoints kept: a damaged newest one falls back to the one before
# what a resume needs beyond the weights: left out of the checkpoints kept for averaging
TRAINING_STATE = ("optimizer", "scheduler", "scaler", "data", "watch")
GIVE = "give a last.pt, an average's output or a checkpoint_*.pt of a run"  # what a file that is none should be


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be used: `said` names the file and what is wrong; the message adds what
    to do (a training that falls back to an older checkpoint says `said` alone)."""

    def __init__(self, said: str, todo: str = "delete it (or move it aside) and rerun the step that wrote it"):
        super().__init__(f"{said}; {todo}")
        self.said = said


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
    """Check every record of a checkpoint file against its CRC-32 (`aiayn.io.zip_damage`): a damaged
    one raises CheckpointError."""
    if (damage := zip_damage(path)) is not None:
        if damage.startswith("not"):  # not a zip at all: a wrong file given, or one cut short
            raise CheckpointError(f"{path}: {damage}", f"{GIVE}, or where a step wrote it, delete it and rerun it")
        raise CheckpointError(f"{path}: {damage}")


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
        raise CheckpointError(f"{path}: not an aiayn checkpoint (no model_config/model)", GIVE)
    return payload


def read_identity(path: str | os.PathLike) -> dict | None:
    """The run identity a checkpoint records (None if it records none), its tensors left on disk
    (memory-mapped, not read): what averaging compares before it loads the checkpoints it averages."""
    readable(path, "a checkpoint")
    payload = _peek(path)
    if payload is None:
        return load(path).get("identity")  # which names the damage, or the I/O error, in one line
    return payload.get("identity") if isinstance(payload, dict) else None


def not_other_work(path: str | os.PathLike, kind: str) -> None:
    """Refuse, before any work, to write a model of `kind` ("average" or "trained") where a checkpoint of
    the other kind lies: an average over a run's final model, or a training's result over an average, would
    destroy finished work. Any other file at the path is an output like another (written over)."""
    payload = _peek(Path(path)) if Path(path).is_file() else None
    theirs = None if not isinstance(payload, dict) else "average" if "averaged_steps" in payload else "trained"
    if theirs is not None and theirs != kind:
        raise UserError(f"{path}: holds {'an average of checkpoints' if theirs == 'average' else 'a trained model'}, "
                        f"which writing the {kind} model there would destroy; give it another path")  # fmt: skip


def _peek(path: Path) -> dict | None:
    """A checkpoint's payload, its tensors left on disk (memory-mapped); None where it cannot be read so."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return None


def model_payload(model: Transformer) -> dict:
    return {"model_config": model.cfg.to_dict(), "model": model.state_dict()}


def rebuild(payload: dict, device="cpu") -> Transformer:
    """The model a checkpoint describes, with its weights."""
    model = build(ModelConfig.from_stored(payload["model_config"]), device=device)
    model.load_state_dict(payload["model"])
    return model


# -- a run's folder of step checkpoints ------------------------------------------------------------
def step_path(folder: str | os.PathLike, step: int) -> Path:
    """The weights of step `step` (what averaging and a missed dev pass read)."""
    return Path(folder) / f"checkpoint_{step:07d}.pt"


def resume_path(folder: str | os.PathLike, step: int) -> Path:
    """The whole training state of step `step` (what a resume reads)."""
    return Path(folder) / f"resume_{step:07d}.pt"


def weights_of(payload: dict) -> dict:
    """A training checkpoint's payload without what only a resume needs (TRAINING_STATE)."""
    return {k: v for k, v in payload.items() if k not in TRAINING_STATE}


def _listed(folder, pattern: str, name: re.Pattern) -> list[tuple[int, Path]]:
    found = [(int(m.group(1)), p) for p in Path(folder).glob(pattern) if (m := name.search(p.name))]
    return sorted(found, reverse=True)


def list_checkpoints(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of the step checkpoints (`checkpoint_<step>.pt`) of `folder`, newest first."""
    return _listed(folder, "checkpoint_*.pt", STEP_FILE)


def list_resumable(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of the resume checkpoints of `folder`, newest first; then, for a folder an
    aiayn before 0.5 wrote, its step checkpoints, each of which held the whole state."""
    return _listed(folder, "resume_*.pt", RESUME_FILE) + list_checkpoints(folder)


def newest_readable(folder: str | os.PathLike, log: Callable[[str], None]) -> dict | None:
    """The newest checkpoint of `folder` a resume can continue from (the whole training state) that
    loads; corrupt newer ones (cut short by a kill, say) are reported and skipped, and a checkpoint
    of the weights alone is passed over. An I/O error is raised (CheckpointReadError), never skipped."""
    for _, path in list_resumable(folder):
        if path.name.startswith("checkpoint_") and not _holds_training_state(path):
            continue
        try:
            state = load(path)
        except CheckpointError as exc:
            log(f"warning: {exc.said}; falling back to the previous checkpoint")
            continue
        if "optimizer" in state:
            return state
    return None


def _holds_training_state(path: Path) -> bool:
    """Whether a step checkpoint holds the optimizer's state (one written before 0.5), read without
    loading its tensors (memory-mapped); a file that cannot be read so is left to `load` to name."""
    payload = _peek(path)
    return payload is None or isinstance(payload, dict) and "optimizer" in payload


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike, lock: str | os.PathLike, doing: str = "trained"):
    """Hold a run's folder of checkpoints for this process while the block runs: a second trainer
    of the same folder (an orphaned job and its rerun, two Snakemake runs) is refused, naming the
    process that holds it, instead of two runs writing each other's checkpoints; a run's metrics
    file likewise. (flock on the file `lock` beside it, the run's own (aiayn.training.train.lock_of),
    which stays when the folder is set aside; released when the process ends, however it ends.)"""
    folder = Path(os.path.realpath(folder))  # one lock per folder, whatever link names it
    lock = Path(os.path.realpath(lock))
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(fd)
            raise UserError(
                f"{folder} is being {doing} by {holder}; stop that job (scancel or kill it) or let it finish, "
                "then run again"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"the process {os.getpid()} on {socket.gethostname()}\n".encode(), 0)  # said to a second
        except OSError as exc:
            exc.filename = str(lock)
            raise
        yield
    finally:
        os.close(fd)


def lock_holder(fd: int) -> str:
    """Who holds the flock on `fd`'s file: what its holder wrote there where that is the process the
    kernel names (Linux's /proc/locks), else that process (another program, or an aiayn that had no
    time to write: the text is an earlier holder's); the text alone where the kernel names none."""
    said = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
    st = os.fstat(fd)
    ends = (f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}", f":{st.st_ino}")
    try:
        with open("/proc/locks", encoding="ascii") as f:
            held = [r.split() for r in f if "FLOCK" in r and "->" not in r]
    except OSError:
        held = []
    for end in ends:
        pids = {r[4] for r in held if len(r) > 5 and r[5].endswith(end)}
        if len(pids) == 1:
            pid = pids.pop()
            if said.startswith(f"the process {pid} "):
                return said
            try:
                name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
            except OSError:
                name = "?"
            return f"the process {pid} ({name}) on this machine"
    return said or "another process"


def on_grid(step: int, interval: int, final: int) -> bool:
    """Whether `step` is one of the run's regular checkpoints: every `interval` updates, and the
    final one. A checkpoint written on a stop signal at another step is for resuming only."""
    return step % interval == 0 or step == final


def prune(folder: str | os.PathLike, keep: int, interval: int, final: int) -> None:
    """Keep the `keep` newest step checkpoints on the grid (what averaging reads) and the RESUMABLE
    newest resume checkpoints (what a resume reads); remove the rest. Called after a new resume
    checkpoint is written whole, so a kill at any moment leaves one to resume from."""
    steps = list_checkpoints(folder)
    resumes = [path for _, path in _listed(folder, "resume_*.pt", RESUME_FILE)]
    if not resumes:  # a folder of aiayn 0.4, whose step checkpoints are what a resume reads: kept until one is
        return
    kept = set([path for step, path in steps if on_grid(step, interval, final)][:keep])
    for _, path in steps:
        if path not in kept:
            path.unlink(missing_ok=True)
    for path in resumes[RESUMABLE:]:
        path.unlink(missing_ok=True)
