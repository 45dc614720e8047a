"""What a training run reports while it runs: the start record, and every `log_interval` updates
the loss, learning rate, tokens per update and per second, TFLOP/s, MFU and ETA (as a log line and
as a `metrics.jsonl` record). FLOPs are counted per update from its batches' real lengths
(`aiayn.hardware.training_flops`): TFLOP/s is what the model computed, MFU that over the GPUs' peak."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from aiayn import __version__
from aiayn.training.distributed import device_name
from aiayn.training.hardware import peak_flops


class Progress:
    """Sums of one log interval (loss on the device, read only when a record is made)."""

    def __init__(self, trainer, total_steps: int):
        self.t, self.total = trainer, total_steps
        self.start_step, self.start = trainer.step, time.perf_counter()
        self.reset()
        peak = peak_flops(device_name(trainer.env.device), trainer.arithmetic)
        self.peak = peak * trainer.env.world_size if peak else None

    def reset(self) -> None:
        self.loss = torch.zeros((), device=self.t.env.device)
        self.src = self.tgt = 0
        self.flops = 0.0
        self.mark = time.perf_counter()
        self.steps = 0

    def add(self, loss: torch.Tensor, src: int, tgt: int, flops: float) -> None:
        """One update: its loss, source and target tokens, and FLOPs (all ranks')."""
        self.loss += loss
        self.src, self.tgt, self.steps = self.src + src, self.tgt + tgt, self.steps + 1
        self.flops += flops

    def record(self, **extra) -> dict:
        """The interval's progress record (all ranks' loss); starts the next interval."""
        loss = self.loss.clone()
        if self.t.env.world_size > 1:
            dist.all_reduce(loss)
        loss = loss.item() / max(self.tgt, 1)
        seconds = time.perf_counter() - self.mark
        tps = self.tgt / seconds if seconds > 0 else 0.0
        done = self.t.step - self.start_step
        eta = (time.perf_counter() - self.start) / max(done, 1) * (self.total - self.t.step)
        per_update = max(self.steps, 1)
        tflops = self.flops / seconds / 1e12 if seconds > 0 else 0.0
        rec = {
            "step": self.t.step,
            "loss": loss,
            "lr": self.t.scheduler.get_last_lr()[0],
            "src_tokens_per_update": self.src / per_update,
            "tgt_tokens_per_update": self.tgt / per_update,
            "flops_per_update": self.flops / per_update,
            "tgt_tokens_per_s": tps,
            "tflops": tflops,
            "eta_s": eta,
            "wall": time.time(),
            **extra,
        }
        rec["mfu"] = rec["tflops"] * 1e12 / self.peak if self.peak else None
        self.reset()
        return rec


def start_record(t) -> dict:
    """The record of a job's (re)start: where and how it trains."""
    env = t.env
    return {
        "event": "start",
        "aiayn": __version__,
        "step": t.step,
        "world_size": env.world_size,
        "agents": env.agents,
        "accumulation": t.accumulation,
        "budget": t.batcher.budget,
        "params": t.params,
        "device_name": device_name(env.device),
        "precision": t.arithmetic,
        "wall": time.time(),
    }


def format_start(t, rec: dict) -> str:
    env = t.env
    tasks = f" ({env.agents} launcher tasks)" if env.agents > 1 else ""
    if rec["device_name"] != "cpu" and peak_flops(rec["device_name"], t.arithmetic) is None:
        tasks += f"; peak {t.arithmetic} FLOP/s of this GPU unknown (aiayn.hardware.PEAKS): no MFU"
    return (
        f"training {t.settings['name']}: {t.params:,} parameters on {env.world_size} x {rec['device_name']}{tasks}, "
        f"{t.accumulation} micro-batch(es) of <= {t.batcher.budget} tokens per side per process, "
        f"step {t.step} -> {t.tr['steps']}"
    )


def format_progress(rec: dict, total: int) -> str:
    mfu = f" mfu {rec['mfu']:.1%}" if rec.get("mfu") is not None else ""
    eta_s = rec["eta_s"]
    eta = time.strftime("%H:%M:%S", time.gmtime(eta_s)) if eta_s < 86400 else f"{eta_s / 86400:.1f}d"
    return (
        f"step {rec['step']}/{total} loss {rec['loss']:.4f} lr {rec['lr']:.3e} "
        f"tok/s {rec['tgt_tokens_per_s']:,.0f} "
        f"batch {rec['src_tokens_per_update']:,.0f}+{rec['tgt_tokens_per_update']:,.0f} "
        f"tflops {rec['tflops']:.2f}{mfu} eta {eta}"
    )
