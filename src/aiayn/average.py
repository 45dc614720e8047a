"""Checkpoint averaging (§6.1): the element-wise mean of the last K checkpoints of a run."""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn import checkpoint as ckpt
from aiayn.errors import UserError


def last_checkpoints(folder: str | Path, k: int) -> list[Path]:
    """The k step checkpoints of `folder` with the highest steps, oldest first."""
    found = ckpt.list_checkpoints(folder)
    if len(found) < k:
        raise UserError(
            f"{folder}: {len(found)} step checkpoint(s), {k} are to be averaged; "
            "keep at least that many (training.keep_checkpoints) and rerun training"
        )
    return [path for _, path in reversed(found[:k])]


def average(paths: list[Path]) -> dict:
    """Mean of the models in `paths` (in fp32), with the first one's config; records the steps averaged."""
    total: dict[str, torch.Tensor] = {}
    first, steps = None, []
    for path in paths:
        state = ckpt.load(path)
        steps.append(int(state.get("step", -1)))
        if first is None:
            first = state
            total = {k: v.detach().to(torch.float32).clone() for k, v in state["model"].items()}
            continue
        for key, what in (("model_config", "another model"), ("vocab", "other vocabularies")):
            if state.get(key) != first.get(key):
                raise UserError(f"{path} has {what} than {paths[0]}; refusing to average them")
        if state["model"].keys() != total.keys():
            raise UserError(f"{path} holds other weights than {paths[0]}; refusing to average them")
        for k, v in state["model"].items():
            total[k] += v.to(torch.float32)
    mean = {k: v / len(paths) for k, v in total.items()}
    return {
        "model_config": first["model_config"],
        "model": mean,
        "vocab": first.get("vocab"),
        "settings": first.get("settings"),
        "averaged_steps": steps,
        "step": steps[-1],
    }
