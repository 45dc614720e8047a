"""Where a training process runs and how the processes of a job agree to stop: the process group
torchrun set up, this rank's device, and SIGTERM / SIGUSR1 / SIGHUP / SIGINT (a preemption, a
user, a closed terminal, Ctrl-C) or the job's coming time limit turned into one decision all ranks
take at the same update; after the stop,
the Slurm job requeues itself (`requeue`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from aiayn.errors import UserError, take_stop
from aiayn.runtime.device import choose_device


@dataclass
class Env:
    """Where this process runs: rank, world size and device; `agents`: torchrun agents (srun tasks)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    agents: int = 1

    def __post_init__(self) -> None:
        self.main = self.rank == 0  # the process that writes: checkpoints, records, the log


def environment(name: str, default: int, environ=os.environ, *, low: int = 0, below: int | None = None) -> int:
    """A whole number torchrun (or Slurm) sets in the environment, at least `low` and under `below`;
    another value is one line naming it."""
    text = environ.get(name, str(default))
    bound = f" from {low}" + (f" below {below}" if below is not None else "")
    if not text.isdigit() or int(text) < low or (below is not None and int(text) >= below):
        raise UserError(
            f"the environment variable {name}={text!r} is not a whole number{bound}; unset it or fix the launcher"
        )
    return int(text)


def setup(device: str = "auto") -> Env:
    """Join the process group torchrun set up (if any) and pick this rank's device."""
    world = environment("WORLD_SIZE", 1, low=1)
    rank = environment("RANK", 0, below=world)  # (as WORLD_SIZE says)
    dev = choose_device(device, environment("LOCAL_RANK", 0, below=world))
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
        if missing:
            raise UserError(
                f"WORLD_SIZE={world} and RANK={rank} ask for a job of several processes, but {' and '.join(missing)} "
                f"{'are' if len(missing) > 1 else 'is'} not set (where the processes meet): launch through torchrun "
                "(it sets them), or unset WORLD_SIZE and RANK to train in one process"
            )
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return Env(rank, world, dev, agents=environment("GROUP_WORLD_SIZE", 1, low=1, below=world + 1))


def hosts(env: Env) -> list[str]:
    """The hostname of every rank, by rank (a collective under several processes): where the job
    runs, in its start record and log."""
    mine = socket.gethostname()
    if env.world_size == 1:
        return [mine]
    every: list = [None] * env.world_size
    dist.all_gather_object(every, mine)
    return [str(h) for h in every]


# what torch says when a collective loses a peer: gloo ("Connection closed by peer", "Connection
# reset by peer", a broken pipe or a timeout) or NCCL (an aborted communicator, a watchdog timeout)
PEER_LOST = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "timed out",
    "timeout",
    "communicator was aborted",
    "remote process exited",
    "ncclremoteerror",
    "ncclsystemerror",
)


def peer_failure(exc: BaseException, env: Env) -> str | None:
    """The first sentence of torch's message if `exc` says another process of this job was lost (it
    crashed, was killed, or its node went away), else None: under one process, or for any other
    error, nothing is taken for a lost peer."""
    if env.world_size == 1 or not isinstance(exc, RuntimeError):
        return None
    text = str(exc).strip()
    distributed = isinstance(exc, getattr(dist, "DistError", ())) or "gloo" in text or "nccl" in text.lower()
    if not distributed or not any(marker in text.lower() for marker in PEER_LOST):
        return None
    first = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0])  # without gloo's [source file:line] prefix
    return first.split(". ")[0].rstrip(".")  # its first sentence: gloo goes on with advice of its own


class Deadline:
    """The end of this Slurm job (its time limit), read from Slurm and read again every `refresh_s`
    (an administrator may extend it): `due()` once it is `margin_s` away or less.

    Slurm's own warning (`sbatch --signal`) does not fit a Snakemake job: it is sent to every
    process of the job step, and the Snakemake jobstep and shell that wrap the trainer die of it
    and take the trainer down, mid-checkpoint. The trainer keeps the time itself instead."""

    def __init__(self, job: str, margin_s: float, *, refresh_s: float = 60.0, clock=time.time, query=None):
        self.job, self.margin_s, self.refresh_s, self.clock = job, margin_s, refresh_s, clock
        self.query = query or slurm_end_time
        self.end: float | None = None
        self.checked = -float("inf")

    def due(self) -> bool:
        now = self.clock()
        if now - self.checked >= self.refresh_s:
            self.checked = now
            end = self.query(self.job)
            if end is not None or self.end is None:
                self.end = end
        return self.end is not None and now >= self.end - self.margin_s


def slurm_end_time(job: str) -> float | None:
    """When Slurm ends job `job` (seconds since the epoch), or None (no time limit, no squeue)."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    try:
        out = subprocess.run([squeue, "-h", "-j", job, "-o", "%e"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))  # Slurm prints local time
    except ValueError:  # "N/A", "NONE", "UNLIMITED" or an error
        return None


class StopFlag:
    """Set by SIGTERM / SIGUSR1 (what Slurm sends at a preemption), SIGHUP (the terminal closed),
    SIGINT (Ctrl-C: the run stops as it would for SIGTERM, with a checkpoint; a second Ctrl-C stops
    at once), or by the job's `deadline`."""

    def __init__(self, deadline: Deadline | None = None):
        self.signal: int | None = None
        self.deadline = deadline

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._handle)
        self.signal = take_stop() or self.signal  # one received before, its Stopped swallowed: stop with a checkpoint

    def _handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            raise KeyboardInterrupt  # asked twice: no checkpoint
        self.signal = signum

    def __bool__(self) -> bool:
        return self.signal is not None or (self.deadline is not None and self.deadline.due())

    def reason(self) -> str:
        """Why the job stops, as this process knows it."""
        if self.signal is not None:
            return f"stop signal ({signal.Signals(self.signal).name})"
        if self.deadline is not None and self.deadline.due():
            return f"Slurm job {self.deadline.job} reaches its time limit in {self.deadline.margin_s:g} s or less"
        return "stop signal to another process of the job"


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


def barrier(env: Env) -> None:
    """Wait for every rank (under several processes)."""
    if env.world_size > 1:
        dist.barrier()


def all_ranks_min(value: torch.Tensor, env: Env, none: int = 0) -> torch.Tensor:
    """The smallest of every rank's `value` (an integer tensor on this rank's device), `none`
    meaning "nothing": e.g. the first update whose loss was not finite on any rank. A collective
    under several processes: every rank calls it at the same update."""
    if env.world_size == 1:
        return value
    big = torch.iinfo(value.dtype).max
    v = torch.where(value == none, torch.full_like(value, big), value).clone()
    dist.all_reduce(v, op=dist.ReduceOp.MIN)
    return torch.where(v == big, torch.full_like(v, none), v)


def requeue(env: Env, log) -> str:
    """After a stop: under Slurm, put this batch job back into the queue (`scontrol requeue`), so
    that it resumes when it runs again, as Slurm's own requeue after a preemption does (rank 0; the
    job keeps its id, and Snakemake keeps waiting on it). Says what happens next."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return "run again to resume"
    if not env.main:
        return f"Slurm job {job} requeued by rank 0"
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return "no scontrol on this node to requeue the job: run again to resume"
    run = subprocess.run([scontrol, "requeue", job], capture_output=True, text=True)
    if run.returncode:
        log(f"warning: scontrol requeue {job} failed: {(run.stderr or run.stdout).strip()}")
        return "the job could not be requeued: run again to resume"
    return f"Slurm job {job} requeued, it resumes when it runs again"
