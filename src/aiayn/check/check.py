"""The check stage's job (`python -m aiayn check`), its one registry `CHECKS` (name, section, what it compares,
tolerance: what the command, docs/falls-short.md and the tests read) and its measures: `data`, `training` (the run's,
aiayn.check.data and .training), `schedule`, `decoding` (the beam search, §6.1), `averaging`, `initialisation`."""

from __future__ import annotations

import gc
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from aiayn import described
from aiayn.check.data import full_plan, paper_batch
from aiayn.check.mistakes import TOLERANCE, Departure, failed
from aiayn.check.reference import paper_rate
from aiayn.check.run import trainer_run
from aiayn.check.training import UPDATES, Training
from aiayn.data import binary
from aiayn.data.binary import BOS, EOS, PAD, Corpus
from aiayn.errors import UserError
from aiayn.evaluation.translate import translate
from aiayn.io import writable
from aiayn.model.beam import beam_search
from aiayn.model.hparams import init_draw
from aiayn.model.transformer import build
from aiayn.runtime import records
from aiayn.runtime.checkpoint import save, step_path
from aiayn.study import paper, resolve
from aiayn.study.code import checked_code
from aiayn.training.average import average_run
from aiayn.training.train import model_config

PAIRS, LONGEST, MORE = 24, 40, 2  # pairs the run trains on, of <= LONGEST pieces a side; the search's limit: + MORE


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
        self.settings, self.train, self.cfg = settings, train, model_config(settings, train)
        self.small = train.subset(sample(train))
        self.training = Training(settings, self.small, self.cfg)
        try:
            self.model = trainer_run(settings, self.small, UPDATES, self.training.on_update)
        except Exception as error:  # the trainer's own code fails: said, and its model decoded all the same
            self.training.departure, self.model = Departure("", "", seen=failed(error)), None
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


def gnmt(length: int, alpha: float) -> float:
    """§6.1's length penalty (Wu et al. 2016): lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting EOS."""
    return ((5 + length) / 6) ** alpha


def hypotheses(model, src, beam: int, alpha: float) -> str | None:
    """Each hypothesis of `translate` (handed the model in training mode), at `beam` and 1, against the full forward
    pass: its length limit, log P (another sentence's where it is that one's), log P / lp, at beam 1 the greedy path."""

    @torch.no_grad()
    def log_p(i: int, ys: list, table: bool = False):  # of `ys` given source i by the full forward pass (its table)
        logp = model(src[i][None], torch.tensor([[BOS, *ys]]))[0].double().log_softmax(-1)
        return logp if table else float(logp.gather(1, torch.tensor([*ys, EOS])[:, None]).sum())

    rows, near = [[int(t) for t in row if t not in (PAD, EOS)] for row in src.tolist()], lambda a, b: \
        abs(a - b) <= TOLERANCE * max(1.0, abs(b))  # fmt: skip
    for width in (beam, 1):
        model.train()
        for b, hyps in enumerate(translate(model, rows, beam=width, alpha=alpha, max_len_a=1.0, max_len_b=MORE,
                                           nbest=width)):  # fmt: skip
            for h in hyps:
                if len(h.tokens) > (limit := len(rows[b]) + MORE):
                    return f"sentence {b + 1}: a hypothesis of {len(h.tokens)} tokens, over its limit {limit} (its " \
                        f"own source's length + {MORE}, §6.1)"  # fmt: skip
                if not near(h.logprob, want := log_p(b, h.tokens)):
                    theirs = next((f" (it is sentence {o + 1}'s: handed to another)" for o in
                                   range(len(rows)) if o != b and near(h.logprob, log_p(o, h.tokens))), "")  # fmt: skip
                    return (f"sentence {b + 1}: the search gives a hypothesis of {len(h.tokens)} tokens log P "
                            f"{h.logprob:.6g} where the full forward pass gives it {want:.6g}{theirs}")  # fmt: skip
                if abs(h.score - h.logprob / (lp := gnmt(len(h.tokens) + 1, alpha))) > 1e-6 * max(1.0, abs(h.score)):
                    return f"sentence {b + 1}: a hypothesis of {len(h.tokens)} tokens scored {h.score:.6g} where " \
                        f"log P / lp = {h.logprob / lp:.6g} (§6.1: ((5 + |Y|) / 6)^{alpha:g} = {lp:.6g})"  # fmt: skip
                if width == 1 and (said := greedy(h, log_p(b, h.tokens, table=True))):
                    return f"sentence {b + 1}: {said}"
    return None


def greedy(h, logp) -> str | None:
    """Beam 1's hypothesis `h` follows the greedy path of the full forward pass (`logp`; near ties either way)."""
    for j, token in enumerate(h.tokens):
        best = logp[j].index_fill(0, torch.tensor([EOS]), -math.inf)
        if float(best.max() - logp[j, token]) > TOLERANCE:
            return f"beam 1 takes token {token} at step {j + 1}, where the full forward pass's best is " \
                f"{int(best.argmax())} (log P {float(logp[j, token]):.4g} and {float(best.max()):.4g})"  # fmt: skip
    return None


def scripted(alpha: float) -> str | None:
    """The real search (beam 2, its 1 and 2 best) against every ending ranked by log P / lp, over step functions as
    tables (last token -> next token -> log P, the rest -1e4): ending at once beats a live hypothesis at the current
    length's lp, not the maximum's; a hypothesis ends at step 2 while the others go on (on their own histories)."""
    (a, b, c, d, e), end, ends = range(EOS + 1, EOS + 6), -(1 + gnmt(6, alpha)) / 2, {EOS: 0.0}
    for what, table, most in [(f"EOS at once at log P -1, or a token at {end:.3g}, then free", {BOS: {EOS: -1.0,
                               a: end}, a: {EOS: 0.0, a: 0.0}}, 6), ("one hypothesis ends at step 2, the others go on",
                              {BOS: {a: -0.15, b: -0.25}, a: {EOS: -0.15, c: -3.5}, b: {d: -0.35, e: -0.45}, c: ends,
                               d: ends, e: ends}, 4)]:  # fmt: skip
        endings, todo = [], [((), BOS, 0.0)]
        while todo:  # every ending of at most `most` tokens, EOS included
            ys, last, s = todo.pop()
            for t, v in table.get(last, {}).items():
                endings += [(list(ys), s + v)] if t == EOS else []
                todo += [((*ys, t), t, s + v)] if t != EOS and len(ys) + 2 <= most else []
        ranked = [ys for ys, s in sorted(endings, key=lambda y: -y[1] / gnmt(len(y[0]) + 1, alpha))]
        for n in (1, 2):
            hyps = beam_search(lambda tokens, table=table: torch.tensor([[table.get(int(t), {}).get(v, -1e4) for v in
                               range(EOS + 6)] for t in tokens]), lambda rows: None, max_steps=[most], beam=2,
                               alpha=alpha, bos=BOS, eos=EOS, nbest=n)  # fmt: skip
            if (got := [h.tokens for h in hyps[0]]) != ranked[:n]:
                return f"on a scripted step function ({what}; at most {most} tokens) the search's {n} best are {got} " \
                    f"where §6.1's lp ((5 + |Y|) / 6)^{alpha:g} ranks {ranked[:n]} best"  # fmt: skip
    return None


def decoding(run):
    """The `decoding` check of the run's model over its first 4 pairs: what departs (or None), the figure, figures."""
    model, (src, _, _) = run.model, paper_batch(run.small, range(min(4, len(run.small))))
    beam, alpha = (paper.DECODE[run.settings["task"]][k] for k in ("beam", "alpha"))  # the schema's two tasks
    figure = f"beam {beam} (alpha {alpha}) gives each hypothesis, within its length limit, the full forward pass's " \
        "log P and log P / lp; beam 1 follows its greedy path"  # fmt: skip
    with torch.no_grad():  # an untrained model ends at once: its projection made sharper and EOS's row 0,
        projection = model.paper_map()[0]["tgt_embed"]  # hypotheses run on, so that the cache and the
        projection.mul_(3)[EOS] = 0  # beam's reordering show (any weights are the model's to compare)
    said = hypotheses(model, src, beam, alpha) or scripted(alpha)
    return said, figure, {} if said else {"beam": beam, "alpha": alpha, "sentences": int(src.size(0))}


def averaging(run):
    """`average_run` over step checkpoints 1-7 of a run checkpointed every 2 updates, stopped before its final 8 (odd
    ones off the grid, as a stop signal writes them): the last 2 on the grid, 4 and 6 (§6.1's "last k"), their mean."""
    weights = {s: torch.randn(3, 4, generator=torch.Generator().manual_seed(s)) for s in range(1, 8)}
    with tempfile.TemporaryDirectory() as folder:
        for s, w in weights.items():
            save({"model_config": {}, "model": {"w": w}, "step": s, "identity": {"run": 1}}, step_path(folder, s))
        got = average_run(folder, f"{folder}/average.pt", k=2, interval=2, final=8, log=lambda m: None)
    steps, off = sorted(got["averaged_steps"]), float((got["model"]["w"] - (weights[4] + weights[6]) / 2).abs().max())
    said = f"it averages steps {steps} of 1-7 where the last 2 on the grid of 2 updates are 4 and 6" if steps != \
        [4, 6] else f"its mean of steps 4 and 6 is {off:.3g} from theirs" if off > 1e-6 else None  # fmt: skip
    return said, "the last 2 of 7 step checkpoints on the grid, averaged element-wise", {"steps": steps}


def initialisation(initial: dict, cfg):
    """Every tensor (`initial`: role -> shape, mean, std as drawn) against what `init` draws (`init_draw`)."""
    worst, where = 0.0, ""
    for role, (shape, mean, std) in initial.items():
        want_mean, want = init_draw(role, shape, cfg)
        off = abs(std / want - 1) / (0.1 + 3 / math.sqrt(2 * math.prod(shape))) if want else \
            (abs(mean - want_mean) + std) / 1e-6  # fmt: skip
        if off > worst:
            worst, where = off, f"{role} has std {std:.4g} where init {cfg.init} draws {want:.4g}" if want else \
                f"{role} has mean {mean:.4g}, std {std:.4g} where init {cfg.init} makes it {want_mean:g}"  # fmt: skip
    return (where if worst > 1 else None), "every tensor drawn as its initialisation draws it", {"worst": worst}


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
    Spec("training", "§3, §5.3, §5.4", f"{UPDATES} updates of the trainer (2 micro-batches each, training mode, masks "
         "drawn afresh) against §3's forward pass, §5.4's loss and Adam from the same parameters: the logits, their "
         "gradient, the parameters' gradients, one step an update; the dev pass's NLL against §3's eval mode", "1e-3 "
         "of the largest value (gradients 0.1 in norm; the step 1e-3 of the rate beyond fp32 rounding; dev NLL 1e-4)",
         training),
    Spec("schedule", "§5.3", "the rate the trainer applies at each update up to 2 x warmup_steps, against "
         "d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5) x lr_scale", "1e-6 relative", schedule),
    Spec("decoding", "§3, §6.1", "each beam-search hypothesis's length, log P and score against its source's limit, "
         "the full forward pass and GNMT's lp; beam 1 against the greedy path; the search over scripted step "
         "functions against every ending", "1e-3 (the score 1e-6)", decoding),
    Spec("averaging", "§6.1", "the experiment's averaging of step checkpoints: which it takes (the last k on the "
         "checkpoint grid, one off it left out) and their element-wise mean", "1e-6", averaging),
    Spec("initialisation", "§3.4, `init`", "every tensor's spread (a constant: its value) against its `init`'s",
         "10 % and the sampling error (a constant 1e-6)", lambda run: initialisation(run.training.initial, run.cfg)),
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
    records.write(out, "check", {"experiment": settings["name"], "passed": True, "aiayn": described(), "code":
                  checked_code(), "model": run.cfg.to_dict(), "pairs": len(run.small), "checks": found})  # fmt: skip
    log(f"all {len(found)} checks passed on {settings['name']}'s model: {out}")
    return 0
