"""Training watching itself: the gradient norm of every update (before clipping), and the first
update whose loss diverges, told once with what was happening there and the usual causes.

A loss diverges when it is not finite, or when its running mean (an exponential moving average
over about the last 10 updates, `SMOOTHING`) rises above `FACTOR` times the lowest that mean has
been and by more than `MARGIN` nats per target token. The mean, not the update's own loss: one
batch of hard sentences costs several times the mean of small batches, and a lucky one sets a
minimum no mean returns to; a divergence is a climb that lasts. The margin: a run near zero
loss doubles from noise alone, a real divergence climbs towards log V, several nats.
Everything is kept on the device and read only at the trainer's log and checkpoint updates, so
watching costs no synchronisation per update.
"""

from __future__ import annotations

import math

import torch

FACTOR = 2.0
MARGIN = 1.0  # nats per target token
SMOOTHING = 0.1  # the weight of an update's loss in the running mean

CAUSES = (
    "no or too short a warmup (training.warmup_steps), a learning rate too high (training.lr_scale), "
    "attention scaled by d_model instead of sqrt(d_k) (the check stage measures it: check.json), or no "
    "gradient clipping for a model off the paper's (training.clip_norm)"
)


def grad_norm(parameters) -> torch.Tensor:
    """The L2 norm of all gradients together, on their device (as clip_grad_norm_ measures it)."""
    grads = [p.grad.detach() for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if total is not None:
        return total(grads, 2.0)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)


class Watch:
    """The run's running mean loss and its lowest so far, and its first diverging update (step, its
    loss, the running mean and its lowest then, learning rate, gradient norm), as device tensors."""

    def __init__(self, device, lowest: float = math.inf, mean: float = math.nan):
        full = lambda v: torch.full((), v, dtype=torch.float64, device=device)  # noqa: E731 (a learning rate of any size)
        self.mean, self.lowest = full(mean), full(lowest)
        self.step = torch.zeros((), dtype=torch.long, device=device)  # 0: none yet
        self.loss, self.at, self.before, self.lr, self.norm = (full(0.0) for _ in range(5))
        self.told = False

    def observe(self, step: int, loss: torch.Tensor, lr: float, norm: torch.Tensor) -> None:
        """Update `step`'s loss per target token, trained at `lr` with gradient norm `norm`."""
        loss = loss.double()
        finite = torch.isfinite(loss)
        mean = torch.where(torch.isnan(self.mean), loss, (1 - SMOOTHING) * self.mean + SMOOTHING * loss)
        self.mean = torch.where(finite, mean, self.mean)
        climbed = (self.mean > FACTOR * self.lowest) & (self.mean > self.lowest + MARGIN)
        first = (~finite | climbed) & (self.step == 0)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss, self.loss)
        self.at = torch.where(first, self.mean, self.at)
        self.before = torch.where(first, self.lowest, self.before)
        self.lr = torch.where(first, torch.full_like(self.lr, lr), self.lr)
        self.norm = torch.where(first, norm.double().to(self.norm.device), self.norm)
        self.lowest = torch.minimum(self.lowest, self.mean)

    def news(self) -> dict | None:
        """The diverging update's record, the first time it is asked after one happened; else None."""
        if self.told:
            return None
        step = int(self.step.item())
        if not step:
            return None
        self.told = True
        return {
            "event": "diverging",
            "step": step,
            "loss": float(self.loss.item()),
            "mean": float(self.at.item()),
            "lowest": float(self.before.item()),
            "lr": float(self.lr.item()),
            "grad_norm": float(self.norm.item()),
        }

    def state(self) -> dict:
        """What a checkpoint keeps, so that a resumed run watches as the uninterrupted one would."""
        return {
            "mean": float(self.mean.item()),
            "lowest": float(self.lowest.item()),
            "told": self.told or bool(self.step.item()),
        }


def warning(news: dict) -> str:
    """The one log line of a diverging run."""
    loss, mean, lowest = news["loss"], news.get("mean", news["loss"]), news["lowest"]
    if not math.isfinite(loss):
        what = f"the loss is not finite ({loss})"
    else:
        times = f", {mean / lowest:.1f}x its lowest ({lowest:.4g})" if lowest > 0 else f" (lowest {lowest:.4g})"
        what = f"the loss climbed to {mean:.4g} (running mean; this update's {loss:.4g}){times}"
    return (
        f"warning: training diverges at step {news['step']}: {what}, at learning rate {news['lr']:.3e}, "
        f"gradient norm {news['grad_norm']:.4g} (before clipping); likely causes: {CAUSES}"
    )
