"""The device a process computes on: `--device auto` is this process's GPU (by its local rank)
if there is one, else the CPU."""

from __future__ import annotations

import torch

from aiayn.errors import UserError


def choose_device(text: str, local_rank: int = 0) -> torch.device:
    """--device: "auto" is this process's GPU (by its local rank) if there is one, else the CPU;
    "cuda" is this process's GPU by its local rank too."""
    if text == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    device = parse_device(text)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)
    return usable(device, text)


def parse_device(text: str) -> torch.device:
    """--device as a torch device ("cpu", "cuda", "cuda:1"); a typo is a user error naming the option."""
    try:
        return torch.device(text)
    except RuntimeError:
        raise UserError(f"--device {text!r} is not a device: give auto, cpu, cuda or cuda:N") from None


def usable(device: torch.device, text: str) -> torch.device:
    """`device` if this torch on this machine can compute on it, else one line naming --device and why."""
    if device.type == "cpu":
        return device
    backend = getattr(torch, device.type, None)
    if device.type == "mps":
        backend = getattr(torch.backends, "mps", None)
    if backend is None or not backend.is_available():
        built = torch.version.cuda if device.type == "cuda" else None
        why = (
            f"this torch {torch.__version__} is built without CUDA"
            if device.type == "cuda" and not built
            else f"no {device.type} device is visible to this process"
        )
        raise UserError(f"--device {text}: {why}; give --device cpu (or auto: a GPU when there is one)")
    count = backend.device_count() if hasattr(backend, "device_count") else 1
    if device.index is not None and device.index >= count:
        raise UserError(
            f"--device {text}: this process sees {count} {device.type} device(s), numbered from 0 "
            "(CUDA_VISIBLE_DEVICES, the launcher's --gpus); give one of them, or auto"
        )
    return device
