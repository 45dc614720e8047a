"""The `training` invariant: each update of the trainer equals the paper's from the same parameters
(the logits in training mode, the loss's gradient up to one scale, the parameters' gradients, the
optimizer's step), and the first update, quantity and place that differ are named."""

from __future__ import annotations

import math

import torch

from aiayn.check.data import paper_batch, paper_rows, read_rows
from aiayn.check.mistakes import LOSS, OPTIMIZER, TOLERANCE, Departure, failed, locate
from aiayn.check.reference import DTYPE, Reference, adam_step, change, closest_form, paper_rate, smoothed_target
from aiayn.data.binary import PAD

UPDATES = 3
STEP_TOLERANCE = 1e-3  # the step's largest difference from Adam's, over the rate or the step (beyond fp32 rounding)
# each tensor's gradient, its difference in norm over its norm: a ReLU input within fp32's rounding of 0 passes
# on one side and not the other (up to 0.06 on the toy model; a smaller share at larger sizes)
GRADIENT_TOLERANCE = 0.1
PROBE = 1 << 16  # elements of each tensor the optimizer's step is compared on


class Training:
    """What the check's run showed: `on_update` reads each update (data, then training)."""

    def __init__(self, settings: dict, corpus, cfg):
        self.tr, self.corpus, self.cfg = settings["train"], corpus, cfg
        self.form, self.departure, self.initial, self.data_wrong, self.history = None, None, {}, [], []
        self.figures = {"logits": 0.0, "loss": 0.0, "gradients": 0.0, "step": 0.0}
        self.fed, self.lrs, self.updates, self.nonfinite, self.draws, self.dev = [], [], 0, 0, [], None

    def fresh(self, seen, name: str) -> str | None:
        """Whether the pass drew its dropout afresh (§5.4): n first places, a chance match below 1e-12."""
        p = self.cfg.P_drop
        n = math.ceil(math.log(1e-12) / math.log(p * p + (1 - p) ** 2)) if 0 < p < 1 else 0
        first = [m.flatten()[:n] for m in seen.masks["residual"][:1] if m.numel() >= n > 0]
        again = [o for o, s in self.draws for f in first if s.equal(f)]
        self.draws += [(name, f) for f in first]
        return f"{name} drew the dropout masks of {again[0]} again (a generator seeded alike)" if again else None

    def on_update(self, up, trainer):
        """One update of the check's run: "data" or "training" where it departs (the run then stops)."""
        self.lrs.append(up.lr)
        self.updates = up.step
        if up.step == 1:  # the weights as the trainer drew them: each tensor's shape and spread (of 2 elements up)
            self.initial = {n: (tuple(t.shape), float(t.double().mean()), float(t.double().std()))
                            for n, t in up.before.items() if t.numel() > 1}  # fmt: skip
        if not all(bool(torch.isfinite(t).all()) for t in [s.logits for s in up.seen] + [*up.grads.values()]):
            if up.step == 1:  # from the weights as drawn: the code's, not the rate's (the trainer stops too)
                self.departure = Departure("the first update", "the weights as drawn", seen="not finite")
            self.nonfinite = up.step
            up.seen = []
        for m, (seen, pairs) in enumerate(zip(up.seen, up.plan)):
            seen.pairs, wrong = read_rows(self.corpus, pairs, seen)
            self.fed += seen.pairs
            self.data_wrong += [f"update {up.step}, micro-batch {m + 1}: {w}" for w in wrong[:1]]
        if len(set(first := self.fed[: len(self.corpus)])) < len(first):  # an epoch: each pair once
            again = next(p for i, p in enumerate(first) if p in first[:i])
            self.data_wrong.append(f"update {up.step}: pair {again} fed again before the epoch's other pairs were")
        if len(up.seen) != len(up.plan) and not self.nonfinite:
            self.data_wrong.append(f"update {up.step}: {len(up.seen)} forward passes, {len(up.plan)} planned")
        stop = "data" if self.data_wrong else "not finite" if self.nonfinite else None
        if stop is None:
            try:
                self.departure = (parameters(trainer.model) if up.step == 1 else None) or self.compare(up, trainer)
                if self.departure is None and up.step == 1 < UPDATES:  # as at a checkpoint; then training mode
                    self.dev = evaluation(trainer.evaluate(), up.after, self)  # said unless a rate too high
            except Exception as error:  # the experiment's code, or the map the reference reads, fails
                self.departure = Departure("", "", seen=failed(error))
            if self.departure is None and up.step == UPDATES:  # the run stayed finite: a dev pass apart is the code's
                self.departure = self.dev
            stop = "training" if self.departure is not None else None
        if stop is not None or up.step == UPDATES:  # the trainer's rate to 2 x warmup_steps
            for _ in range(len(self.lrs), 2 * self.tr["warmup_steps"]):
                self.lrs.append(trainer.optimizer.param_groups[0]["lr"])
                trainer.scheduler.step()
        if self.departure is not None and self.departure.update is None:
            self.departure.update = up.step
        return stop

    def compare(self, up, trainer) -> Departure | None:
        cfg, tr = self.cfg, self.tr
        if up.steps != 1:
            said = f"{up.steps} steps in an update of {len(up.seen)} micro-batches (one, on their summed gradient)"
            return Departure("the number of optimizer steps", "the update", seen=said)
        params = {n: t.to(DTYPE).requires_grad_(True) for n, t in up.before.items()}  # the snapshot itself
        outs = [[paper_rows(self.corpus, i)[2] for i in s.pairs] for s in up.seen]  # the targets trained
        tokens, targets = sum(len(o) for rows in outs for o in rows), []
        for m, (seen, rows) in enumerate(zip(up.seen, outs)):
            said = masks_said(seen, cfg) or self.fresh(seen, f"update {up.step}'s micro-batch {m + 1}")
            if said:
                return Departure("the dropout (training mode)", f"micro-batch {m + 1}", seen=said)
            self.form = self.form or closest_form(params, cfg, seen)
            logits = Reference(params, cfg, self.form, seen.masks).forward(seen.src, seen.tgt_in)
            target = torch.tensor([o + [PAD] * (seen.tgt_in.size(1) - len(o)) for o in rows])
            amount = change(seen.logits, logits, target != PAD)
            self.figures["logits"] = max(self.figures["logits"], amount)
            if amount > TOLERANCE:
                found = locate(seen, {n: p.detach() for n, p in params.items()}, cfg, self.form)
                found = found or Departure("the forward pass", "the logits", amount)
                found.quantity, found.where = "the logits (training mode)", f"micro-batch {m + 1}, {found.where}"
                return found
            q = smoothed_target(target, cfg.tgt_vocab, tr["eps_ls"], PAD)
            (-(q * logits.log_softmax(-1)).sum() / tokens).backward()
            targets.append(target)
        found = loss(up, targets, tokens, self)[0] or gradients(up, params, self)
        for p in params.values():  # the reference's gradients, before the optimizer's step is read
            p.requires_grad_(False).grad = None
        return found or step(up, self)


def evaluation(values: dict, params: dict, t: Training) -> Departure | None:
    """The trainer's dev pass (`evaluate`, after update 1, over the check's pairs) against the reference in
    eval mode over the same pairs: the NLL per target token (its perplexity's log, Table 3's PPL)."""
    src, tgt_in, tgt_out = paper_batch(t.corpus, range(len(t.corpus)))
    with torch.no_grad():
        logp = Reference({n: p.to(DTYPE) for n, p in params.items()}, t.cfg, t.form).forward(src, tgt_in)
    nll = float(-logp.double().log_softmax(-1).gather(-1, tgt_out[..., None])[tgt_out != PAD].mean())
    off = abs(float(values.get("dev_nll", math.inf)) / nll - 1)
    if math.isfinite(off):  # a mean over the target tokens: held to 1e-4 (fp32's rounding is near 1e-6)
        t.figures["evaluation"] = off
    said = f"it gives {values.get('dev_nll')} where §3's eval-mode pass (no dropout) gives {nll:.6g} per target token"
    return None if off <= TOLERANCE / 10 else Departure("the dev pass (evaluate)", "its NLL", off, seen=said, update=1)


def parameters(model) -> Departure | None:
    """Every parameter in the map (none §3 lacks, as an untied projection), §3.3's FFN biases among them."""
    roles = model.paper_map()[0]
    mapped = {t.untyped_storage().data_ptr() for t in roles.values()}  # (a fused linear's matrices: views of it)
    extra = ", ".join([n for n, p in model.named_parameters() if p.untyped_storage().data_ptr() not in mapped][:3])
    lacking = [b for n in roles if ".ffn.W_" in n and (b := n.replace(".weight", ".bias")) not in roles]
    said = f"parameters outside §3's map (§3 has none such, or not in this shape): {extra}" if extra else \
        f"no FFN biases, where §3.3 has b1 and b2: {', '.join(lacking[:2])} missing"  # fmt: skip
    return Departure("the set of parameters", "the model", seen=said) if extra or lacking else None


def masks_said(seen, cfg) -> str | None:
    """Whether the model drew §5.4's dropout masks, as many as the paper has places."""
    want = {"residual": (2 + 5 * cfg.N) * (cfg.P_drop > 0), "attention": 3 * cfg.N * (cfg.P_drop_attn > 0)}
    got = {k: len(v) for k, v in seen.masks.items()}
    lengths = {seen.src.size(1), seen.tgt_in.size(1)}  # an attention mask is on weights (B, h, T, S)
    residual, attention = seen.masks["residual"], seen.masks["attention"]
    if got == want and all(m.size(-1) == cfg.d_model for m in residual) and \
            all(m.size(1) == cfg.h and m.size(-1) in lengths for m in attention):  # fmt: skip
        return None
    return f"the model drew {got['residual']} residual and {got['attention']} attention dropout masks where §5.4 " \
        f"places {want['residual']} (sublayer outputs, embedding sums) and {want['attention']}"  # fmt: skip


def fit(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """The scale c that brings `want` closest to `got`, and how far c want is from it."""
    c = float(got @ want / (want @ want)) if float(want @ want) > 0 else 0.0
    return c, change(got, c * want, floor=0.0) if c > 0 else math.inf


def loss(up, targets: list, tokens: int, t: Training) -> tuple[Departure | None, float]:
    """The gradient the loss gave the logits against §5.4's, up to one scale (returned; judged in `gradients`)."""

    def paper(form: str = "paper"):  # §5.4's gradient at the logits, or a known mistake's (LOSS)
        qs = [smoothed_target(target, t.cfg.tgt_vocab, t.tr["eps_ls"], PAD, form=form) for target in targets]
        return torch.cat([((s.logits.double().softmax(-1) * q.sum(-1, keepdim=True) - q) / tokens).flatten()
                          for s, q in zip(up.seen, qs)])  # fmt: skip

    got = torch.cat([(torch.zeros_like(s.logits) if s.logit_grad is None else s.logit_grad).flatten() for s in up.seen])
    got = got.double()
    scale, amount = fit(got, paper())
    t.figures["loss"] = max(t.figures["loss"], amount)
    mistakes = {said: fit(got, paper(form))[1] for said, form in LOSS}  # one fitting 10 x closer is what it is
    closer = [said for said, off in mistakes.items() if off < amount / 10 and amount > 1e-6]  # (a large vocabulary)
    if amount <= TOLERANCE and not closer:  # its scale is judged on what the optimizer steps on (gradients)
        return None, scale
    causes = closer or [said for said, off in mistakes.items() if off <= TOLERANCE]
    return Departure("the gradient the loss gives the logits", "the update's target tokens", amount, causes), scale


def gradients(up, params, t: Training) -> Departure | None:
    """The parameters' gradients the optimizer steps on against the reference's backward pass (§5.4's mean
    over the update's target tokens, clipped), a tensor at a time (the big model's gradients are 0.85 GB)."""
    shared, clip, scale = t.cfg.shared_vocab, t.tr["clip_norm"], 1.0

    def ref(n):  # under a shared vocabulary the source embedding is the target's tensor
        g = params["tgt_embed" if n == "src_embed" and shared else n].grad
        return torch.zeros_like(params[n]) if g is None else scale * g

    norms = {n: float(ref(n).norm()) for n in params}
    if clip > 0:
        total = math.sqrt(sum(v * v for n, v in norms.items() if not (shared and n == "src_embed")))
        scale *= min(1.0, clip / (total + 1e-6))
        norms = {n: float(ref(n).norm()) for n in params}
    floor = 1e-4 * max(norms.values())  # a tensor whose gradient is 0 holds rounding alone
    errors = {n: apart(up.grads[n], ref(n), floor) for n in params}
    worst = max(errors, key=errors.get)
    t.figures["gradients"] = max(t.figures["gradients"], errors[worst])
    if errors[worst] <= GRADIENT_TOLERANCE:
        return None
    c, off = fit(torch.cat([sampled(up.grads[n]) for n in params]), torch.cat([sampled(ref(n)) for n in params]))
    if off <= GRADIENT_TOLERANCE and abs(c - 1) > 0.01:  # the same gradient at another scale
        said = f"the update's gradient is {c:.4g} x the mean over its target tokens (§5.4's, as the paper's code)"
        return Departure("the gradient of the parameters", "its scale", seen=said)
    causes = ["gradients not zeroed between updates: each update steps on the sum of its own and the last"] if \
        t.history and all(apart(sampled(up.grads[n]), sampled(ref(n)) + t.history[-1][n], floor) <= GRADIENT_TOLERANCE
                          for n in params) else []  # fmt: skip
    none = [n for n in params if float(up.grads[n].abs().max()) == 0 and norms[n] > floor]
    seen = "every gradient is 0 at the step (clipped to norm 0, or zeroed after the backward pass)" if not any(
        float(g.abs().max()) for g in up.grads.values()) else f"no gradient reaches {', '.join(none[:3])}" \
        f"{' ...' * (len(none) > 3)} (the graph cut before them: a .detach(), torch.no_grad() or .data, a layer " \
        "left out of the forward)" if none else ""  # fmt: skip
    return Departure("the gradient of the parameters", worst, errors[worst], causes, seen)


def sampled(t: torch.Tensor) -> torch.Tensor:
    """PROBE of the tensor's elements, spread through it at one stride (all of a smaller one), float64."""
    return (flat := t.detach().reshape(-1))[:: math.ceil(flat.numel() / PROBE)].double()


def step(up, t: Training) -> Departure | None:
    """The optimizer's step against Adam's over the trainer's own gradients, at §5.3's rate, on
    PROBE elements of each tensor (the big model's 213M, a tensor at a time, took 22 s an update)."""
    tr, now = t.tr, {n: (sampled(up.before[n]), sampled(up.after[n])) for n in up.before}
    history = [*t.history, {n: sampled(g) for n, g in up.grads.items()}]
    lrs = [paper_rate(s, t.cfg.d_model, tr["warmup_steps"], tr["lr_scale"]) for s in range(1, up.step + 1)]
    paper = {"betas": (tr["adam_beta1"], tr["adam_beta2"]), "eps": tr["adam_eps"]}
    amount, worst = off_step(now, history, lrs, paper)
    t.figures["step"] = max(t.figures["step"], amount)
    if amount <= STEP_TOLERANCE:
        t.history = history
        return None
    causes = [s for s, kw in OPTIMIZER if off_step(now, history, lrs, {**paper, **kw(paper)})[0] <= STEP_TOLERANCE]
    seen = "" if abs(up.lr / lrs[-1] - 1) < 1e-6 else f"the optimizer stepped at the rate {up.lr:.4g}, where §5.3 " \
        f"gives {lrs[-1]:.4g} (x {up.lr / lrs[-1]:.3g})"  # fmt: skip
    return Departure("the optimizer's step (over the rate)", worst, amount, causes, seen)


def apart(got, want, floor: float) -> float:
    """||got - want|| over ||want|| (at least `floor`)."""
    got, want = got.double(), want.double()
    return float((got - want).norm()) / max(float(want.norm()), floor) if torch.isfinite(got).all() else math.inf


def off_step(now: dict, history: list[dict], lrs: list[float], adam: dict) -> tuple[float, str]:
    """The step's largest difference from Adam's (`adam`), over the rate or the step where larger,
    beyond the fp32 rounding of the parameters before and after (`now`: name -> both), and where."""
    worst, where = 0.0, ""
    for n, (before, after) in now.items():
        want = adam_step(before, [g[n] for g in history], lrs, **adam)
        rounding = (before.abs() + after.abs()) * torch.finfo(torch.float32).eps
        off = float((((after - want).abs() - rounding).clamp(min=0) / (before - want).abs().clamp(min=lrs[-1])).max())
        if not math.isfinite(off) or off > worst:
            worst, where = (math.inf if not math.isfinite(off) else off), n
    return worst, where
