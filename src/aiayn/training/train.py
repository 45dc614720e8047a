"""The training loop (§5): token batches, Adam with the §5.3 schedule, label smoothing, AMP, DDP,
a checkpoint every `checkpoint_interval` updates, exact auto-resume and graceful stops.

`train_job()` is one job of the train rule: it reads and checks its inputs, joins the process
group (`aiayn.training.distributed`) and calls `run()`. `run()` resumes from the newest readable
checkpoint of the run's folder when it is of the same run (`aiayn.training.resume` decides),
writes a checkpoint every `checkpoint_interval` updates, and on a stop signal finishes the current
update, writes a checkpoint and returns EXIT_PREEMPTED (under Slurm the job is requeued first,
`aiayn.training.distributed.requeue`). Under torchrun every rank runs it; the environment says
which rank it is. Checkpoint files: `aiayn.runtime.checkpoint`; the metrics file:
`aiayn.runtime.metrics`; progress lines: `aiayn.training.progress`.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from aiayn.data import binary, vocab
from aiayn.data.binary import PAD, Corpus
from aiayn.errors import UserError
from aiayn.io import atomic_copy, remove_leftovers, writable
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import build, count_parameters
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import metrics, precision
from aiayn.runtime.hardware import training_flops
from aiayn.runtime.schedule import rate
from aiayn.study import resolve
from aiayn.study.layout import Layout
from aiayn.training import resume
from aiayn.training.batching import Batcher, Prefetcher, collate, micro_batch_budget
from aiayn.training.board import Board
from aiayn.training.distributed import (
    Deadline,
    Env,
    StopFlag,
    all_ranks_min,
    hosts,
    peer_failure,
    requeue,
    setup,
    stop_requested,
)
from aiayn.training.progress import Progress, format_progress, format_start, start_record
from aiayn.training.watch import Watch, grad_norm, warning

EXIT_DONE = 0
EXIT_NONFINITE = 3
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: a checkpoint is written, run the job again to resume
EXIT_PEER_LOST = 4  # another process of the job was lost (killed, crashed, its node gone): run again


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps_ls: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over non-pad targets (§5.4), in the paper's code's form.

    tensor2tensor puts 1 - eps_ls on the target and spreads eps_ls over the V - 1 other classes.
    torch's `label_smoothing=e` puts e/V on every class, the target included: with e = eps_ls·V/(V-1)
    that is exactly the paper's distribution (target 1 - eps_ls, others eps_ls/(V-1)), at torch's
    speed. (t2t also subtracts the distribution's entropy, a constant: its reported loss is lower
    by that much, its gradients are the same.) torch takes e up to 1; a larger one (eps_ls above
    (V-1)/V: a small vocabulary) is the same sum written out: (1 - e)·NLL + e/V·Σ(-log p).
    """
    V = logits.size(-1)
    smoothing = eps_ls * V / (V - 1) if V > 1 else 0.0
    flat, target = logits.float().flatten(0, 1), target.flatten()
    if smoothing <= 1.0:
        return F.cross_entropy(flat, target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    logp = F.log_softmax(flat, dim=-1)  # (B*T, V)
    kept = target != PAD
    nll = -logp.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    return ((1 - smoothing) * nll - smoothing / V * logp.sum(-1))[kept].sum()


def optimizer_and_schedule(parameters, tr: dict, d_model: int, device_type: str = "cpu"):
    """Adam (§5.3: beta1, beta2, eps of `tr`, the run's `train` settings) at learning rate 1, and the
    scheduler that sets it to §5.3's rate before every update: update u (from 1) trains at
    `rate(u, d_model, warmup_steps, lr_scale)`. The check stage steps the same pair (aiayn.training.check)."""
    optimizer = torch.optim.Adam(
        parameters,
        lr=1.0,
        betas=(tr["adam_beta1"], tr["adam_beta2"]),
        eps=tr["adam_eps"],
        fused=device_type in ("cuda", "cpu"),  # one kernel over all parameters
    )
    warmup, scale = tr["warmup_steps"], tr["lr_scale"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: rate(s + 1, d_model, warmup, scale))
    return optimizer, scheduler


@dataclass
class RunFiles:
    """Where a run keeps its step checkpoints, its final model and its metrics."""

    checkpoints: Path
    out: Path
    metrics: Path
    tensorboard: Path | None = None  # TensorBoard event files, where the package is installed


class Trainer:
    """One training run; see the module docstring."""

    def __init__(self, settings: dict, train: Corpus, dev: Corpus | None, files: RunFiles, env: Env, log=print):
        self.settings, self.tr = settings, settings["train"]
        self.train_data, self.dev_data, self.files, self.env, self.log = train, dev, files, env, log
        meta = train.header["meta"]
        self.vocab_id = train.vocabularies
        self.identity = resume.identity(settings, self.vocab_id, train.identity)
        self.model_cfg = ModelConfig.from_settings(
            settings["model"],
            src_vocab=meta["src_vocab"],
            tgt_vocab=meta["tgt_vocab"],
            shared_vocab=settings["vocab"]["shared"],
        )
        check_positions(self.model_cfg, train, settings["name"])
        torch.manual_seed(self.tr["seed"])
        self.model = build(self.model_cfg, env.device)
        self.params = count_parameters(self.model)
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model) if env.world_size > 1 else None
        self.forward = self.ddp or self.model
        if self.tr["compile"]:  # shapes vary from batch to batch: compile for dynamic shapes once
            with warnings.catch_warnings():  # torch's inductor imports its own deprecated torch.jit.script_method
                warnings.filterwarnings("ignore", r"`torch\.jit\.script_method` is deprecated", DeprecationWarning)
                self.forward = torch.compile(self.forward, dynamic=True)
        self.optimizer, self.scheduler = optimizer_and_schedule(
            self.model.parameters(), self.tr, self.model_cfg.d_model, env.device.type
        )
        self.precision = precision.resolve(self.tr["precision"], env.device)
        self.scaler = torch.amp.GradScaler(env.device.type, enabled=self.precision == "fp16")
        self.accumulation, budget = micro_batch_budget(
            self.tr["tokens_per_update"], self.tr["max_tokens"], env.world_size
        )
        self.batcher = Batcher(
            train,
            budget=budget,
            seed=self.tr["seed"],
            per_update=self.accumulation * env.world_size,
            max_padded=self.tr["max_tokens"],
        )
        self.prefetcher = Prefetcher(self.prepare, depth=self.tr["prefetch"])
        self.step = 0
        self.flops_model = self.model_cfg.to_dict()
        self._first_bad = torch.zeros((), dtype=torch.long, device=env.device)  # first non-finite step, 0 = none
        self.watch = Watch(env.device)
        self.board = Board(None, step=0)  # the run's TensorBoard, opened by `run` (main process)

    def first_nonfinite(self) -> int | None:
        """First step whose loss was not finite on any rank (checked on the device, read only when
        asked; a collective under several processes, so every rank asks at the same update)."""
        bad = int(all_ranks_min(self._first_bad, self.env, none=0).item())
        return bad or None

    # -- state -----------------------------------------------------------------------------------
    def data_plan(self) -> dict:
        b = self.batcher
        return {"budget": b.budget, "max_padded": b.max_padded, "per_update": b.per_update, "n_batches": b.n_batches}

    def payload(self) -> dict:
        return {
            **ckpt.model_payload(self.model),
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "data": self.data_plan(),
            "settings": self.settings,
            "vocab": self.vocab_id,
            "identity": self.identity,
            "world_size": self.env.world_size,
            "watch": self.watch.state(),
        }

    def set_aside(self, step: int, why: list[str]) -> None:
        """Move the checkpoints and metrics of another run out of the way (rank 0), keeping them."""
        folder = self.files.checkpoints
        aside = None
        if self.env.main:
            aside = resume.set_aside(folder, self.files.metrics, time.strftime("%Y%m%d-%H%M%S"))
        if self.env.world_size > 1:
            torch.distributed.barrier()
        self.log(
            f"{folder}: the checkpoints (newest: step {step}) are of another run ({'; '.join(why)}); "
            f"moved to {aside}, training from scratch"
        )

    def resume(self) -> None:
        state = ckpt.newest_readable(self.files.checkpoints, self.log)
        if state is None:  # training starts from step 0 (none written yet, or every one damaged): so do its records
            if self.env.main:
                metrics.truncate(self.files.metrics, 0)
            return
        where = f"{self.files.checkpoints}: checkpoint of step {state['step']}"
        why = resume.reasons(state, self.identity, self.model_cfg.to_dict(), self.tr["steps"])
        if self.env.world_size > 1:
            torch.distributed.barrier()  # every rank has read the folder before rank 0 moves it
        if why:
            self.set_aside(state["step"], why)
            return
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = state["step"]
        watched = state.get("watch") or {}  # a checkpoint of aiayn 0.3 has none: watching starts afresh
        self.watch = Watch(self.env.device, lowest=watched.get("lowest", math.inf), mean=watched.get("mean", math.nan))
        self.watch.told = watched.get("told", False)
        # the data position is the step, and dropout masks follow the micro-batch (seed_dropout):
        # no random state to restore, at any GPU count, as long as the micro-batches are the same
        if state["data"] != self.data_plan():
            self.log(
                f"warning: {where} ran with another batch plan (GPU count x accumulation); resuming, not bit-exactly"
            )
        self.log(f"resumed from step {self.step}")
        if self.env.main:
            metrics.truncate(self.files.metrics, self.step)
            self.evaluate_missing(state["model"])
        if self.env.world_size > 1:
            torch.distributed.barrier()

    def evaluate_missing(self, weights: dict) -> None:
        """Evaluate the kept checkpoints (on the grid, up to the resumed step) that have no dev record:
        a job killed between a checkpoint and its dev pass. The resumed weights are restored after."""
        if self.dev_data is None:
            return
        evaluated = {r["step"] for r in metrics.read(self.files.metrics).dev}
        found = ckpt.list_checkpoints(self.files.checkpoints)
        todo = resume.unevaluated(found, evaluated, self.step, self.tr["checkpoint_interval"], self.tr["steps"])
        loaded = False
        for step, path in todo:
            if step != self.step:
                try:
                    self.model.load_state_dict(ckpt.load(path)["model"])
                except ckpt.CheckpointError as exc:
                    self.log(f"warning: {exc}; its dev record stays missing")
                    continue
                loaded = True
            elif loaded:
                self.model.load_state_dict(weights)
                loaded = False
            self.log_dev(step, self.evaluate(), note=" (evaluated on resume)")
        if loaded:
            self.model.load_state_dict(weights)

    def log_dev(self, step: int, dev: dict, note: str = "") -> None:
        if dev:
            metrics.append(self.files.metrics, {"step": step, **dev})
            self.board.dev(step, dev)
            self.log(f"step {step} dev nll {dev['dev_nll']:.4f} ppl {dev['dev_ppl']:.2f}{note}")

    def save(self) -> Path:
        path = ckpt.step_path(self.files.checkpoints, self.step)
        if self.env.main:
            ckpt.save(self.payload(), path)
            tr = self.tr
            ckpt.prune(self.files.checkpoints, tr["keep_checkpoints"], tr["checkpoint_interval"], tr["steps"])
        return path

    # -- one update --------------------------------------------------------------------------------
    def prepare(self, step: int) -> tuple[list, int, int, float]:
        """Update `step`'s data: this rank's collated micro-batches, and of all ranks the tokens (src,
        tgt) and the update's FLOPs at the real lengths. Runs in the prefetch thread."""
        micro = self.batcher.update(step)
        src_len = [self.batcher.src_len[b] for b in micro]
        tgt_len = [self.batcher.tgt_len[b] for b in micro]
        src_tokens = sum(int(n.sum()) for n in src_len)
        tgt_tokens = sum(int(n.sum()) for n in tgt_len)
        flops = sum(training_flops(self.flops_model, s, t) for s, t in zip(src_len, tgt_len))
        mine = micro[self.env.rank * self.accumulation : (self.env.rank + 1) * self.accumulation]
        return [collate(self.train_data, indices) for indices in mine], src_tokens, tgt_tokens, flops

    def update(self) -> tuple[torch.Tensor, int, int, float, torch.Tensor]:
        """One optimizer step over this rank's micro-batches; returns (summed loss, src and tgt tokens
        and FLOPs of all ranks, the gradient norm before clipping)."""
        mine, src_tokens, tgt_tokens, flops = self.prefetcher.get(self.step + 1)
        lr = self.scheduler.get_last_lr()[0]  # the rate this update trains at
        module = self.forward
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.env.device)
        first = self.step * self.batcher.per_update + self.env.rank * self.accumulation
        for j, host_batch in enumerate(mine):
            batch = host_batch.to(self.env.device)  # pinned memory: an asynchronous copy
            seed_dropout(self.tr["seed"], first + j, self.env.device)
            sync = self.ddp is None or j == len(mine) - 1
            with contextlib.nullcontext() if sync else self.ddp.no_sync(), self.autocast():
                logits = module(batch.src, batch.tgt_in)  # (B, T, V)
            loss = label_smoothed_loss(logits, batch.tgt_out, self.tr["eps_ls"])
            # DDP averages gradients over ranks, hence × world_size: the update's gradient is that
            # of the summed loss over all its target tokens divided by their number.
            self.scaler.scale(loss * (self.env.world_size / tgt_tokens)).backward()
            total += loss.detach()
        if self.scaler.is_enabled():  # the norm of the true gradients (the scaler's step then skips its own unscale)
            self.scaler.unscale_(self.optimizer)
        if self.tr["clip_norm"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tr["clip_norm"])
        else:
            norm = grad_norm(self.model.parameters())
        self.step += 1
        self.watch.observe(self.step, total / max(sum(b.tgt_tokens for b in mine), 1), lr, norm)
        applied = True
        if self.scaler.is_enabled():  # fp16: the scaler skips overflowing updates itself
            scale = self.scaler.get_scale()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            if self.scaler.get_scale() < scale:  # the scale drops exactly when an update was skipped
                applied = False
                self.log(
                    f"step {self.step}: fp16 overflow, update skipped (loss scale now {self.scaler.get_scale():g})"
                )
        else:
            self.optimizer.step()
            bad = ~torch.isfinite(total) & (self._first_bad == 0)
            self._first_bad = torch.where(bad, torch.full_like(self._first_bad, self.step), self._first_bad)
        if applied:  # the §5.3 schedule counts the updates that were made
            self.scheduler.step()
        return total, src_tokens, tgt_tokens, flops, norm

    def autocast(self):
        return precision.autocast(self.env.device, self.precision)

    # -- evaluation ----------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict:
        """Dev-set loss: NLL per target token (perplexity = exp) and the label-smoothed loss."""
        if self.dev_data is None:
            return {}
        self.model.eval()
        dev = Batcher(
            self.dev_data, budget=self.batcher.budget, seed=0, per_update=1, max_padded=self.batcher.max_padded
        )
        nll = smoothed = torch.zeros((), dtype=torch.float64, device=self.env.device)
        tokens = 0
        for indices in dev.epoch(0):
            batch = collate(self.dev_data, indices).to(self.env.device)
            with self.autocast():
                logits = self.model(batch.src, batch.tgt_in)
            nll = nll + label_smoothed_loss(logits, batch.tgt_out, 0.0)
            smoothed = smoothed + label_smoothed_loss(logits, batch.tgt_out, self.tr["eps_ls"])
            tokens += batch.tgt_tokens
        self.model.train()
        nll_per = nll.item() / tokens
        return {"dev_nll": nll_per, "dev_ppl": math.exp(min(nll_per, 700)), "dev_loss": smoothed.item() / tokens}


def run(trainer: Trainer, stop, *, max_updates: int | None = None) -> int:
    """Train until the configured steps (or `max_updates` more, or a stop); return the exit code.
    The run's folder is held by rank 0 while it trains: a second trainer of it is refused."""
    env = trainer.env
    try:
        with contextlib.ExitStack() as held:
            failure = None
            if env.main:
                try:
                    held.enter_context(ckpt.exclusive(trainer.files.checkpoints))
                except UserError as exc:
                    failure = exc
            if env.world_size > 1:  # every rank stops if rank 0 could not hold the folder
                flag = torch.tensor([failure is not None], dtype=torch.int32, device=env.device)
                torch.distributed.broadcast(flag, 0)
                if flag.item() and failure is None:
                    failure = UserError(f"{trainer.files.checkpoints} is being trained by another job")
            if failure is not None:
                raise failure
            return _run(trainer, stop, max_updates)
    except RuntimeError as exc:
        lost = peer_failure(exc, env)
        if lost is None:
            raise
        # every rank that is left says so itself (rank 0's log may be the one that is gone)
        newest = ckpt.list_checkpoints(trainer.files.checkpoints)
        kept = f"the newest checkpoint (step {newest[0][0]}) is kept" if newest else "no checkpoint was written yet"
        print(
            f"error: rank {env.rank} on {socket.gethostname()}: another process of this training job was lost "
            f"({lost}); stopping at step {trainer.step}; {kept}: run again to resume (exit {EXIT_PEER_LOST})",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_PEER_LOST
    finally:
        trainer.prefetcher.close()
        trainer.board.close()


def _run(trainer: Trainer, stop, max_updates: int | None) -> int:
    env, total, files = trainer.env, trainer.tr["steps"], trainer.files
    files.checkpoints.mkdir(parents=True, exist_ok=True)
    if env.main:  # this job owns the folder: a temporary file in it is a killed write's
        remove_leftovers(files.checkpoints, every=True, log=trainer.log)
    if env.world_size > 1:
        torch.distributed.barrier()
    trainer.resume()
    where = hosts(env)
    if env.main:
        rec = start_record(
            env=env,
            hosts=where,
            step=trainer.step,
            accumulation=trainer.accumulation,
            budget=trainer.batcher.budget,
            params=trainer.params,
            precision=trainer.precision,
        )
        metrics.append(files.metrics, rec)
        trainer.log(format_start(rec, name=trainer.settings["name"], total=total))
        trainer.board = Board(files.tensorboard, step=trainer.step, log=trainer.log)
    progress = Progress(env=env, precision=trainer.precision, step=trainer.step, total=total)
    left = max_updates if max_updates is not None else total
    trainer.model.train()
    while trainer.step < total and left > 0:
        loss, src, tgt, flops, norm = trainer.update()
        left -= 1
        progress.add(loss, src, tgt, flops, norm)
        step = trainer.step
        at_log = step % trainer.tr["log_interval"] == 0 or step == total
        at_checkpoint = step % trainer.tr["checkpoint_interval"] == 0 or step == total
        if at_log or at_checkpoint:
            news = trainer.watch.news()  # the first diverging update, told once
            if news is not None and env.main:
                metrics.append(files.metrics, {**news, "wall": time.time()})
                trainer.log(warning(news))
        if (at_log or at_checkpoint) and trainer.first_nonfinite() is not None:
            trainer.log(
                f"error: the loss is not finite at step {trainer.first_nonfinite()}; stopping, no checkpoint written "
                "(lower training.lr_scale or turn on training.clip_norm)"
            )
            return EXIT_NONFINITE
        if at_log:
            rec = progress.record(step, trainer.scheduler.get_last_lr()[0])
            if env.main:
                metrics.append(files.metrics, rec)
                trainer.board.progress(rec)
                trainer.log(format_progress(rec, total))
        if at_checkpoint:
            checkpoint_and_evaluate(trainer)
        if stop_requested(stop, env, step):
            if not at_checkpoint:
                trainer.save()
            if env.world_size > 1:
                torch.distributed.barrier()  # the checkpoint is on disk before the job is requeued
                # each process says where it stopped: the same step on every node
                print(f"rank {env.rank} on {where[env.rank]}: stops at step {step}", flush=True)
            why = stop.reason() if isinstance(stop, StopFlag) else "stop signal"
            if env.main:
                metrics.append(files.metrics, {"event": "stop", "step": step, "reason": why, "wall": time.time()})
            again = requeue(env, trainer.log)
            trainer.log(f"{why}: checkpoint of step {step} written; {again} (exit {EXIT_PREEMPTED})")
            return EXIT_PREEMPTED
    if trainer.step >= total and env.main:
        atomic_copy(ckpt.step_path(files.checkpoints, trainer.step), files.out)
        trainer.log(f"done: {files.out}")
    return EXIT_DONE


def seed_dropout(seed: int, micro_batch: int, device: torch.device) -> None:
    """Dropout masks drawn from the global index of the micro-batch: the same masks for the same
    micro-batch whichever process runs it, so 2 processes train as 1 with accumulation 2 (up to the
    rounding of gradient sums taken in another order)."""
    value = (seed * 1_000_003 + micro_batch) % (2**63)
    if device.type == "cuda":
        torch.cuda.manual_seed(value)  # this device's generator only; no synchronisation
    else:
        torch.manual_seed(value)


def checkpoint_and_evaluate(trainer: Trainer) -> None:
    trainer.save()
    if trainer.env.main:
        trainer.log_dev(trainer.step, trainer.evaluate())
    if trainer.env.world_size > 1:
        torch.distributed.barrier()


def check_positions(cfg: ModelConfig, train: Corpus, name: str) -> None:
    """Learned positions end at max_positions: the longest training pair (EOS / BOS included) must
    fit, or its first update fails deep in the model."""
    meta = train.header["meta"]
    longest = max(meta.get("longest_src", 0), meta.get("longest_tgt", 0)) + 1
    if cfg.positional == "learned" and longest > cfg.max_positions:
        raise UserError(
            f"experiments.{name}.model.max_positions: {cfg.max_positions} learned positions, but {train.path} holds "
            f"a pair of {longest} (EOS or BOS included); raise max_positions or lower cleaning.max_len"
        )


# -- one job of the train rule -----------------------------------------------------------------------
def check_vocabularies(train: Corpus, dev: Corpus | None, spm: dict) -> None:
    """The sentencepiece models `spm` ({"src", "tgt"}: paths, or None) must be those the training
    data was encoded with, and the dev set must be encoded with the same (else its perplexity means
    nothing)."""
    side = vocab.differing_file(train.vocabularies, spm)
    if side:
        path = spm["src" if side == "source" else "tgt"]
        raise UserError(f"{path} is not the {side} vocabulary {train.path} was encoded with; rerun `snakemake data`")
    side = dev is not None and vocab.differing_side(train.vocabularies, dev.vocabularies)
    if side:
        raise UserError(
            f"{dev.path} was encoded with another {side} vocabulary than {train.path}; "
            "encode both with the same sentencepiece models (rerun `snakemake data`)"
        )


def train_job(
    settings_path,
    train_path,
    checkpoints,
    out,
    *,
    dev_path=None,
    spm_src=None,
    spm_tgt=None,
    metrics_path=None,
    device: str = "auto",
    max_updates: int | None = None,
    stop_margin: float = 0.0,
    tensorboard=None,
) -> int:
    """One training job (`python -m aiayn train`): the experiment's settings (experiment.json),
    its encoded training and dev data, checked against its sentencepiece models; step checkpoints
    in `checkpoints`, the final model `out`, metrics beside the checkpoints unless `metrics_path`.
    In a Slurm job it stops `stop_margin` seconds before the job's time limit. TensorBoard events go
    to the folder `tensorboard` (default: beside the checkpoints) where the package is installed
    (aiayn.training.board). Returns the exit code."""
    writable(out)  # before hours of training
    settings = resolve.read(settings_path)
    train = binary.read(train_path)
    dev = binary.read(dev_path) if dev_path else None
    check_vocabularies(train, dev, {"src": spm_src, "tgt": spm_tgt})
    env = setup(device)
    checkpoints = Path(checkpoints)
    files = RunFiles(
        checkpoints,
        Path(out),
        Path(metrics_path or Layout.metrics_of(checkpoints)),
        Path(tensorboard or Layout.tensorboard_of(checkpoints)),
    )

    def log(message: str) -> None:
        if env.main:
            print(message, flush=True)

    job = os.environ.get("SLURM_JOB_ID")
    stop = StopFlag(Deadline(job, stop_margin) if job and stop_margin > 0 and env.main else None)
    stop.install()
    return run(Trainer(settings, train, dev, files, env, log), stop, max_updates=max_updates)
