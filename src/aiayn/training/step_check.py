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
- `step_gradients`: every parameter of the model receives a gradient in the update;
- `step_padding`: no target position that is padding receives a gradient (the loss skips padding);
- `optimizer`: the update the trainer's optimizer made, against torch.optim.Adam with §5.3's numbers
  (beta1 0.9, beta2 0.98, eps 1e-9: aiayn.training.reference.PAPER_ADAM, not the config reader's)
  at §5.3's rate computed on its own, on the parameters that start at 0 (the updates are then
  exact in fp32); then a second step of the same optimizer over a gradient made to read the
  hyperparameters in closed form (the first one's, its negation and 0, by thirds): the learning
  rate of both updates, beta1, beta2 and eps measured, and a difference named by its hyperparameter.
  Where the experiment's settings change one of them deliberately, the reference takes the setting.

The update runs on the CPU in fp32 with the experiment's model, loss, optimizer and schedule, and
without torch.compile or prefetching (they change how, not what, it computes).
"""

from __future__ import annotations

import copy
import gc
import math
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


PROBE = 4096  # parameter elements the optimizer check follows at most


def probe_indices(model) -> dict:
    """Per parameter, the flat indices the optimizer check follows: the elements that start at 0
    (layer-norm and feed-forward biases: their updates are exact in fp32), else a spread of all."""
    zeros, spread, total = {}, {}, 0
    for name, param in model.named_parameters():
        flat = param.detach().reshape(-1)
        at_zero = torch.nonzero(flat == 0).flatten()
        if len(at_zero) and total < PROBE:
            zeros[name] = at_zero[: PROBE - total]
            total += len(zeros[name])
        spread[name] = torch.arange(0, flat.numel(), max(1, flat.numel() // 64))[:64]
    return {"indices": zeros if total >= 30 else spread, "exact": total >= 30}


def probe_optimizer(trainer, probe: dict, seen: dict) -> None:
    """Hooks on the trainer's optimizer that keep each followed element before and after every step,
    and its gradient then."""
    params = dict(trainer.model.named_parameters())
    steps = seen.setdefault("optimizer", [])

    def take(kind):
        return {n: getattr(params[n], kind).detach().reshape(-1)[i].double().clone() if getattr(params[n], kind)
                is not None else None for n, i in probe["indices"].items()}  # fmt: skip

    def before(optimizer, args, kwargs):
        steps.append({"before": take("data"), "grad": take("grad")})

    def after(optimizer, args, kwargs):
        steps[-1]["after"] = take("data")

    return [trainer.optimizer.register_step_pre_hook(before), trainer.optimizer.register_step_post_hook(after)]


EPS_PROBE = (1e-10, 1e-9, 1e-8, 1e-7)  # gradients of the eps probe: its update is g / (g + eps)


def second_step(trainer, seen: dict) -> None:
    """A second step of the trainer's optimizer over the first gradient rewritten by thirds of each
    parameter's elements: as it was, negated, 0 (what `optimizer_check` reads the betas from). Then
    the eps probe: a parameter group of the same optimizer (its own defaults) at learning rate 1, a
    fresh parameter at 0 whose gradients are EPS_PROBE, stepped alone: its update is g / (g + eps)."""
    for param in trainer.model.parameters():
        if param.grad is not None:
            flat = param.grad.view(-1)
            flat[1::3] = -flat[1::3]
            flat[2::3] = 0
    trainer.optimizer.step()
    for param in trainer.model.parameters():
        param.grad = None
    probe = torch.zeros(len(EPS_PROBE), requires_grad=True)
    try:
        trainer.optimizer.add_param_group({"params": [probe], "lr": 1.0})
        probe.grad = torch.tensor(EPS_PROBE, dtype=probe.dtype)
        trainer.optimizer.step()
        seen["eps_probe"] = (-probe.detach().double()).tolist()
    except Exception as error:  # an optimizer that takes no new group: eps is then not read
        seen["eps_probe_error"] = f"{type(error).__name__}: {error}"


def one_update(settings: dict, corpus: Corpus, perturb=None, trainer_class=None, optimizer=False) -> dict:
    """Run the first update of a Trainer of `settings` over `corpus` and return what it used: the
    model's inputs, its logits and their gradient, each decoder layer's output, and the largest
    gradient each parameter received. `perturb(tgt_in)` replaces the decoder input first;
    `optimizer`: the optimizer's steps on the followed elements too, and a second step (`second_step`)."""
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

    if optimizer:
        probe = probe_indices(model)
        seen["probe_exact"], seen["d_model"] = probe["exact"], model.cfg.d_model
        seen["probe_groups"] = {n: i % 3 for n, i in probe["indices"].items()}
        hooks += probe_optimizer(trainer, probe, seen)
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
        if optimizer:
            second_step(trainer, seen)
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
        if r == PAD:  # a padding target trained: step_padding's figure, not the decoder input's
            continue
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


def padding_trained(seen: dict, targets: dict) -> Check:
    padded = sum(r == PAD for r in targets.values())
    return Check(
        "step_padding",
        padded == 0,
        f"in one real update, {padded} of {len(targets)} positions trained have padding as their target",
        "none (the loss skips padding)",
        "padding targets counted in the loss (no ignore_index=PAD, or the padding not masked out of the sum): the "
        "model is trained to predict padding",
        {"padding_trained": padded, "positions": len(targets)},
    )


OPTIMIZER_TOLERANCE = 1e-3  # the updates' largest difference from the reference's, over the learning rate


def optimizer_check(seen: dict, settings: dict, d_model: int) -> Check:
    """The `optimizer` check of the module docstring, on what `one_update(optimizer=True)` kept."""
    from aiayn.training.reference import PAPER_ADAM, paper_rate

    tr = settings["train"]
    steps = [s for s in seen.get("optimizer", []) if "after" in s]
    if len(steps) < 2:
        return Check(
            "optimizer",
            False,
            f"the trainer's optimizer made {len(steps)} step(s) where 1 was asked, and a second given",
            "one update (§5.3's Adam)",
            "the optimizer not stepped in the update",
            {},
        )
    names = [
        n for n in steps[0]["before"] if steps[0]["grad"].get(n) is not None and steps[1]["grad"].get(n) is not None
    ]
    cat = lambda k, s: torch.cat([steps[s][k][n] for n in names])  # noqa: E731
    x0, g1, x1, g2, x2 = cat("before", 0), cat("grad", 0), cat("after", 0), cat("grad", 1), cat("after", 1)
    group = torch.cat([seen["probe_groups"][n] for n in names])
    # the reference: §5.3's numbers, unless the experiment sets its own; §5.3's rate at updates 1 and 2
    want = {k: float(tr[k]) if not math.isclose(tr[k], v) else v for k, v in PAPER_ADAM.items()}
    own = [f"{k} {tr[k]:g} (the paper's {v:g})" for k, v in PAPER_ADAM.items() if not math.isclose(tr[k], v)]
    rates = [paper_rate(u, d_model, tr["warmup_steps"], tr["lr_scale"]) for u in (1, 2)]
    x = x0.clone().requires_grad_(True)
    adam = torch.optim.Adam([x], lr=rates[0], betas=(want["adam_beta1"], want["adam_beta2"]), eps=want["adam_eps"])
    expected = []
    for g, lr in zip((g1, g2), rates):
        adam.param_groups[0]["lr"] = lr
        x.grad = g.clone()
        adam.step()
        expected.append(x.detach().clone())
    errors = [float((got - ref).abs().max()) / lr for got, ref, lr in zip((x1, x2), expected, rates)]
    tolerance = OPTIMIZER_TOLERANCE if seen.get("probe_exact") else 0.05
    # the hyperparameters, read in closed form (Adam's bias-corrected moments after one and two steps)
    measured = read_adam(x0, g1, x1, x2, group)
    measured["eps"] = read_eps(seen.get("eps_probe"))
    eps_off = measured["eps"] is not None and abs(math.log(max(measured["eps"], 1e-30) / want["adam_eps"])) > math.log(
        1.5
    )
    passed = max(errors) <= tolerance and not eps_off
    expected_values = {"lr_1": rates[0], "lr_2": rates[1], "beta1": want["adam_beta1"], "beta2": want["adam_beta2"],
                       "eps": want["adam_eps"]}  # fmt: skip
    off = []
    for k, v in measured.items():
        if v is None or not math.isfinite(v):
            continue
        w = expected_values[k]
        if k == "eps":
            bad = abs(math.log(max(v, 1e-30) / w)) > math.log(1.5)
        elif k.startswith("beta"):
            bad = abs(v - w) > 2e-3
        else:
            bad = abs(v / w - 1) > 1e-2
        if bad:
            off.append(f"{k} {v:.4g} (the reference's {w:.4g})")
    b1, b2 = measured.get("beta1"), measured.get("beta2")
    swapped = None not in (b1, b2) and abs(b1 - want["adam_beta2"]) < 2e-3 and abs(b2 - want["adam_beta1"]) < 2e-3
    if passed:
        cause = ""
    elif swapped:
        cause = "Adam's beta1 and beta2 swapped: (beta2, beta1) passed as betas (§5.3: beta1 0.9, beta2 0.98)"
    elif off:
        named = {"lr_1": "the learning rate of update 1", "lr_2": "the learning rate of update 2", "beta1": "beta1",
                 "beta2": "beta2", "eps": "eps"}  # fmt: skip
        cause = "the optimizer's " + ", ".join(named[o.split()[0]] for o in off) + " not §5.3's: " + "; ".join(off)
    else:
        cause = "an update that is not Adam's (weight decay, momentum, clipping inside the step, another optimizer)"
    said = ", ".join(f"{k} {v:.4g}" for k, v in measured.items() if v is not None)
    return Check(
        "optimizer",
        passed,
        f"the trainer's updates differ from torch.optim.Adam's with §5.3's numbers by {errors[0]:.2g} and "
        f"{errors[1]:.2g} of the learning rate (measured: {said})"
        + (f"; the experiment sets {', '.join(own)}" if own else ""),
        f"at most {tolerance:g} (Adam, beta1 {want['adam_beta1']:g}, beta2 {want['adam_beta2']:g}, eps "
        f"{want['adam_eps']:g}, §5.3's rate {rates[0]:.4g} then {rates[1]:.4g})",
        cause,
        {"errors": errors, "measured": measured, "expected": expected_values, "exact": bool(seen.get("probe_exact"))},
    )


def read_adam(x0, g1, x1, x2, group) -> dict:
    """Adam's learning rates, betas and eps from two steps over the followed elements: step 1's
    update is -lr1 g/(|g| + eps); step 2 over g (group 0) gives lr2 the same way, over -g (group 1)
    lr2 (1 - b1)/(1 + b1) sign(g), over 0 (group 2) -lr2 b1/(1 + b1) / sqrt(b2/(1 + b2)) sign(g)."""
    u1, u2 = x1 - x0, x2 - x1
    sign = torch.sign(g1)
    big = g1.abs() > 1e-5

    def median(values):
        values = values[torch.isfinite(values)]
        return float(values.median()) if len(values) else None

    out = {"lr_1": median((-u1 * sign)[big]), "lr_2": median((-u2 * sign)[big & (group == 0)])}
    lr2 = out["lr_2"]
    out.update(beta1=None, beta2=None, eps=None)
    if lr2:
        rho = median((u2 * sign)[big & (group == 1)] / lr2)
        if rho is not None:
            out["beta1"] = (1 - rho) / (1 + rho)
        sigma = median((-u2 * sign)[big & (group == 2)] / lr2)
        if sigma is not None and out["beta1"]:
            s2 = (sigma * (1 + out["beta1"]) / out["beta1"]) ** 2
            out["beta2"] = 1 / (s2 - 1) if s2 > 1 else None
    return out


def read_eps(updates: list[float] | None) -> float | None:
    """eps from the eps probe's updates u = g / (g + eps) at lr 1: eps = g (1/u - 1), from the
    gradient whose update is nearest 1/2 (where eps shows most)."""
    if not updates:
        return None
    g, u = min(((g, u) for g, u in zip(EPS_PROBE, updates) if u > 0), key=lambda gu: abs(gu[1] - 0.5), default=(0, 0))
    return g * (1 / u - 1) if u > 0 else None


def composed_step(settings: dict, corpus: Corpus, indices: np.ndarray, trainer_class=None) -> list[Check]:
    """The checks of the module docstring on one real update of `settings`'s trainer over the
    pairs `indices` of `corpus`."""
    small = sub_corpus(corpus, indices)
    seen = one_update(settings, small, trainer_class=trainer_class, optimizer=True)
    smoothed, targets = smoothing(seen, settings["train"]["eps_ls"])
    return [
        padding_trained(seen, targets),
        decoder_input(seen, targets),
        smoothed,
        future(settings, small, seen, trainer_class, seed=settings["train"]["seed"]),
        gradients(seen),
        optimizer_check(seen, settings, seen["d_model"]),
    ]
