"""The invariants outside training: `decoding` (the real beam search against the full forward pass
and §6.1) and `initialisation` (every weight drawn with the spread its `init` says)."""

from __future__ import annotations

import math

import torch

from aiayn.check.data import paper_batch
from aiayn.check.mistakes import TOLERANCE
from aiayn.data.binary import BOS, EOS, PAD
from aiayn.model.hparams import init_std
from aiayn.study import paper

MORE = 2  # the search's length limit: the source's length + MORE tokens before EOS (§6.1's + 50)


def gnmt(length: int, alpha: float) -> float:
    """§6.1's length penalty (Wu et al. 2016): lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting EOS."""
    return ((5 + length) / 6) ** alpha


def hypotheses(model, src, beam: int, alpha: float) -> str | None:
    """Each hypothesis of `translate` (handed the model in training mode), at `beam` and 1, against the full forward
    pass over its tokens: its length limit, log P, score log P / lp (§6.1), and at beam 1 the greedy path."""
    from aiayn.evaluation.translate import translate

    rows = [[int(t) for t in row if t not in (PAD, EOS)] for row in src.tolist()]
    for width in (beam, 1):
        model.train()
        for b, hyps in enumerate(translate(model, rows, beam=width, alpha=alpha, max_len_a=1.0, max_len_b=MORE,
                                           nbest=width)):  # fmt: skip
            for h in hyps:
                if len(h.tokens) > (limit := len(rows[b]) + MORE):
                    return f"sentence {b + 1}: a hypothesis of {len(h.tokens)} tokens, over its limit {limit} (its " \
                        f"own source's length + {MORE}, §6.1)"  # fmt: skip
                with torch.no_grad():  # (T + 1, V)
                    logp = model(src[b][None], torch.tensor([[BOS, *h.tokens]]))[0].double().log_softmax(-1)
                want = float(logp.gather(1, torch.tensor([*h.tokens, EOS])[:, None]).sum())
                lp = gnmt(len(h.tokens) + 1, alpha)
                if abs(h.logprob - want) > TOLERANCE * max(1.0, abs(want)):
                    return (f"sentence {b + 1}: the search gives a hypothesis of {len(h.tokens)} tokens log P "
                            f"{h.logprob:.6g} where the full forward pass gives its tokens {want:.6g}")  # fmt: skip
                if abs(h.score - h.logprob / lp) > 1e-6 * max(1.0, abs(h.score)):
                    return (f"sentence {b + 1}: a hypothesis of {len(h.tokens)} tokens scored {h.score:.6g} where "
                            f"log P / lp = {h.logprob / lp:.6g} (§6.1: lp = ((5 + |Y|) / 6)^{alpha:g} = "
                            f"{lp:.6g})")  # fmt: skip
                said = greedy(h, logp, alpha) if width == 1 else None
                if said:
                    return f"sentence {b + 1}: {said}"
    return None


def greedy(h, logp, alpha: float) -> str | None:
    """Beam 1's hypothesis `h` follows the greedy path of the full forward pass (`logp`; near ties either
    way) and ends at the best of the path's endings the search meets (EOS among a step's 2 best)."""
    best = -math.inf
    for j in range(len(h.tokens) + 1):
        if float(logp[j, EOS]) >= float(logp[j].topk(2).values[-1]):
            best = max(best, (float(logp[range(j), h.tokens[:j]].sum()) + float(logp[j, EOS])) / gnmt(j + 1, alpha))
        if j < len(h.tokens):
            others = logp[j].clone()
            others[EOS] = -math.inf
            if float(others.max() - logp[j, h.tokens[j]]) > TOLERANCE:
                return (f"beam 1 takes token {h.tokens[j]} at step {j + 1}, where the full forward pass's best is "
                        f"{int(others.argmax())} (log P {float(logp[j, h.tokens[j]]):.4g} and "
                        f"{float(others.max()):.4g})")  # fmt: skip
    if h.score < best - TOLERANCE * max(1.0, abs(best)):
        return f"beam 1 ends with score {h.score:.6g} where its path has an ending of {best:.6g}"
    return None


def scripted(alpha: float) -> str | None:
    """The real search (beam 2, its 1 and 2 best) over a scripted step function (EOS at once at -1, or a token at c,
    the rest free; ending at once beats the live one at the current length's lp, not the maximum's) against
    every ending ranked by log P / lp."""
    from aiayn.model.beam import beam_search

    token, most, c = EOS + 1, 6, -(1 + gnmt(6, alpha)) / 2

    def step(tokens):  # (rows,) last tokens -> (rows, V) log-probabilities of the next
        logp = torch.full((len(tokens), token + 1), -1e4)
        logp[:, EOS], logp[:, token] = torch.where(tokens == BOS, -1.0, 0.0), torch.where(tokens == BOS, c, 0.0)
        return logp

    ranked = sorted(([token] * k for k in range(most)), key=lambda y: -(c if y else -1) / gnmt(len(y) + 1, alpha))
    for n in (1, 2):
        hyps = beam_search(step, lambda rows: None, max_steps=[most], beam=2, alpha=alpha, bos=BOS, eos=EOS, nbest=n)
        if [h.tokens for h in hyps[0]] != ranked[:n]:
            return f"on a scripted step function (EOS at once at log P -1, or a token at {c:.3g}, then free; at " \
                f"most {most}) the search's {n} best are {[h.tokens for h in hyps[0]]} where §6.1's lp ((5 + " \
                f"|Y|) / 6)^{alpha:g} ranks {ranked[:n]} best"  # fmt: skip
    return None


def decoding(run):
    """The `decoding` check of the run's model (aiayn.check.check.Run) over its first 4 pairs: what
    departs (None: nothing), the figure, what it measured."""
    model, (src, _, _) = run.model, paper_batch(run.small, range(min(4, len(run.small))))
    beam, alpha = (paper.DECODE[run.settings["task"]][k] for k in ("beam", "alpha"))  # the schema's two tasks
    figure = f"beam {beam} (alpha {alpha}) gives each hypothesis, within its length limit, the full forward pass's " \
        "log P and log P / lp; beam 1 follows its greedy path"  # fmt: skip
    with torch.no_grad():  # an untrained model ends at once: its projection made sharper and EOS's row 0,
        projection = model.paper_map()[0]["tgt_embed"]  # hypotheses run on, so that the cache and the
        projection.mul_(3)[EOS] = 0  # beam's reordering show (any weights are the model's to compare)
    said = hypotheses(model, src, beam, alpha) or scripted(alpha)
    return said, figure, {} if said else {"beam": beam, "alpha": alpha, "sentences": int(src.size(0))}


def initialisation(initial: dict, cfg):
    """Every weight (`initial`: role -> its shape and standard deviation as the trainer drew it)
    against the spread `init` draws it with, within 10 % and the sampling error."""
    worst, where = 0.0, ""
    for role, (shape, std) in initial.items():
        want = init_std(role, shape, cfg)
        off = abs(std / want - 1) / (0.1 + 3 / math.sqrt(2 * math.prod(shape))) if want else 0.0
        if off > worst:
            worst, where = off, f"{role} has std {std:.4g} where init {cfg.init} draws {want:.4g}"
    return (where if worst > 1 else None), "every weight drawn with its initialisation's spread", {"worst": worst}
