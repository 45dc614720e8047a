"""The learning rate of §5.3: linear warmup, then decay with the inverse square root of the step."""

from __future__ import annotations


def rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5) (§5.3), times `scale`."""
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
