"""Where a training process runs and how the processes of a job agree to stop: the process group
torchrun set up, this rank's device, and SIGTERM / SIGUSR1 (Slurm's warning before a time limit
or preemption) turned into one decision all ranks take at the same update.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Env:
    """Where this process runs: rank, world size and device; `agents`: torchrun agents (srun tasks)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    agents: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup(device: str = "auto") -> Env:
    """Join the process group torchrun set up (if any) and pick this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return Env(rank, world, dev, agents=int(os.environ.get("GROUP_WORLD_SIZE", "1")))


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


class StopFlag:
    """Set by SIGTERM / SIGUSR1 (what Slurm sends before a time limit or preemption)."""

    def __init__(self):
        self.signal: int | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        self.signal = signum

    def __bool__(self) -> bool:
        return self.signal is not None


STOP_CHECK_INTERVAL = 10  # updates between stop-flag all-reduces when several processes train


def stop_requested(stop, env: Env, step: int) -> bool:
    """Whether any rank got a stop signal. One process: every update; several: every few updates, in lockstep."""
    if env.world_size == 1:
        return bool(stop)
    if step % STOP_CHECK_INTERVAL:
        return False
    flag = torch.tensor([1 if stop else 0], device=env.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())
