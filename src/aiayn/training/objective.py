"""What one update optimises and how: the label-smoothed loss (§5.4), Adam with §5.3's learning
rate, and the dropout masks of each micro-batch, as the trainer (`aiayn.training.train`) steps them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from aiayn.data.binary import PAD
from aiayn.runtime.schedule import rate


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps_ls: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over non-pad targets (§5.4), in the paper's code's form.

    tensor2tensor puts 1 - eps_ls on the target and spreads eps_ls over the V - 1 other classes.
    torch's `label_smoothing=e` puts e/V on every class, the target included: with e = eps_ls·V/(V-1)
    that is exactly the paper's distribution (target 1 - eps_ls, others eps_ls/(V-1)), at torch's
    speed. (t2t also subtracts the distribution's entropy, a constant: its reported loss is lower
    by that much, its gradients are the same.) torch takes e up to 1; a larger one (eps_ls above
    (V-1)/V: a small vocabulary) is the same sum written out: (1 - e)·NLL + e/V·Σ(-log p).
    """
    V = logits.size(-1)
    smoothing = eps_ls * V / (V - 1) if V > 1 else 0.0
    flat, target = logits.float().flatten(0, 1), target.flatten()
    if smoothing <= 1.0:
        return F.cross_entropy(flat, target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    logp = F.log_softmax(flat, dim=-1)  # (B*T, V)
    kept = target != PAD
    nll = -logp.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    return ((1 - smoothing) * nll - smoothing / V * logp.sum(-1))[kept].sum()


def optimizer_and_schedule(parameters, tr: dict, d_model: int, device_type: str = "cpu"):
    """Adam (§5.3: beta1, beta2, eps of `tr`, the run's `train` settings) at learning rate 1, and the
    scheduler that sets it to §5.3's rate before every update: update u (from 1) trains at
    `rate(u, d_model, warmup_steps, lr_scale)`."""
    optimizer = torch.optim.Adam(
        parameters,
        lr=1.0,
        betas=(float(tr["adam_beta1"]), float(tr["adam_beta2"])),  # JSON's 0 is an int, which torch refuses
        eps=float(tr["adam_eps"]),
        fused=device_type in ("cuda", "cpu"),  # one kernel over all parameters
    )
    warmup, scale = tr["warmup_steps"], tr["lr_scale"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: rate(s + 1, d_model, warmup, scale))
    return optimizer, scheduler


def seed_dropout(seed: int, micro_batch: int, device: torch.device) -> None:
    """Dropout masks drawn from the global index of the micro-batch: the same masks for the same
    micro-batch whichever process runs it, so 2 processes train as 1 with accumulation 2 (up to the
    rounding of gradient sums taken in another order)."""
    value = (seed * 1_000_003 + micro_batch) % (2**63)
    if device.type == "cuda":
        torch.cuda.manual_seed(value)  # this device's generator only; no synchronisation
    else:
        torch.manual_seed(value)
