"""A few real updates of the experiment's own Trainer on a sample of its data (CPU, fp32, eager),
kept by hooks that only read: every dropout mask drawn, each forward pass and each update."""

from __future__ import annotations

import contextlib
import copy
import math
import tempfile
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from aiayn.data.binary import Corpus
from aiayn.model.transformer import role_grads

DROPOUTS = {F.dropout, torch.dropout}


def _arg(args, kwargs, i, names, *, default):
    return args[i] if len(args) > i else next((kwargs[n] for n in names if n in (kwargs or {})), default)


class Draws(TorchFunctionMode):
    """Kept masks of every dropout drawn under it: 4-D ones (attention weights) apart from the others."""

    def __init__(self):
        super().__init__()
        self.masks: dict = {"residual": [], "attention": []}

    def keep(self, shape, p: float, device):
        keep = torch.rand(shape, device=device) >= p
        self.masks["attention" if len(shape) == 4 else "residual"].append(keep)
        return keep

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in DROPOUTS:
            x, p = args[0], _arg(args, kwargs, 1, ("p",), default=0.5)
            if p == 0 or not _arg(args, kwargs, 2, ("training", "train"), default=True):
                return x
            return x * self.keep(x.shape, p, x.device) / (1 - p)
        if func is F.scaled_dot_product_attention and (p := _arg(args, kwargs, 4, ("dropout_p",), default=0.0)) > 0:
            q, k, v = args[:3]
            mask = _arg(args, kwargs, 3, ("attn_mask",), default=None)
            causal = _arg(args, kwargs, 5, ("is_causal",), default=False)
            scale = _arg(args, kwargs, 6, ("scale",), default=None) or q.size(-1) ** -0.5
            scores = q @ k.transpose(-1, -2) * scale  # (B, h, T, S)
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
            if mask is not None:
                scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
            weights = scores.softmax(-1).nan_to_num(0.0)  # a query with no key to read: 0, as torch's kernel
            return weights * self.keep(weights.shape, p, q.device) / (1 - p) @ v
        return func(*args, **(kwargs or {}))


@dataclass
class Seen:
    """One forward pass as the model ran it: inputs, masks, layers' inputs and outputs, logits and their gradient."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    masks: dict
    pairs: list | None = None  # the corpus's pair of each row, once the data check has read them
    logits: torch.Tensor | None = None
    logit_grad: torch.Tensor | None = None
    io: dict = field(default_factory=lambda: defaultdict(list))  # enc_in, enc_out, dec_in, dec_mem, dec_out


@contextlib.contextmanager
def watching(model):
    """Hooks on `model` while the block runs: each forward pass (Seen, appended) and the masks drawn under its Draws."""
    seen: list[Seen] = []
    (_, layers), draws = model.paper_map(), Draws()

    def begin(module, args):
        draws.masks = {"residual": [], "attention": []}
        seen.append(Seen(args[0].detach().clone(), args[1].detach().clone(), draws.masks))

    def end(module, args, out):
        s = seen[-1]
        s.logits = out.detach().clone()
        if out.requires_grad:
            out.register_hook(lambda g: setattr(s, "logit_grad", g.detach().clone()))

    def keep(ins, out):  # a layer's inputs and output, kept
        def hook(module, args, output):
            for name, t in [*zip(ins, args), (out, output)]:
                seen[-1].io[name].append(t.detach())

        return hook

    hooks = [model.register_forward_pre_hook(begin), model.register_forward_hook(end)]
    for stack, ins, out in (("encoder", ("enc_in",), "enc_out"), ("decoder", ("dec_in", "dec_mem"), "dec_out")):
        hooks += [layer.register_forward_hook(keep(ins, out)) for layer in layers[stack]]
    try:
        yield seen, draws
    finally:
        for h in hooks:
            h.remove()


@dataclass
class Update:
    """One update of the trainer: its forward passes, its micro-batches' pairs, the parameters (by role) before
    its first step and after, the gradients stepped on, the rate of its first step and the steps taken."""

    step: int
    seen: list[Seen]
    plan: list[np.ndarray]
    before: dict
    after: dict
    grads: dict
    lr: float
    steps: int


def trainer_run(settings: dict, corpus: Corpus, updates: int, on_update, *, micro_batches: int = 6):
    """`updates` updates of the experiment's Trainer over `corpus` (fp32, eager, no prefetch; about `micro_batches`
    micro-batches, 2 an update); after each, `on_update(Update, trainer)`: None goes on. Returns its model."""
    from aiayn.training.distributed import Env
    from aiayn.training.train import RunFiles, Trainer

    longest = int(max(corpus.src_lengths.max(), corpus.tgt_lengths.max())) + 1
    total = int(max(corpus.src_lengths.sum(), corpus.tgt_lengths.sum())) + len(corpus)
    budget = max(longest, math.ceil(total / micro_batches))
    settings = copy.deepcopy(settings)
    tr = settings["train"] = {**settings["train"], "precision": "fp32", "compile": False, "prefetch": 0}
    tr.update(tokens_per_update=2 * budget, max_tokens=budget)
    with tempfile.TemporaryDirectory() as scratch:
        files = RunFiles(Path(scratch), Path(scratch, "last.pt"), Path(scratch, "metrics.jsonl"), None)
        trainer = Trainer(settings, corpus, corpus, files, env=Env(), log=lambda m: None)
        roles, _ = trainer.model.paper_map()
        kept: dict = {}

        def before(optimizer, args, kwargs):  # the update's first step: the parameters it started from
            kept["steps"] = kept.get("steps", 0) + 1
            if kept["steps"] == 1:  # and the gradients it steps on (a trainer may free them after its step)
                kept["before"] = {n: p.detach().clone() for n, p in roles.items()}
                kept["grads"] = role_grads(trainer.model, roles)
                kept["lr"] = optimizer.param_groups[0]["lr"]

        hook = trainer.optimizer.register_step_pre_hook(before)
        try:
            with watching(trainer.model) as (seen, draws):
                for step in range(1, updates + 1):
                    seen.clear()
                    with draws, warnings.catch_warnings():  # the check says what it sees in its own lines
                        warnings.simplefilter("ignore")
                        trainer.update()
                    grads = kept.pop("grads", None) or role_grads(trainer.model, roles)  # (no step taken: as now)
                    after = {n: p.detach() for n, p in roles.items()}  # (no step taken: the same before)
                    update = Update(step, list(seen), trainer.batcher.update(step), kept.pop("before", after), after,
                                    grads, kept.pop("lr", trainer.optimizer.param_groups[0]["lr"]),
                                    kept.pop("steps", 0))  # fmt: skip
                    if on_update(update, trainer) is not None:
                        break
            return trainer.model
        finally:
            hook.remove()
            trainer.prefetcher.close()  # (the trainer is collected by the caller)
