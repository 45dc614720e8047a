"""The device a process computes on: `--device auto` is this process's GPU (by its local rank)
if there is one, else the CPU."""

from __future__ import annotations

import torch

from aiayn.errors import UserError


def choose_device(text: str, local_rank: int = 0) -> torch.device:
    """--device: "auto" is this process's GPU (by its local rank) if there is one, else the CPU."""
    if text == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    return parse_device(text)


def parse_device(text: str) -> torch.device:
    """--device as a torch device ("cpu", "cuda", "cuda:1"); a typo is a user error naming the option."""
    try:
        return torch.device(text)
    except RuntimeError:
        raise UserError(f"--device {text!r} is not a device: give auto, cpu, cuda or cuda:N") from None


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
