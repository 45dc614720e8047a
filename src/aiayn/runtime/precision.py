"""The arithmetic a model runs in: fp32, or bf16 / fp16 autocast on GPUs (fp16 with loss scaling)."""

from __future__ import annotations

import contextlib

import torch

from aiayn.errors import UserError

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve(setting: str, device: torch.device) -> str:
    """ "fp32", "bf16" or "fp16" for a `precision` setting (the schema's enum, "auto" included) on `device`."""
    if setting == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if setting != "fp32" and device.type != "cuda":
        raise UserError(f"precision {setting} needs a GPU; use fp32 (or auto) on {device}")
    return setting


def autocast(device: torch.device, name: str):
    """The autocast context of arithmetic `name` on `device` (a no-op for fp32)."""
    dtype = DTYPES[name]
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
