"""The check stage's measure of the composed training step: one real update of the experiment's
own Trainer (its collate, its model, its loss, its settings), on the few pairs the other checks
use, measured on the tensors that update really uses (aiayn.training.check's job runs it).

The checks of aiayn.training.check measure each part on its own: `collate`'s shift, the loss
function's smoothing, the model's masks. What the update composes of them can still be wrong (the
target passed as the decoder input, `eps_ls` lost between the settings and the loss, a mask that
only training takes, a gradient stopped on the way). Here the update runs as training runs it, with
hooks that only read:

- `step_decoder_input`: the decoder input of the update is [BOS] + the target the update trains
  towards, shifted right; the target is read from the gradient at the logits (its largest weight);
- `step_smoothing`: the share of the target's weight on the reference token is 1 - eps_ls, the
  configured one (§5.4), read from that gradient whatever the loss's normalisation;
- `step_future`: the update replayed (the same weights, the same dropout masks) with the decoder
  input after position i replaced gives the same logits at and before i; the first decoder layer
  whose output changes is named;
- `step_gradients`: every parameter of the model receives a gradient in the update.

The update runs on the CPU in fp32 with the experiment's model, loss, optimizer and schedule, and
without torch.compile or prefetching (they change how, not what, it computes).
"""

from __future__ import annotations

import copy
import gc
import tempfile
from pathlib import Path

import numpy as np
import torch

from aiayn.data.binary import BOS, PAD, Corpus
from aiayn.training.distributed import Env
from aiayn.training.measure import LEAK_TOLERANCE, Check, smoothing_cause, trained_towards

SHARE_TOLERANCE = 1e-3  # the share on the reference, against 1 - eps_ls (fp32 gradients of a mean)


def sub_corpus(corpus: Corpus, indices: np.ndarray) -> Corpus:
    """The pairs `indices` of `corpus` as a corpus of their own (in memory), its header's vocabularies kept."""
    arrays = {}
    for side in ("src", "tgt"):
        pieces = [np.asarray(getattr(corpus, side)(int(i))) for i in indices]
        arrays[f"{side}_tokens"] = np.concatenate(pieces) if pieces else np.zeros(0, corpus.src_tokens.dtype)
        arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
    header = {**copy.deepcopy(corpus.header), "pairs": len(indices)}
    return Corpus(path=corpus.path, header=header, **arrays)


def step_settings(settings: dict) -> dict:
    """The experiment's settings as the check's update runs them: fp32, no compile, no prefetch,
    one micro-batch holding every pair."""
    out = copy.deepcopy(settings)
    out["train"].update(precision="fp32", compile=False, prefetch=0, tokens_per_update=1 << 20, max_tokens=1 << 20)
    return out


def one_update(settings: dict, corpus: Corpus, perturb=None, trainer_class=None) -> dict:
    """Run the first update of a Trainer of `settings` over `corpus` and return what it used: the
    model's inputs, its logits and their gradient, each decoder layer's output, and the largest
    gradient each parameter received. `perturb(tgt_in)` replaces the decoder input first."""
    from aiayn.training.train import RunFiles, Trainer

    trainer_class = trainer_class or Trainer
    scratch = tempfile.TemporaryDirectory()  # the run's folder, for as long as the update runs
    folder = Path(scratch.name)
    files = RunFiles(folder, folder / "last.pt", folder / "metrics.jsonl", None)
    trainer = trainer_class(step_settings(settings), corpus, None, files, Env(), log=lambda message: None)
    model = trainer.model
    seen: dict = {"inputs": [], "logits": [], "grads": [], "layers": [], "params": {}}
    hooks = []

    def before(module, args):
        src, tgt_in = args[0], args[1]
        if perturb is not None:
            tgt_in = perturb(tgt_in)
        seen["inputs"].append((src.detach().clone(), tgt_in.detach().clone()))
        seen["layers"].append([])
        return (src, tgt_in, *args[2:])

    def after(module, args, out):
        seen["logits"].append(out.detach().float().clone())
        if out.requires_grad:
            out.register_hook(lambda g: seen["grads"].append(g.detach().float().clone()))

    hooks.append(model.register_forward_pre_hook(before))
    hooks.append(model.register_forward_hook(after))
    for n, layer in enumerate(model.decoder):
        hooks.append(layer.register_forward_hook(lambda m, i, out, _n=n: seen["layers"][-1].append(out.detach())))
    for name, param in model.named_parameters():
        if param.requires_grad:

            def got(p, _name=name):
                value = float(p.grad.detach().abs().max()) if p.grad is not None else 0.0
                seen["params"][_name] = max(seen["params"].get(_name, 0.0), value)

            hooks.append(param.register_post_accumulate_grad_hook(got))
            seen["params"].setdefault(name, 0.0)
    try:
        trainer.update()
    finally:
        for h in hooks:
            h.remove()
        trainer.prefetcher.close()
        # a trainer holds reference cycles: without a collection here each replay's model, gradients
        # and Adam moments stay (the big model's check held three trainers, 11.5 GiB, not 4.8)
        del trainer, model
        gc.collect()
        scratch.cleanup()
    return seen


def _positions(seen: dict):
    """(micro-batch, row, position) of every target position the update trained (its gradient not 0)."""
    for m, grad in enumerate(seen["grads"]):  # each micro-batch's backward follows its forward: same order
        active = grad.abs().amax(-1) > 0  # (B, T)
        for b, t in zip(*torch.nonzero(active, as_tuple=True)):
            yield m, int(b), int(t)


def decoder_input(seen: dict, targets: dict) -> Check:
    total = good = 0
    unshifted = 0
    for (m, b, t), r in targets.items():
        tgt_in = seen["inputs"][m][1][b]
        total += 1
        want = BOS if t == 0 else targets.get((m, b, t - 1))
        good += want is not None and int(tgt_in[t]) == want
        unshifted += int(tgt_in[t]) == r
    cause = (
        "the target itself passed as the decoder input (not shifted right): the decoder is shown the token it "
        "must predict, copies it in training, and fails in decoding"
        if unshifted > total / 2
        else "the decoder input is not the target shifted right ([BOS] y[:-1]) in the update, though collate makes "
        "it: the update passes the model another tensor"
    )
    return Check(
        "step_decoder_input",
        total > 0 and good == total,
        f"in one real update, {good} of {total} target positions have as decoder input the previous target token "
        f"([BOS] first); {unshifted} have the target token itself",
        "every position",
        cause,
        {"positions": total, "shifted": good, "unshifted": unshifted},
    )


def smoothing(seen: dict, eps_ls: float) -> tuple[Check, dict]:
    shares, targets = [], {}
    for m, b, t in _positions(seen):
        q = trained_towards(seen["logits"][m][b, t], seen["grads"][m][b, t])
        targets[(m, b, t)] = q.reference
        shares.append(q.share)
    vocab = seen["logits"][0].size(-1) if seen["logits"] else 0
    want = 1 - eps_ls
    worst = max(shares, key=lambda s: abs(s - want)) if shares else float("nan")
    median = float(np.median(shares)) if shares else float("nan")
    passed = bool(shares) and abs(worst - want) <= SHARE_TOLERANCE
    # a share is a normalised target: eps_ls on every class besides 1 on the reference (not divided
    # by V) shows as 1 / (1 + eps_ls (V - 1)), the other mistakes as smoothing_cause reads them
    if eps_ls > 0 and abs(median - 1 / (1 + eps_ls * (vocab - 1))) < SHARE_TOLERANCE:
        cause = (
            f"eps_ls = {eps_ls:g} put on every class besides 1 on the reference (not divided by the vocabulary size): "
            "a target that is no distribution"
        )
    else:
        cause = smoothing_cause(1.0, median, eps_ls, vocab, SHARE_TOLERANCE)
    check = Check(
        "step_smoothing",
        passed,
        f"in one real update, the target trained towards puts {median:.6g} of its weight on the reference token "
        f"(median of {len(shares)} positions; furthest {worst:.6g})",
        f"1 - eps_ls = {want:g} (the configured eps_ls, §5.4; within {SHARE_TOLERANCE:g})",
        cause,
        {"median_share": median, "furthest_share": worst, "positions": len(shares), "eps_ls": eps_ls},
    )
    return check, targets


def future(settings: dict, corpus: Corpus, seen: dict, trainer_class=None, seed: int = 0) -> Check:
    src, tgt_in = seen["inputs"][0]
    T, V = tgt_in.size(1), seen["logits"][0].size(-1)
    generator = torch.Generator().manual_seed(seed)
    first, worst = None, (0.0, 0)
    for i in sorted({0, max(0, (T - 1) // 2)}):
        if i >= T - 1:
            continue
        noise = torch.randint(min(PAD + 4, V - 1), V, (tgt_in.size(0), T - i - 1), generator=generator)

        def perturb(x, _i=i, _noise=noise):
            x = x.clone()
            x[:, _i + 1 :] = _noise[: x.size(0), : x.size(1) - _i - 1]
            return x

        replay = one_update(settings, corpus, perturb, trainer_class)
        base_layers, new_layers = seen["layers"][0], replay["layers"][0]
        for n, (a, b) in enumerate([*zip(base_layers, new_layers), (seen["logits"][0], replay["logits"][0])]):
            scale = max(1.0, float(a[:, : i + 1].abs().max()))
            change = float((a[:, : i + 1] - b[:, : i + 1]).abs().max()) / scale
            if change > worst[0]:
                worst = (change, i)
            if change > LEAK_TOLERANCE and (first is None or n < first[0]):
                first = (n, i, change)
    layers = len(seen["layers"][0])
    if first is not None:
        where = "the projection" if first[0] == layers else f"decoder layer {first[0] + 1}'s self-attention"
        figure = (
            f"in one real update (the same weights and dropout), changing the decoder input after position {first[1]} "
            f"changed the output at or before it by {first[2]:.2g}, first in {where}"
        )
    else:
        figure = (
            "in one real update (the same weights and dropout), changing the decoder input after a position changed "
            f"no output at or before it (largest {worst[0]:.2g})"
        )
    return Check(
        "step_future",
        first is None,
        figure,
        f"no change (at most {LEAK_TOLERANCE:g}) in any of the {layers} decoder layers",
        "a causal mask the training step does not apply (a mask only in eval, an attention path of its own "
        "for training, the mask dropped with dropout): training sees the future, decoding does not",
        {"largest_change": worst[0], "layer": None if first is None else first[0] + 1},
    )


def gradients(seen: dict) -> Check:
    params = seen["params"]
    none = [name for name, value in params.items() if not value > 0]
    groups: dict[str, int] = {}
    for name in none:
        head = ".".join(name.split(".")[:2]) if name.split(".")[0] in ("encoder", "decoder") else name.split(".")[0]
        groups[head] = groups.get(head, 0) + 1
    said = ", ".join(f"{k} ({v})" for k, v in groups.items())
    return Check(
        "step_gradients",
        not none,
        f"in one real update, {len(params) - len(none)} of {len(params)} parameter tensors received a gradient"
        + (f"; none reached {said}" if none else ""),
        "every parameter tensor",
        "the graph cut before them (a .detach(), torch.no_grad() or .data on the way, a layer left out of the "
        "forward pass): those weights never train",
        {"parameters": len(params), "without_gradient": none},
    )


def composed_step(settings: dict, corpus: Corpus, indices: np.ndarray, trainer_class=None) -> list[Check]:
    """The four checks of the module docstring on one real update of `settings`'s trainer over the
    pairs `indices` of `corpus`."""
    small = sub_corpus(corpus, indices)
    seen = one_update(settings, small, trainer_class=trainer_class)
    smoothed, targets = smoothing(seen, settings["train"]["eps_ls"])
    return [
        decoder_input(seen, targets),
        smoothed,
        future(settings, small, seen, trainer_class, seed=settings["train"]["seed"]),
        gradients(seen),
    ]
