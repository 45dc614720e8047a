"""What a training run says of itself while it trains: its progress records, its own watch for a
diverging or stalled run, and TensorBoard events of the same figures.

Progress: the start record, and every `log_interval` updates
the loss, learning rate, gradient norm before clipping (the interval's mean and largest, over its
updates whose norm was finite), tokens per update and per second, TFLOP/s, MFU and ETA (as a log
line and as a `metrics.jsonl` record). FLOPs are counted per update from its batches' real lengths
(`aiayn.runtime.hardware.training_flops`): TFLOP/s is what the model computed, MFU that over the
GPUs' peak.

The watch: the gradient norm of every update (before clipping), and the first
update whose loss diverges, told once with what was happening there and the usual causes.

A loss diverges when it is not finite, or when its running mean (an exponential moving average
over about the last 10 updates, `SMOOTHING`) rises above `FACTOR` times the lowest that mean has
been and by more than `MARGIN` nats per target token. The mean, not the update's own loss: one
batch of hard sentences costs several times the mean of small batches, and a lucky one sets a
minimum no mean returns to; a divergence is a climb that lasts. The margin: a run near zero
loss doubles from noise alone, a real divergence climbs towards log V, several nats.
Everything is kept on the device and read only at the trainer's log and checkpoint updates, so
watching costs no synchronisation per update.

A run stalls when it learns no more than the target words' frequencies: a model that predicts
every target token with its training frequency, whatever the source and the words before, has a
loss of its own (`Floors`: the label-smoothed training loss and the dev NLL of that prediction,
counted from the encoded corpora). `Stall` says it once, like a divergence, when the interval's
training loss is still above `1 - STALL_FALL` of that floor `warmup_steps` updates after the warmup
(at least a log interval after it), or when the dev NLL, still above that share of its floor, has
not improved by `STALL_GAIN` over `STALL_EVALS` evaluations after the warmup. A learning rate far
too high, or no warmup, leaves a run there, its loss flat from the first few dozen updates on; a
run that learns is far below it by then (the demo's base at its 200th update: 1.3 nats against a
floor of 5.0).

TensorBoard: event files of a run, for watching a run of days live as fairseq's
`--tensorboard-logdir` and tensor2tensor's summaries are watched: training loss, learning rate,
gradient norm, throughput and MFU at every logged update, dev loss and perplexity at every
checkpoint.

Optional: written only where the `tensorboard` package is installed (`pip install
"aiayn[tensorboard]"`); without it the run says so once and writes none (metrics.jsonl has every
figure either way). Only the main process writes. A resumed run purges the events past the step it
resumes from, so that a run killed after its last checkpoint shows no curve twice. Events that
cannot be written (a full disk, a folder gone) are said in one line and stop; the training goes on
(its checkpoints meet the same disk and say so if they cannot be written).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time

import numpy as np
import torch
import torch.distributed as dist

from aiayn import described
from aiayn.data.binary import EOS, PAD
from aiayn.runtime.hardware import peak_flops
from aiayn.training.distributed import Env


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


class Progress:
    """Sums of one log interval (loss on the device, read only when a record is made) of a run on
    `env` in arithmetic `precision`, resumed at `step`, to end at `total`."""

    def __init__(self, *, env: Env, precision: str, step: int, total: int):
        self.env, self.total = env, total
        self.start_step, self.start = step, time.perf_counter()
        self.reset()
        peak = peak_flops(device_name(env.device), precision)
        self.peak = peak * env.world_size if peak else None

    def reset(self) -> None:
        self.loss = torch.zeros((), device=self.env.device)
        self.norm_sum = torch.zeros((), device=self.env.device)
        self.norm_max = torch.zeros((), device=self.env.device)
        self.norm_count = torch.zeros((), device=self.env.device)
        self.src = self.tgt = 0
        self.flops = 0.0
        self.mark = time.perf_counter()
        self.steps = 0

    def add(self, update: tuple) -> None:
        """One update (`Trainer.update`'s result): its loss, source and target tokens, FLOPs (all
        ranks') and gradient norm."""
        loss, src, tgt, flops, norm = update
        self.loss += loss
        norm = norm.to(self.norm_sum.device, torch.float32)  # on the device: no synchronisation
        finite = torch.isfinite(norm)  # an fp16 overflow's norm is infinite: left out
        self.norm_sum += torch.where(finite, norm, 0.0)
        self.norm_max = torch.where(finite, torch.maximum(self.norm_max, norm), self.norm_max)
        self.norm_count += finite
        self.src, self.tgt, self.steps = self.src + src, self.tgt + tgt, self.steps + 1
        self.flops += flops

    def state(self) -> dict:
        """The open interval's sums (all ranks' loss: a collective), which a checkpoint keeps so that
        the resumed run's next record is the uninterrupted run's (its time too, as time worked)."""
        loss = self.loss.clone()
        if self.env.world_size > 1:
            dist.all_reduce(loss)
        tensors = {"norm_sum": self.norm_sum, "norm_max": self.norm_max, "norm_count": self.norm_count}
        return {"loss": loss.item(), **{k: v.item() for k, v in tensors.items()}, "src": self.src, "tgt": self.tgt,
                "flops": self.flops, "steps": self.steps, "seconds": time.perf_counter() - self.mark}  # fmt: skip

    def resume(self, carried: dict) -> None:
        """Go on with the interval a checkpoint kept (`state`; rank 0 carries every rank's loss)."""
        if not carried:
            return
        for key in ("norm_sum", "norm_max", "norm_count"):
            getattr(self, key).fill_(carried[key])
        self.loss.fill_(carried["loss"] if self.env.main else 0.0)
        self.src, self.tgt, self.flops, self.steps = carried["src"], carried["tgt"], carried["flops"], carried["steps"]
        self.mark -= carried["seconds"]

    def record(self, step: int, lr: float) -> dict:
        """The interval's progress record at `step`, learning rate `lr` (all ranks' loss: a
        collective under several processes); starts the next interval."""
        loss = self.loss.clone()
        if self.env.world_size > 1:
            dist.all_reduce(loss)
        loss = loss.item() / max(self.tgt, 1)
        seconds = time.perf_counter() - self.mark
        tps = self.tgt / seconds if seconds > 0 else 0.0
        done = step - self.start_step
        eta = (time.perf_counter() - self.start) / max(done, 1) * (self.total - step)
        per_update = max(self.steps, 1)
        norms = int(self.norm_count.item())
        tflops = self.flops / seconds / 1e12 if seconds > 0 else 0.0
        rec = {
            "step": step,
            "loss": loss,
            "lr": lr,
            "src_tokens_per_update": self.src / per_update,
            "tgt_tokens_per_update": self.tgt / per_update,
            "flops_per_update": self.flops / per_update,
            "tgt_tokens_per_s": tps,
            "tflops": tflops,
            "eta_s": eta,
            "grad_norm": self.norm_sum.item() / norms if norms else None,
            "grad_norm_max": self.norm_max.item() if norms else None,
            "wall": time.time(),
            "job_s": time.perf_counter() - self.start,  # the job's hours: a clock set back moves no record
        }
        rec["mfu"] = rec["tflops"] * 1e12 / self.peak if self.peak else None
        self.reset()
        return rec


def start_record(
    *, env: Env, step: int, accumulation: int, budget: int, params: int, precision: str, hosts: list[str]
) -> dict:
    """The record of a job's (re)start: where and how it trains (`hosts`: every rank's hostname)."""
    return {
        "event": "start",
        "aiayn": described(),
        "step": step,
        "world_size": env.world_size,
        "agents": env.agents,
        "hosts": hosts,
        "accumulation": accumulation,
        "budget": budget,
        "params": params,
        "device_name": device_name(env.device),
        "precision": precision,
        # each process's CPU threads (a rule's `threads`, shared among a node's processes) and how
        # idle ones wait (aiayn.cli.thread_policy)
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "wall": time.time(),
    }


def format_start(rec: dict, *, name: str, total: int) -> str:
    """The log line of a start record of run `name`, to end at update `total`."""
    tasks = ""
    if rec["agents"] > 1:
        where = list(dict.fromkeys(rec.get("hosts", [])))  # each host once, in rank order
        tasks = f" ({rec['agents']} launcher tasks{' on ' + ', '.join(where) if where else ''})"
    if rec["device_name"] != "cpu" and peak_flops(rec["device_name"], rec["precision"]) is None:
        tasks += f"; peak {rec['precision']} FLOP/s of this GPU unknown (aiayn.runtime.hardware.PEAKS): no MFU"
    return (
        f"training {name}: {rec['params']:,} parameters on {rec['world_size']} x {rec['device_name']}{tasks}, "
        f"{rec['accumulation']} micro-batch(es) of <= {rec['budget']} tokens per side per process, "
        f"step {rec['step']} -> {total}; {rec['threads']} CPU thread(s) per process, "
        f"OMP_WAIT_POLICY {rec.get('omp_wait_policy') or 'unset'}"
    )


def format_progress(rec: dict, total: int) -> str:
    mfu = f" mfu {rec['mfu']:.1%}" if rec.get("mfu") is not None else ""
    eta_s = rec["eta_s"]
    eta = time.strftime("%H:%M:%S", time.gmtime(eta_s)) if eta_s < 86400 else f"{eta_s / 86400:.1f}d"
    gnorm = f" gnorm {rec['grad_norm']:.3g}" if rec.get("grad_norm") is not None else ""
    return (
        f"step {rec['step']}/{total} loss {rec['loss']:.4f} lr {rec['lr']:.3e}{gnorm} "
        f"tokens/update {rec['src_tokens_per_update']:,.0f} src + {rec['tgt_tokens_per_update']:,.0f} tgt, "
        f"{rec['tgt_tokens_per_s']:,.0f} tgt tokens/s "
        f"tflops {rec['tflops']:.2f}{mfu} eta {eta}"
    )


# -- the watch: gradient norm, divergence, stall -----------------------------------------------------
FACTOR = 2.0
MARGIN = 1.0  # nats per target token
SMOOTHING = 0.1  # the weight of an update's loss in the running mean

STALL_FALL = 0.1  # a run that learns is more than this share below the frequencies' loss after warmup
STALL_GAIN = 0.01  # a dev NLL that improves by less than this share over STALL_EVALS evaluations has not
STALL_EVALS = 3
SAMPLE_TOKENS = 1 << 26  # target tokens counted at most (evenly spaced blocks): WMT14 EN-FR has ~1.2 billion
SAMPLE_BLOCK = 1 << 20

CAUSES = (
    "no or too short a warmup (training.warmup_steps), a learning rate too high (training.lr_scale), "
    "attention scaled by d_model instead of sqrt(d_k) (the check stage measures it: check.json), or no "
    "gradient clipping for a model off the paper's (training.clip_norm)"
)


def grad_norm(parameters) -> torch.Tensor:
    """The L2 norm of all gradients together, on their device (as clip_grad_norm_ measures it)."""
    grads = [p.grad.detach() for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if total is not None:
        return total(grads, 2.0)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)


class Watch:
    """The run's running mean loss and its lowest so far, and its first diverging update (step, its
    loss, the running mean and its lowest then, learning rate, gradient norm), as device tensors."""

    def __init__(self, device, lowest: float = math.inf, mean: float = math.nan):
        full = lambda v: torch.full((), v, dtype=torch.float64, device=device)  # noqa: E731 (a learning rate of any size)
        self.mean, self.lowest = full(mean), full(lowest)
        self.step = torch.zeros((), dtype=torch.long, device=device)  # 0: none yet
        self.loss, self.at, self.before, self.lr, self.norm = (full(0.0) for _ in range(5))
        self.told = False

    def observe(self, step: int, loss: torch.Tensor, lr: float, norm: torch.Tensor) -> None:
        """Update `step`'s loss per target token, trained at `lr` with gradient norm `norm`."""
        loss = loss.double()
        finite = torch.isfinite(loss)
        mean = torch.where(torch.isnan(self.mean), loss, (1 - SMOOTHING) * self.mean + SMOOTHING * loss)
        self.mean = torch.where(finite, mean, self.mean)
        climbed = (self.mean > FACTOR * self.lowest) & (self.mean > self.lowest + MARGIN)
        first = (~finite | climbed) & (self.step == 0)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss, self.loss)
        self.at = torch.where(first, self.mean, self.at)
        self.before = torch.where(first, self.lowest, self.before)
        self.lr = torch.where(first, torch.full_like(self.lr, lr), self.lr)
        self.norm = torch.where(first, norm.double().to(self.norm.device), self.norm)
        self.lowest = torch.minimum(self.lowest, self.mean)

    def news(self) -> dict | None:
        """The diverging update's record, the first time it is asked after one happened; else None."""
        if self.told:
            return None
        step = int(self.step.item())
        if not step:
            return None
        self.told = True
        return {
            "event": "diverging",
            "step": step,
            "loss": float(self.loss.item()),
            "mean": float(self.at.item()),
            "lowest": float(self.before.item()),
            "lr": float(self.lr.item()),
            "grad_norm": float(self.norm.item()),
        }

    def state(self) -> dict:
        """What a checkpoint keeps, so that a resumed run watches as the uninterrupted one would."""
        return {
            "mean": float(self.mean.item()),
            "lowest": float(self.lowest.item()),
            "told": self.told or bool(self.step.item()),
        }


def warning(news: dict) -> str:
    """The one log line of a diverging run."""
    loss, mean, lowest = news["loss"], news.get("mean", news["loss"]), news["lowest"]
    if not math.isfinite(loss):
        what = f"the loss is not finite ({loss})"
    else:
        times = f", {mean / lowest:.1f}x its lowest ({lowest:.4g})" if lowest > 0 else f" (lowest {lowest:.4g})"
        what = f"the loss climbed to {mean:.4g} (running mean; this update's {loss:.4g}){times}"
    return (
        f"warning: training diverges at step {news['step']}: {what}, at learning rate {news['lr']:.3e}, "
        f"gradient norm {news['grad_norm']:.4g} (before clipping); likely causes: {CAUSES}"
    )


STALL_CAUSES = (
    "a learning rate too high (training.lr_scale) or no or too short a warmup (training.warmup_steps): "
    "Adam's first steps push the model to the word frequencies and it stays there; the embeddings "
    "or the attention wrongly scaled (the check stage measures them: check.json)"
)


def frequencies(corpus, vocab: int) -> np.ndarray:
    """How often each target id occurs in `corpus` as the trainer's targets (each sentence's tokens
    and its EOS), counted over at most SAMPLE_TOKENS tokens in evenly spaced blocks."""
    tokens = corpus.tgt_tokens
    total = len(tokens)
    counts = np.zeros(vocab, dtype=np.float64)
    blocks = max(1, math.ceil(total / SAMPLE_BLOCK))
    keep = min(blocks, max(1, SAMPLE_TOKENS // SAMPLE_BLOCK))
    for b in np.unique(np.linspace(0, blocks - 1, keep).round().astype(np.int64)):
        chunk = np.asarray(tokens[b * SAMPLE_BLOCK : (b + 1) * SAMPLE_BLOCK])
        counts += np.bincount(chunk, minlength=vocab)[:vocab]
    sentences = len(corpus.tgt_offsets) - 1
    counts[EOS] += sentences * (counts.sum() / total if total else 1.0)
    counts[PAD] = 0.0
    return counts


def frequency_prediction(train_counts: np.ndarray) -> np.ndarray:
    """Log-probabilities of the prediction by frequency alone: add-one estimates over the vocabulary."""
    q = train_counts + 1.0
    return np.log(q / q.sum())


def frequency_loss(train_counts: np.ndarray, eps_ls: float, loss=None) -> float:
    """The label-smoothed training loss per target token (the trainer's `loss`) of predicting every
    token by its frequency. Any label smoothing is c0 + c1 * (-log q_y) for target y at one fixed
    prediction q: two targets measure c0 and c1 through the loss itself, and the frequencies
    weigh -log q_y."""
    from aiayn.training.objective import label_smoothed_loss

    loss = loss or label_smoothed_loss
    logq = frequency_prediction(train_counts)
    logits = torch.tensor(logq, dtype=torch.float32)[None, None, :]
    real = [i for i in range(len(train_counts)) if i != PAD]
    a, b = max(real, key=lambda i: logq[i]), min(real, key=lambda i: logq[i])
    at = {y: float(loss(logits, torch.tensor([[y]]), eps_ls)) for y in (a, b)}
    c1 = (at[a] - at[b]) / (logq[b] - logq[a]) if logq[a] != logq[b] else 0.0
    c0 = at[a] + c1 * logq[a]
    p = train_counts / train_counts.sum()
    return float(c0 - c1 * (p[p > 0] * logq[p > 0]).sum())


def frequency_nll(train_counts: np.ndarray, dev_counts: np.ndarray) -> float:
    """The dev NLL per target token of predicting every token by its training frequency."""
    logq = frequency_prediction(train_counts)
    p = dev_counts / dev_counts.sum()
    return float(-(p[p > 0] * logq[p > 0]).sum())


class Stall:
    """A run that learns no more than the word frequencies, said once (see the module docstring).
    Lives on the main process; made at each job's start from the run's metrics.jsonl (its dev
    NLLs, and whether a stall was said), so a resumed run says it as the uninterrupted one would."""

    def __init__(self, *, warmup: int, interval: int, loss_floor: float, nll_floor: float | None,
                 devs=(), told: bool = False):  # fmt: skip
        self.warmup = warmup
        self.after = warmup + max(warmup, interval)
        self.loss_floor, self.nll_floor = loss_floor, nll_floor
        self.devs = [(s, n) for s, n in devs if s >= warmup]
        self.told = told
        self.norm = math.nan

    @classmethod
    def for_run(cls, trainer, records) -> "Stall":
        """The stall watch of `trainer` (its corpora, settings), `records` its metrics so far."""
        tr, vocab = trainer.tr, trainer.model_cfg.tgt_vocab
        train = frequencies(trainer.train_data, vocab)
        dev = None if trainer.dev_data is None else frequency_nll(train, frequencies(trainer.dev_data, vocab))
        return cls(
            warmup=tr["warmup_steps"],
            interval=tr["log_interval"],
            loss_floor=frequency_loss(train, tr["eps_ls"]),
            nll_floor=dev,
            devs=[(r["step"], r["dev_nll"]) for r in records.dev if "dev_nll" in r],
            told=bool(records.stalling),
        )

    def progress(self, rec: dict) -> dict | None:
        """A progress record (`step`, `loss`, `lr`, `grad_norm`): the stall's event, once, or None."""
        self.norm = rec.get("grad_norm") if rec.get("grad_norm") is not None else math.nan
        if self.told or rec["step"] < self.after or not rec["loss"] > (1 - STALL_FALL) * self.loss_floor:
            return None
        return self._said(rec["step"], "training loss", rec["loss"], self.loss_floor, lr=rec["lr"])

    def dev(self, step: int, nll: float, lr: float) -> dict | None:
        """A dev evaluation's NLL at `step`, trained at `lr`: the stall's event, once, or None."""
        if step < self.warmup:
            return None
        self.devs = [(s, n) for s, n in self.devs if s < step] + [(step, nll)]
        if self.told or self.nll_floor is None or len(self.devs) <= STALL_EVALS:
            return None
        before = min(n for _, n in self.devs[:-STALL_EVALS])
        recent = min(n for _, n in self.devs[-STALL_EVALS:])
        if recent < (1 - STALL_GAIN) * before or not nll > (1 - STALL_FALL) * self.nll_floor:
            return None
        return self._said(step, "dev NLL", nll, self.nll_floor, lr=lr)

    def _said(self, step, what, value, floor, *, lr) -> dict:
        self.told = True  # (the norm: NaN until a progress record has one)
        return {"event": "stalling", "step": step, "on": what, "value": value, "floor": floor, "lr": lr,
                "grad_norm": self.norm if math.isfinite(self.norm) else None}  # fmt: skip


def stall_warning(news: dict) -> str:
    """The one log line of a stalling run."""
    norm = "" if news.get("grad_norm") is None else f", gradient norm {news['grad_norm']:.4g} (before clipping)"
    evals = f", not improved over {STALL_EVALS} evaluations" if news["on"] == "dev NLL" else ""
    return (
        f"warning: training stalls at step {news['step']}: the {news['on']} is {news['value']:.4g}{evals}, "
        f"{news['value'] / news['floor']:.0%} of {news['floor']:.4g}, what predicting each target token by its "
        f"frequency alone gives (expected: below {1 - STALL_FALL:.0%} of it a warmup's length after the warmup), "
        f"at learning rate {news['lr']:.3e}{norm}; likely causes: {STALL_CAUSES}"
    )


# -- TensorBoard -----------------------------------------------------------------------------------
def _quiet_writer_thread() -> None:
    """tensorboard's writer thread re-raises a failed write, which Python prints as a traceback from
    "Thread-1"; the same error reaches the main thread at the next write, where Board says it in one
    line. Leave that thread's failures to the main thread; every other thread's are printed as before."""
    previous = threading.excepthook
    if getattr(previous, "aiayn_quiet", False):  # ours already (and not replaced since: pytest swaps its own in)
        return

    def hook(args) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and issubclass(args.exc_type, Exception):
            return
        previous(args)

    hook.aiayn_quiet = True
    threading.excepthook = hook


TRAIN = {
    "loss": "train/loss",
    "lr": "train/lr",
    "grad_norm": "train/grad_norm",
    "tgt_tokens_per_s": "train/tgt_tokens_per_s",
    "tflops": "train/tflops",
    "mfu": "train/mfu",
}
DEV = {"dev_loss": "dev/loss", "dev_nll": "dev/nll", "dev_ppl": "dev/ppl"}


class Board:
    """Writes a run's figures to `folder` as TensorBoard events, or nothing (see the module)."""

    def __init__(self, folder: str | os.PathLike | None, *, step: int, log=print):
        self.writer = None
        if folder is None:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch.utils.tensorboard imports the tensorboard package
            log(
                f"TensorBoard: the tensorboard package is not installed, no event files in {folder} "
                '(pip install "aiayn[tensorboard]" to watch the run there)'
            )
            return
        self.folder, self.log = folder, log
        _quiet_writer_thread()
        try:
            self.writer = SummaryWriter(str(folder), purge_step=step + 1 if step else None)
        except Exception as exc:
            self._failed(exc)
            return
        log(f"TensorBoard: events in {folder} (tensorboard --logdir {folder})")

    def _failed(self, exc: Exception) -> None:
        """Events stop, said once; the training goes on."""
        self.writer = None
        why = f"{exc.strerror or exc}" if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        self.log(
            f"TensorBoard: events in {self.folder} could not be written ({why}); none are written from here on, "
            "metrics.jsonl keeps every figure"
        )

    def _write(self, names: dict, record: dict, step: int) -> None:
        if self.writer is None:
            return
        try:
            for key, tag in names.items():
                value = record.get(key)
                if value is not None:
                    self.writer.add_scalar(tag, value, step)
            self.writer.flush()
        except Exception as exc:
            writer = self.writer
            self._failed(exc)
            with contextlib.suppress(Exception):
                writer.close()

    def progress(self, record: dict) -> None:
        """A progress record of metrics.jsonl (`Progress.record`)."""
        self._write(TRAIN, record, record["step"])

    def dev(self, step: int, record: dict) -> None:
        """A checkpoint's dev figures."""
        self._write(DEV, record, step)

    def close(self) -> None:
        if self.writer is not None:
            writer, self.writer = self.writer, None
            try:
                writer.close()
            except Exception as exc:
                self._failed(exc)
