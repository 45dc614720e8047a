"""What every check of the check stage is, and the readings both kinds share: a `Check` (its figure,
what was expected, the usual cause), the target distribution a loss trains towards read from its
gradient (`trained_towards`), and the mistake that gives a target of a measured shape
(`smoothing_cause`). The checks on the model (aiayn.training.check) and on one real update
(aiayn.training.step_check) build on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# how far a measured figure may stray from the paper's before a check fails
LEAK_TOLERANCE = 1e-4  # output change, relative to the layer's largest output
SMOOTHING_TOLERANCE = 1e-4


@dataclass
class Check:
    """One check's outcome: `figure` the measurement in words, `measured` its numbers, and when it
    failed `cause` (what usually does it)."""

    name: str
    passed: bool
    figure: str
    expected: str
    cause: str = ""
    measured: dict = field(default_factory=dict)

    def __post_init__(self):
        self.passed = bool(self.passed)  # a comparison of tensors gives a tensor

    def line(self) -> str:
        if self.passed:
            return f"check {self.name}: ok ({self.figure}; expected {self.expected})"
        return f"check {self.name} failed: {self.figure} (expected {self.expected}); usual cause: {self.cause}"

    def record(self) -> dict:
        return {
            "check": self.name,
            "passed": self.passed,
            "figure": self.figure,
            "expected": self.expected,
            "cause": self.cause,
            "measured": self.measured,
        }


@dataclass
class Target:
    """The distribution a loss trains one position towards, read from its gradient (`trained_towards`):
    `reference` its largest class, `scale` x its total weight, `share` of it on the reference."""

    reference: int
    total: float  # scale x sum of the target's weights (the scale: the loss's normalisation, 1 for a sum)
    on_reference: float  # scale x the weight on the reference
    share: float  # weight on the reference over the total: 1 - eps_ls for the paper's target


def trained_towards(logits: torch.Tensor, grad: torch.Tensor, reference: int | None = None) -> Target:
    """A loss sum_v c_v (-log p_v) has gradient (sum c) p - c at the logits: over the classes other
    than the reference, where c is one constant, the gradient is a line in p whose slope is the total
    and whose intercept the constant; c on the reference follows. Any overall scale (a mean over
    tokens, a loss scale) multiplies every weight alike and leaves `share` as it is. Needs logits
    that are not all equal (p varying over the classes)."""
    logits, grad = logits.double(), grad.double()
    p = logits.softmax(-1)
    r = int(grad.argmin()) if reference is None else reference
    others = torch.ones_like(p, dtype=torch.bool)
    others[r] = False
    x, y = p[others], grad[others]
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / (x - x.mean()).square().sum())
    constant = float(slope * x.mean() - y.mean())
    on_reference = float(slope * p[r] - grad[r])
    total = on_reference + constant * (len(p) - 1)
    return Target(r, slope, on_reference, on_reference / total if total else float("nan"))


def smoothing_cause(total: float, on_target: float, eps_ls: float, vocab: int, tolerance=SMOOTHING_TOLERANCE) -> str:
    """The usual mistake that gives a target distribution of this sum and this weight on the reference."""
    if abs(total - 1) > tolerance:
        return (
            "eps_ls spread over every class without dividing by the vocabulary size, or not taken from the "
            f"reference: a target that is no distribution (it sums to {total:.4g})"
        )
    if abs(on_target - 1) <= tolerance and eps_ls > 0:
        return f"no smoothing: eps_ls = {eps_ls:g} lost between the settings and the loss (a one-hot target)"
    if abs(on_target - (1 - eps_ls + eps_ls / vocab)) <= max(tolerance, abs(on_target - (1 - eps_ls)) / 2):
        return (
            f"torch's label_smoothing=eps_ls convention: eps_ls/V on every class, the reference too (1 - eps_ls + "
            f"eps_ls/V = {1 - eps_ls + eps_ls / vocab:.6g} on it), not the paper's code's eps_ls/(V-1) on the others "
            "(pass eps_ls·V/(V-1) to torch, as aiayn.training.objective does)"
        )
    return f"a smoothing of {1 - on_target:.4g} on the reference, not the configured eps_ls = {eps_ls:g}"
