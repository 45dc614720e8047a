"""What a training run reports while it runs: the start record, and every `log_interval` updates
the loss, learning rate, gradient norm before clipping (the interval's mean and largest, over its
updates whose norm was finite), tokens per update and per second, TFLOP/s, MFU and ETA (as a log
line and as a `metrics.jsonl` record). FLOPs are counted per update from its batches' real lengths
(`aiayn.runtime.hardware.training_flops`): TFLOP/s is what the model computed, MFU that over the
GPUs' peak."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from aiayn import described
from aiayn.runtime.device import device_name
from aiayn.runtime.hardware import peak_flops
from aiayn.training.distributed import Env


class Progress:
    """Sums of one log interval (loss on the device, read only when a record is made) of a run on
    `env` in arithmetic `precision`, resumed at `step`, to end at `total`."""

    def __init__(self, *, env: Env, precision: str, step: int, total: int):
        self.env, self.total = env, total
        self.start_step, self.start = step, time.perf_counter()
        self.reset()
        peak = peak_flops(device_name(env.device), precision)
        self.peak = peak * env.world_size if peak else None

    def reset(self) -> None:
        self.loss = torch.zeros((), device=self.env.device)
        self.norm_sum = torch.zeros((), device=self.env.device)
        self.norm_max = torch.zeros((), device=self.env.device)
        self.norm_count = torch.zeros((), device=self.env.device)
        self.src = self.tgt = 0
        self.flops = 0.0
        self.mark = time.perf_counter()
        self.steps = 0

    def add(self, update: tuple) -> None:
        """One update (`Trainer.update`'s result): its loss, source and target tokens, FLOPs (all
        ranks') and gradient norm."""
        loss, src, tgt, flops, norm = update
        self.loss += loss
        norm = norm.to(self.norm_sum.device, torch.float32)  # on the device: no synchronisation
        finite = torch.isfinite(norm)  # an fp16 overflow's norm is infinite: left out
        self.norm_sum += torch.where(finite, norm, 0.0)
        self.norm_max = torch.where(finite, torch.maximum(self.norm_max, norm), self.norm_max)
        self.norm_count += finite
        self.src, self.tgt, self.steps = self.src + src, self.tgt + tgt, self.steps + 1
        self.flops += flops

    def state(self) -> dict:
        """The open interval's sums (all ranks' loss: a collective), which a checkpoint keeps so that
        the resumed run's next record is the uninterrupted run's (its time too, as time worked)."""
        loss = self.loss.clone()
        if self.env.world_size > 1:
            dist.all_reduce(loss)
        tensors = {"norm_sum": self.norm_sum, "norm_max": self.norm_max, "norm_count": self.norm_count}
        return {"loss": loss.item(), **{k: v.item() for k, v in tensors.items()}, "src": self.src, "tgt": self.tgt,
                "flops": self.flops, "steps": self.steps, "seconds": time.perf_counter() - self.mark}  # fmt: skip

    def resume(self, carried: dict) -> None:
        """Go on with the interval a checkpoint kept (`state`; rank 0 carries every rank's loss)."""
        if not carried:
            return
        for key in ("norm_sum", "norm_max", "norm_count"):
            getattr(self, key).fill_(carried[key])
        self.loss.fill_(carried["loss"] if self.env.main else 0.0)
        self.src, self.tgt, self.flops, self.steps = carried["src"], carried["tgt"], carried["flops"], carried["steps"]
        self.mark -= carried["seconds"]

    def record(self, step: int, lr: float) -> dict:
        """The interval's progress record at `step`, learning rate `lr` (all ranks' loss: a
        collective under several processes); starts the next interval."""
        loss = self.loss.clone()
        if self.env.world_size > 1:
            dist.all_reduce(loss)
        loss = loss.item() / max(self.tgt, 1)
        seconds = time.perf_counter() - self.mark
        tps = self.tgt / seconds if seconds > 0 else 0.0
        done = step - self.start_step
        eta = (time.perf_counter() - self.start) / max(done, 1) * (self.total - step)
        per_update = max(self.steps, 1)
        norms = int(self.norm_count.item())
        tflops = self.flops / seconds / 1e12 if seconds > 0 else 0.0
        rec = {
            "step": step,
            "loss": loss,
            "lr": lr,
            "src_tokens_per_update": self.src / per_update,
            "tgt_tokens_per_update": self.tgt / per_update,
            "flops_per_update": self.flops / per_update,
            "tgt_tokens_per_s": tps,
            "tflops": tflops,
            "eta_s": eta,
            "grad_norm": self.norm_sum.item() / norms if norms else None,
            "grad_norm_max": self.norm_max.item() if norms else None,
            "wall": time.time(),
            "job_s": time.perf_counter() - self.start,  # the job's hours: a clock set back moves no record
        }
        rec["mfu"] = rec["tflops"] * 1e12 / self.peak if self.peak else None
        self.reset()
        return rec


def start_record(
    *, env: Env, step: int, accumulation: int, budget: int, params: int, precision: str, hosts: list[str]
) -> dict:
    """The record of a job's (re)start: where and how it trains (`hosts`: every rank's hostname)."""
    return {
        "event": "start",
        "aiayn": described(),
        "step": step,
        "world_size": env.world_size,
        "agents": env.agents,
        "hosts": hosts,
        "accumulation": accumulation,
        "budget": budget,
        "params": params,
        "device_name": device_name(env.device),
        "precision": precision,
        # each process's CPU threads (a rule's `threads`, shared among a node's processes) and how
        # idle ones wait (aiayn.cli.thread_policy)
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "wall": time.time(),
    }


def format_start(rec: dict, *, name: str, total: int) -> str:
    """The log line of a start record of run `name`, to end at update `total`."""
    tasks = ""
    if rec["agents"] > 1:
        where = list(dict.fromkeys(rec.get("hosts", [])))  # each host once, in rank order
        tasks = f" ({rec['agents']} launcher tasks{' on ' + ', '.join(where) if where else ''})"
    if rec["device_name"] != "cpu" and peak_flops(rec["device_name"], rec["precision"]) is None:
        tasks += f"; peak {rec['precision']} FLOP/s of this GPU unknown (aiayn.runtime.hardware.PEAKS): no MFU"
    return (
        f"training {name}: {rec['params']:,} parameters on {rec['world_size']} x {rec['device_name']}{tasks}, "
        f"{rec['accumulation']} micro-batch(es) of <= {rec['budget']} tokens per side per process, "
        f"step {rec['step']} -> {total}; {rec['threads']} CPU thread(s) per process, "
        f"OMP_WAIT_POLICY {rec.get('omp_wait_policy') or 'unset'}"
    )


def format_progress(rec: dict, total: int) -> str:
    mfu = f" mfu {rec['mfu']:.1%}" if rec.get("mfu") is not None else ""
    eta_s = rec["eta_s"]
    eta = time.strftime("%H:%M:%S", time.gmtime(eta_s)) if eta_s < 86400 else f"{eta_s / 86400:.1f}d"
    gnorm = f" gnorm {rec['grad_norm']:.3g}" if rec.get("grad_norm") is not None else ""
    return (
        f"step {rec['step']}/{total} loss {rec['loss']:.4f} lr {rec['lr']:.3e}{gnorm} "
        f"tokens/update {rec['src_tokens_per_update']:,.0f} src + {rec['tgt_tokens_per_update']:,.0f} tgt, "
        f"{rec['tgt_tokens_per_s']:,.0f} tgt tokens/s "
        f"tflops {rec['tflops']:.2f}{mfu} eta {eta}"
    )
