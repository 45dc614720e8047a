"""The hyperparameters of one Transformer (§3, Table 3), and the rules they must keep.

Plain Python (no torch), so that the study checks every experiment's model when the config is
read, where a mistake can still name its key, long before a training job builds the model.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

# How the weights are drawn before training (the paper does not say): "t2t", the paper's code's,
# tensor2tensor's transformer_base (initializer uniform_unit_scaling, gain 1.0 = variance scaling, fan_avg,
# uniform = Xavier-uniform; attention projections built with use_bias=False); "fairseq", fairseq 0.12's
# (MultiheadAttention.reset_parameters: "convergence is much better"). What each draws, tensor by tensor:
# `aiayn.model.transformer.initialize`.
INITS = ("t2t", "fairseq")


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of one Transformer (§3, Table 3): its shape given, as an experiment's settings
    give it (the paper's base and big are aiayn.study.paper.MODEL's, their one home)."""

    src_vocab: int
    tgt_vocab: int
    N: int
    d_model: int
    d_ff: int
    h: int
    d_k: int
    d_v: int
    P_drop: float
    P_drop_attn: float = 0.0
    positional: str = "sinusoidal"  # or "learned" (Table 3 row E)
    max_positions: int = 1024  # longest position a learned embedding covers
    pre_norm: bool = False
    shared_vocab: bool = True  # three-way weight tying (§3.4); else target embedding = projection only
    pad_id: int = 0
    init: str = "t2t"  # INITS: the paper's code (tensor2tensor), or fairseq's

    def __post_init__(self):
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(map(repr, INITS))}, got {self.init!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.shared_vocab and self.src_vocab != self.tgt_vocab:
            raise ValueError(
                f"a shared vocabulary needs src_vocab == tgt_vocab, got {self.src_vocab} and {self.tgt_vocab}"
            )

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        """Build from a mapping, rejecting keys that are not fields (a typo would otherwise be ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown model setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**values)

    @classmethod
    def from_stored(cls, values: dict) -> "ModelConfig":
        """The model a checkpoint's `model_config` describes. One written before `init` existed
        (aiayn 0.2) built its attention projections with biases: as a trained model, that is the
        architecture of init "fairseq" (how it was drawn no longer matters once trained)."""
        return cls.from_dict(values if "init" in values else {**values, "init": "fairseq"})

    @classmethod
    def from_settings(cls, model: dict, *, src_vocab: int, tgt_vocab: int, shared_vocab: bool) -> "ModelConfig":
        """The model of an experiment's `model:` settings over vocabularies of these sizes."""
        return cls.from_dict({**model, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab, "shared_vocab": shared_vocab})

    @property
    def attention_bias(self) -> bool:
        """Whether W^Q, W^K, W^V and W^O carry biases: tensor2tensor's have none, fairseq's do."""
        return self.init == "fairseq"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def init_draw(role: str, shape, cfg) -> tuple[float, float]:
    """The mean and standard deviation INITS' `cfg.init` draws the tensor of `role` (a name of
    `Transformer.paper_map`) with, as `aiayn.model.transformer.initialize` draws it (a constant: its
    value and 0). The check stage compares the drawn tensors."""
    fairseq, kind = cfg.init == "fairseq", role.split(".")[-2] if role.count(".") > 1 else role
    if "norm" in role:  # a layer norm's gain 1, its bias 0
        return float(not role.endswith(".bias")), 0.0
    if role.endswith(".bias"):  # 0; fairseq's but W^O's at nn.Linear's default, uniform(±1/sqrt(fan_in))
        return 0.0, math.sqrt(1 / (3 * (cfg.d_ff if kind == "W_2" else cfg.d_model))) * (fairseq and kind != "W_o")
    if role.endswith("_embed") or (fairseq and role.endswith("_pos")):
        return 0.0, cfg.d_model**-0.5
    xavier = math.sqrt(2 / sum(shape[:2]))  # a kernel-1 convolution's (out, in, 1) as a linear's
    if fairseq and kind in ("W_q", "W_k", "W_v"):
        return 0.0, xavier / math.sqrt(2)
    return 0.0, math.sqrt(1 / (3 * shape[1])) if fairseq and kind in ("W_1", "W_2") else xavier
