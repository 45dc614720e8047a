"""The check stage's job (`python -m aiayn check`) and its one registry of checks, `CHECKS` (name,
section, what it compares, tolerance), which the command, docs/falls-short.md and the tests read."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from aiayn import described
from aiayn.check import decoding as dec
from aiayn.check.data import full_plan
from aiayn.check.mistakes import Departure, failed
from aiayn.check.reference import paper_rate
from aiayn.check.run import trainer_run
from aiayn.check.training import UPDATES, Training
from aiayn.data import binary
from aiayn.data.binary import Corpus
from aiayn.errors import UserError
from aiayn.io import writable
from aiayn.model.transformer import build
from aiayn.runtime import records
from aiayn.study import resolve
from aiayn.study.code import checked_code

PAIRS, LONGEST = 24, 40  # the pairs the run trains on, of at most LONGEST pieces a side


def sample(corpus: Corpus, n: int = PAIRS, longest: int = LONGEST) -> np.ndarray:
    """`n` pairs of 1 to `longest` pieces a side, spread over their lengths, in corpus order."""
    src, tgt = corpus.src_lengths, corpus.tgt_lengths
    fits = np.flatnonzero((src >= 1) & (tgt >= 1) & (src <= longest) & (tgt <= longest))
    if not len(fits):
        raise UserError(f"{corpus.path}: no sentence pair of 1 to {longest} pieces a side to check the model on")
    by_length = fits[np.argsort(np.maximum(src[fits], tgt[fits]), kind="stable")]
    return np.sort(np.unique(by_length[np.linspace(0, len(fits) - 1, min(n, len(fits))).round().astype(int)]))


class Run:
    """What the checks read: the experiment's trainer run on a sample of its data, and its model."""

    def __init__(self, settings: dict, train: Corpus):
        from aiayn.training.train import model_config

        self.settings, self.train, self.cfg = settings, train, model_config(settings, train)
        self.small = train.subset(sample(train))
        self.training = Training(settings, self.small, self.cfg)
        try:
            self.model = trainer_run(settings, self.small, UPDATES, self.training.on_update)
        except Exception as error:  # the trainer's own code fails: said, and its model decoded all the same
            self.training.departure = Departure("the run", "the trainer's update", seen=failed(error))
            self.model = None
        if self.model is None or self.training.nonfinite:  # decoded as drawn, not as a rate too high left it
            torch.manual_seed(settings["train"]["seed"])
            self.model = build(self.cfg)
        gc.collect()


def data(run: Run):
    t, (more, whole) = run.training, full_plan(run.settings, run.train)
    figure = f"the {len(t.fed)} rows the trainer was fed in {t.updates} updates are the corpus's pairs (source, " \
        f"decoder input, trained target), none again before the epoch's others were; {whole}"  # fmt: skip
    return ([*t.data_wrong, *more] or [None])[0], figure, {"rows": len(t.fed)}


def training(run: Run):
    t, f = run.training, run.training.figures
    if t.data_wrong:
        return "not measured: the trainer's data departs from the corpus first (check data)", "", {}
    compared = f"{t.nonfinite - 1} updates (the loss is not finite from update {t.nonfinite}, where the trainer " \
        "stops itself: a rate too high)" if t.nonfinite else f"{UPDATES} updates"  # fmt: skip
    dev = f"; the dev pass's NLL {f['evaluation']:.2g}" if "evaluation" in f else ""
    figure = f"{compared} of the trainer (2 micro-batches each, training mode) are the paper's: logits within " \
        f"{f['logits']:.2g}, their gradient {f['loss']:.2g}, the parameters' {f['gradients']:.2g}, the step " \
        f"{f['step']:.2g} of the rate{dev}"  # fmt: skip
    form = {"layout": t.form.layout, "origin": t.form.origin, "heads": t.form.split} if t.form else None
    return t.departure and t.departure.said(), figure, {**f, "form": form}


def schedule(run: Run):
    tr, lrs = run.settings["train"], run.training.lrs
    want = [paper_rate(u, run.cfg.d_model, tr["warmup_steps"], tr["lr_scale"]) for u in range(1, len(lrs) + 1)]
    u = next((u for u, (a, b) in enumerate(zip(lrs, want), 1) if abs(a / b - 1) > 1e-6), None)
    problem = u and f"the trainer's rate at update {u} is {lrs[u - 1]:.6g} where §5.3 gives {want[u - 1]:.6g}"
    figure = f"the trainer's rate at each of updates 1-{len(lrs)} is §5.3's (peak {max(lrs):.4g} at update " \
        f"{int(np.argmax(lrs)) + 1})"  # fmt: skip
    return problem, figure, {"updates": len(lrs)}


@dataclass(frozen=True)
class Spec:
    """A check: name, sections, what it compares, tolerance, measure (Run -> what departs, figure, figures)."""

    name: str
    section: str
    compares: str
    tolerance: str
    measure: Callable

    def outcome(self, run) -> dict:
        try:
            problem, figure, measured = self.measure(run)
        except Exception as error:  # the experiment's code, or the map the reference reads it through, fails
            problem, figure, measured = failed(error), "", {}
        return {"name": self.name, "passed": not problem, "figure": problem or figure,
                "expected": f"{self.section}: {self.tolerance}", "measured": measured}  # fmt: skip


CHECKS = [
    Spec("data", "§5.1", "the rows the trainer feeds the model and trains it towards, against the corpus's pairs, "
         "each once an epoch; an epoch of its batch plan at the experiment's budget against the corpus, its "
         "micro-batches against the budget a side, epoch 2's order against epoch 1's", "exact", data),
    Spec("training", "§3, §5.3, §5.4", f"{UPDATES} updates of the experiment's trainer (2 micro-batches each, training "
         "mode, its masks drawn afresh) against §3's forward pass, §5.4's loss and Adam from the same parameters: the "
         "logits, their gradient, the parameters' gradients, one step an update; the dev pass's NLL against §3's in "
         "eval mode", "1e-3 of the largest value (gradients 0.1 in norm; the step 1e-3 of the rate beyond fp32 "
         "rounding; the dev NLL 1e-4)", training),
    Spec("schedule", "§5.3", "the rate the trainer applies at each update up to 2 x warmup_steps, against "
         "d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5) x lr_scale", "1e-6 relative", schedule),
    Spec("decoding", "§3, §6.1", "each beam-search hypothesis's length, log P and score against its source's limit, "
         "the full forward pass and GNMT's lp; beam 1 against the greedy path; a scripted search", "1e-3 (the score "
         "1e-6)", dec.decoding),
    Spec("initialisation", "§3.4, `init`", "the spread of every weight against the one its initialisation draws",
         "10 % and the sampling error", lambda run: dec.initialisation(run.training.initial, run.cfg)),
]  # fmt: skip


def check_job(settings_path, train_path, out, *, log=print, detail=None) -> int:
    """Every check of CHECKS on one experiment; check.json (`out`) only when all pass, else a UserError
    naming the first failure. Lines go to `detail` (the job's log), failures and the verdict to `log`."""
    writable(out)
    settings = resolve.read(settings_path)
    run = Run(settings, binary.read(train_path))
    found, failed = [spec.outcome(run) for spec in CHECKS], []
    for c in found:
        line = f"check {c['name']} {'ok' if c['passed'] else 'failed'}: {c['figure']} (expected {c['expected']})"
        failed += [] if c["passed"] else [line]
        ((detail or log) if c["passed"] else log)(line)
    if failed:
        more = f" (and {len(failed) - 1} more check(s) failed, above)" if len(failed) > 1 else ""
        raise UserError(f"experiment {settings['name']}: {failed[0]}{more}; nothing was trained")
    records.write(out, "check", {"experiment": settings["name"], "passed": True, "aiayn": described(),
                                 "code": checked_code(), "model": run.cfg.to_dict(), "pairs": len(run.small),
                                 "checks": found})  # fmt: skip
    log(f"all {len(found)} checks passed on {settings['name']}'s model: {out}")
    return 0
