"""Self-describing checkpoints: written atomically, loaded with weights_only=True.

A checkpoint is a dict of plain types and tensors. It always holds "model_config" (the
`ModelConfig` as a dict) and "model" (the state dict), so a model can be rebuilt from the file
alone; training adds step, optimizer, scheduler, RNG and data position.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from aiayn.errors import UserError
from aiayn.model import ModelConfig, Transformer, build


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be used; the message names the file."""


def save(payload: dict, path: str | os.PathLike) -> None:
    """Write `payload` to a temporary file beside `path`, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def copy(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Copy a checkpoint file into place atomically."""
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike, map_location="cpu") -> dict:
    """Read a checkpoint; a missing, truncated or foreign file raises CheckpointError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, EOFError, pickle errors, zipfile errors...
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or "model_config" not in payload or "model" not in payload:
        raise CheckpointError(f"{path}: not an aiayn checkpoint (no model_config/model)")
    return payload


def model_payload(model: Transformer) -> dict:
    return {"model_config": model.cfg.to_dict(), "model": model.state_dict()}


def rebuild(payload: dict, device="cpu") -> Transformer:
    """The model a checkpoint describes, with its weights."""
    model = build(ModelConfig.from_dict(payload["model_config"]), device=device)
    model.load_state_dict(payload["model"])
    return model
