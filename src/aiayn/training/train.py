"""The trainer (§5): token batches, Adam with the §5.3 schedule, label smoothing, AMP, DDP, exact
auto-resume and graceful stops, and one job of the train rule.

`Trainer` holds a run's model, optimizer, batches and state and makes one update (`update`: the
experiment's micro-batches, its loss and optimizer from `aiayn.training.objective`), a dev pass
(`evaluate`) and a checkpoint (`save`). `run()` holds the run's folder; `train_loop()` resumes or
starts it (`restore`, the one place that is decided) and loops over updates: batch, step, log,
checkpoint, stop, and the exit code. `train_job()` is one job of the train rule: it reads and
checks its inputs, joins the process group (`aiayn.training.distributed`) and calls `run()`. Under
torchrun every rank runs it; the environment says which rank it is. Progress records, the watch for a diverging or
stalled run and TensorBoard: `aiayn.training.progress`; checkpoint files: `aiayn.runtime.checkpoint`; the metrics file:
`aiayn.runtime.metrics`.

Resume or start. A run is what its settings say. Each checkpoint carries its run's identity
(`identity`): the model, the vocabulary settings and sentencepiece models, the encoded training data
(its SHA-256) and every training setting but the OPERATIONAL ones, which do not change the weights.
A newest checkpoint whose identity differs from the job's, or that is past a lowered `steps`, is of
another run (`reasons`): its checkpoints and metrics are moved aside, never deleted (`set_aside`),
and training starts afresh, with one line naming each change. Raising `steps` continues the run. A
resumed run evaluates the kept checkpoints whose dev pass a kill cut off (`evaluate_missing`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.data import binary, vocab
from aiayn.data.binary import Corpus
from aiayn.errors import UserError
from aiayn.io import parse_json, remove_leftovers, writable
from aiayn.model.hparams import ModelConfig
from aiayn.model.transformer import build, count_parameters
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import metrics, precision
from aiayn.runtime.hardware import training_flops
from aiayn.study import resolve
from aiayn.study.layout import Layout
from aiayn.training.batching import Batcher, Prefetcher, collate, micro_batch_budget
from aiayn.training.distributed import (
    Deadline,
    Env,
    StopFlag,
    all_ranks_min,
    barrier,
    hosts,
    peer_failure,
    requeue,
    setup,
    stop_requested,
)
from aiayn.training.objective import label_smoothed_loss, optimizer_and_schedule, seed_dropout
from aiayn.training.progress import (
    Board,
    Progress,
    Stall,
    Watch,
    format_progress,
    format_start,
    grad_norm,
    stall_warning,
    start_record,
    warning,
)

EXIT_DONE = 0
EXIT_NONFINITE = 3
EXIT_PEER_LOST = 4  # another process of the job was lost (killed, crashed, its node gone): run again
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: a checkpoint is written, run the job again to resume


@dataclass
class RunFiles:
    """Where a run keeps its step checkpoints, its final model and its metrics."""

    checkpoints: Path
    out: Path
    metrics: Path
    tensorboard: Path | None = None  # TensorBoard event files, where the package is installed


class Trainer:
    """One training run; see the module docstring."""

    def __init__(self, settings: dict, train: Corpus, dev: Corpus | None, files: RunFiles, *, env: Env, log=print):
        self.settings, self.tr = settings, settings["train"]
        self.train_data, self.dev_data, self.files, self.env, self.log = train, dev, files, env, log
        self.vocab_id = train.vocabularies
        self.identity = identity(settings, self.vocab_id, train.identity)
        self.model_cfg = model_config(settings, train)
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
        self.stall = None  # the stall watch (aiayn.training.progress.Stall), made at the start (main process)
        self.carried = {}  # the open log interval's sums at the step (Progress.state), which a checkpoint keeps

    def first_nonfinite(self) -> int | None:
        """First step whose loss was not finite on any rank (checked on the device, read only when
        asked; a collective under several processes, so every rank asks at the same update)."""
        bad = int(all_ranks_min(self._first_bad, self.env, none=0).item())
        return bad or None

    def finite(self) -> bool:
        """At a log or checkpoint update: the first diverging update told once (main process); False,
        said, where a loss was not finite (the run stops, no checkpoint written)."""
        news = self.watch.news()
        if news is not None and self.env.main:
            self.event(news, warning(news))
        bad = self.first_nonfinite()
        if bad is not None:
            self.log(
                f"error: the loss is not finite at step {bad}; stopping, no checkpoint written "
                "(lower training.lr_scale or turn on training.clip_norm)"
            )
        return bad is None

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
            "progress": self.carried,
        }

    def log_dev(self, step: int, dev: dict, note: str = "") -> None:
        if dev:
            metrics.append(self.files.metrics, {"step": step, **dev})
            self.board.dev(step, dev)
            self.log(f"step {step} dev nll {dev['dev_nll']:.4f} ppl {dev['dev_ppl']:.2f}{note}")
            if self.stall is not None:
                self.said(self.stall.dev(step, dev["dev_nll"], self.scheduler.get_last_lr()[0]))

    def log_progress(self, rec: dict) -> None:
        """A progress record (`Progress.record`): metrics.jsonl, TensorBoard, the log, the stall watch."""
        if self.env.main:
            metrics.append(self.files.metrics, rec)
            self.board.progress(rec)
            self.log(format_progress(rec, self.tr["steps"]))
            self.said(self.stall.progress(rec))

    def said(self, stall: dict | None) -> None:
        """A stall the watch found (main process): recorded in metrics.jsonl and said once."""
        if stall is not None:
            self.event(stall, stall_warning(stall))

    def event(self, rec: dict, line: str) -> None:
        """An event of the run (main process): its record in metrics.jsonl, stamped, and its log line."""
        metrics.append(self.files.metrics, {**rec, "wall": time.time()})
        self.log(line)

    def save(self, grid: bool = True) -> None:
        """Checkpoint this step (rank 0): the whole training state, to resume from, and on the checkpoint
        grid, where the run's averaging reads any (`keep_checkpoints`), the weights alone; then prune."""
        if not self.env.main:
            return
        tr, folder, payload = self.tr, self.files.checkpoints, self.payload()
        if grid and (tr["keep_checkpoints"] or 0) > 0:  # a hand-written null keeps none
            ckpt.save(ckpt.weights_of(payload), ckpt.step_path(folder, self.step))
        ckpt.save(payload, ckpt.resume_path(folder, self.step))
        ckpt.prune(folder, tr["keep_checkpoints"] or 0, tr["checkpoint_interval"], tr["steps"])

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
                    held.enter_context(ckpt.exclusive(trainer.files.checkpoints, lock_of(trainer.files.checkpoints)))
                    metrics_lock = lock_of_metrics(trainer.files.metrics)
                    held.enter_context(ckpt.exclusive(trainer.files.metrics, metrics_lock, "written (metrics)"))
                except UserError as exc:
                    failure = exc
            if env.world_size > 1:  # every rank stops if rank 0 could not hold the folder
                flag = torch.tensor([failure is not None], dtype=torch.int32, device=env.device)
                torch.distributed.broadcast(flag, 0)
                if flag.item() and failure is None:
                    failure = UserError(f"{trainer.files.checkpoints} is being trained by another job")
            if failure is not None:
                raise failure
            return train_loop(trainer, stop, max_updates)
    except RuntimeError as exc:
        lost = peer_failure(exc, env)
        if lost is None:
            raise
        # every rank that is left says so itself (rank 0's log may be the one that is gone)
        newest = ckpt.list_resumable(trainer.files.checkpoints)
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


def train_loop(trainer: Trainer, stop, max_updates: int | None) -> int:
    """Resume or start (`restore`), say so, then update by update: batch and
    step (`Trainer.update`), a divergence told once and a non-finite loss stopping the run, a
    progress record every `log_interval` updates, a checkpoint and a dev pass every
    `checkpoint_interval`, and a stop signal or a coming time limit ending the run with a checkpoint
    (requeued under Slurm); at the last update, the final model. Every rank runs it; rank 0 writes."""
    env, tr, total = trainer.env, trainer.tr, trainer.tr["steps"]
    restore(trainer)
    where = hosts(env)
    if env.main:
        say_start(trainer, where)
    progress = Progress(env=env, precision=trainer.precision, step=trainer.step, total=total)
    progress.resume(trainer.carried)
    trainer.model.train()
    left = max_updates if max_updates is not None else total
    while trainer.step < total and left > 0:
        left -= 1
        progress.add(trainer.update())
        step = trainer.step
        at_log = step % tr["log_interval"] == 0 or step == total
        at_checkpoint = ckpt.on_grid(step, tr["checkpoint_interval"], total)
        if (at_log or at_checkpoint) and not trainer.finite():
            return EXIT_NONFINITE
        if at_log:
            trainer.log_progress(progress.record(step, trainer.scheduler.get_last_lr()[0]))
        if at_checkpoint:
            trainer.carried = progress.state()
            trainer.save()
            if env.main:
                trainer.log_dev(step, trainer.evaluate())
            barrier(env)
        if stop_requested(stop, env, step):
            trainer.carried = progress.state()  # (the same as at the checkpoint, where this step is one)
            return stopped(trainer, stop, where[env.rank], checkpointed=at_checkpoint, since=progress.start)
    if trainer.step >= total and env.main:  # the final model: the weights alone, under the run's output name
        weights, last = ckpt.weights_of(trainer.payload()), ckpt.step_path(trainer.files.checkpoints, total)
        if (tr["keep_checkpoints"] or 0) > 0 and not last.exists():  # a finished run's, deleted (damaged): again
            ckpt.save(weights, last)
        ckpt.save(weights, trainer.files.out)
        trainer.log(f"done: {trainer.files.out}")
    elif env.main:  # --max-updates reached: what a rerun resumes from is said
        newest = ckpt.list_resumable(trainer.files.checkpoints)
        since = f"step {newest[0][0]}, its newest checkpoint" if newest else "step 0: no checkpoint yet"
        trainer.log(f"stopped at step {trainer.step} (--max-updates); a run again resumes from {since}")
    return EXIT_DONE


def say_start(trainer: Trainer, where: list[str]) -> None:
    """A job's start (main process): its record in metrics.jsonl and the log, its TensorBoard, and
    its stall watch, made from the run's metrics so far."""
    rec = start_record(
        env=trainer.env,
        hosts=where,
        step=trainer.step,
        accumulation=trainer.accumulation,
        budget=trainer.batcher.budget,
        params=trainer.params,
        precision=trainer.precision,
    )
    metrics.append(trainer.files.metrics, {**rec, "run": trainer.identity})  # whose records these are
    trainer.log(format_start(rec, name=trainer.settings["name"], total=trainer.tr["steps"]))
    plan = trainer.batcher  # a limit the settings ask for is said with its count
    if over := int(((plan.src_len > plan.max_padded) | (plan.tgt_len > plan.max_padded)).sum()):
        trainer.log(f"warning: {over:,} pairs are longer than train.max_tokens ({plan.max_padded:,} padded tokens a "
                    "micro-batch): each is a micro-batch of its own, over that bound")  # fmt: skip
    trainer.board = Board(trainer.files.tensorboard, step=trainer.step, log=trainer.log)
    trainer.stall = Stall.for_run(trainer, metrics.read(trainer.files.metrics, torn=True))


def stopped(trainer: Trainer, stop, host: str, *, checkpointed: bool, since: float) -> int:
    """A stop signal or a coming time limit: a checkpoint, the job requeued, EXIT_PREEMPTED (`since`: the
    job's start on time.perf_counter's clock)."""
    env, step = trainer.env, trainer.step
    if not checkpointed:
        trainer.save(grid=False)  # off the checkpoint grid: for resuming only
    if env.world_size > 1:
        torch.distributed.barrier()  # the checkpoint is on disk before the job is requeued
        # each process says where it stopped: the same step on every node
        print(f"rank {env.rank} on {host}: stops at step {step}", flush=True)
    why = stop.reason() if isinstance(stop, StopFlag) else "stop signal"
    if env.main:  # before the requeue, which may end this process
        rec = {"event": "stop", "step": step, "reason": why, "wall": time.time(), "job_s": time.perf_counter() - since}
        metrics.append(trainer.files.metrics, rec)
    again = requeue(env, trainer.log)
    trainer.log(f"{why}: checkpoint of step {step} written; {again} (exit {EXIT_PREEMPTED})")
    return EXIT_PREEMPTED


# -- resume or start: whether a checkpoint continues this run, and what becomes of one that does not --
# training settings that do not shape the weights: changing them continues a run (steps: raising
# it; a checkpoint past a lowered `steps` starts afresh). max_tokens only splits an update into
# micro-batches (the resume warns that it is no longer bit-exact).
OPERATIONAL = frozenset(
    {"steps", "log_interval", "checkpoint_interval", "keep_checkpoints", "prefetch", "compile", "max_tokens"}
)
# identity keys whose values are hashes: a change is named, not printed
HASHED = {"vocabularies": "other sentencepiece models", "training_data": "other encoded training data"}


def identity(settings: dict, vocabularies: dict, training_data: str | None) -> dict:
    """What shapes a run's weights: model, vocabulary settings and files, training data (SHA-256 of
    the encoded file) and the training settings but the OPERATIONAL ones."""
    return {
        "model": settings["model"],
        "vocab": settings["vocab"],
        "train": {k: v for k, v in settings["train"].items() if k not in OPERATIONAL},
        "vocabularies": vocabularies,
        "training_data": training_data,
    }


def changes(old, new, key: str = "") -> list[str]:
    """`key: old -> new` for each leaf that differs between two run identities (nested dicts)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += changes(old.get(k, "(unset)"), new.get(k, "(unset)"), f"{key}.{k}" if key else str(k))
        return out
    if old == new:
        return []
    top = key.split(".")[0]
    if top in HASHED:
        return [f"{top}: {HASHED[top]}"]
    return [f"{key}: {json.dumps(old)} -> {json.dumps(new)}"]


def reasons(state: dict, ours: dict, model_config: dict, steps: int) -> list[str]:
    """Why the checkpoint `state` is not of the run whose identity is `ours` (a model of
    `model_config`, trained for `steps` updates); empty: it is, and training continues it."""
    theirs = state.get("identity")
    if theirs is None:
        return ["the checkpoint records no run identity"]
    why = changes(theirs, ours)
    if not why and state["model_config"] != model_config:
        why = ["the model's shape"]
    if state["step"] > steps:
        why.append(f"train.steps: {state['settings']['train']['steps']} -> {steps}, below its step")
    return why


def finished_work(files, interval: int) -> str:
    """What a run has finished that a start from step 0 would rewrite: kept checkpoints, its final
    model, dev records of evaluated checkpoints, records of updates past the first checkpoint's step
    `interval` (a checkpoint was written); empty where there is none (a first start, or a run killed
    before its first checkpoint)."""
    kept = [step for step, _ in ckpt.list_checkpoints(files.checkpoints)]
    records = metrics.read(files.metrics, torn=True)  # (none where there is no file yet)
    past = max([r["step"] for r in records.progress if r["step"] >= interval], default=0)
    said = [f"kept checkpoints of steps {min(kept)} to {max(kept)}" if kept else "",
            f"the final model {files.out}" if files.out.is_file() else "",
            f"{len(records.dev)} dev records in {files.metrics}" if records.dev else "",
            f"records of updates to step {past} in {files.metrics}" if past and not records.dev else ""]  # fmt: skip
    return ", ".join(s for s in said if s)


def not_shared(path: Path, identity: dict) -> None:
    """Refuse a metrics file that holds another run's records (a start record of another identity):
    runs never share a file they write, and this run would cut the other's records to its own step."""
    mine = parse_json(json.dumps(identity), finite=False)
    other = next((r["run"] for r in metrics.read(path, torn=True).start if r.get("run", mine) != mine), None)
    if other is not None:
        differ = "; ".join(changes(other, mine)[:3]) or "another run"
        raise UserError(f"{path}: the records of another run ({differ}): runs never share a metrics file; give this "
                        "run its own --metrics, or move that file aside if its run is gone")  # fmt: skip


def set_aside(checkpoints: Path, stamp: str, *beside: Path | None) -> Path:
    """Move the checkpoints folder of another run and what it wrote `beside` it (its metrics, its
    final model where it is outside the folder, its TensorBoard folder) into `replaced-<stamp>` (made
    unique), keeping them (copied where another file system holds them); leave an empty checkpoints
    folder. Returns where."""
    aside, n = Path(Layout.replaced(checkpoints, stamp)), 1
    while aside.exists():
        n += 1
        aside = Path(Layout.replaced(checkpoints, f"{stamp}-{n}"))
    aside.mkdir(parents=True)
    shutil.move(checkpoints, aside / checkpoints.name)
    for path in beside:
        if path is not None and path.exists():
            shutil.move(path, aside / path.name)
    checkpoints.mkdir(parents=True, exist_ok=True)
    return aside


def restore(trainer: Trainer) -> None:
    """Resume or start, the one place it is decided and done: resume `trainer` from the newest
    readable checkpoint of its folder when it is of the same run (`reasons`); set the folder aside
    and start from step 0 when it is of another; start from step 0 when there is none, unless the
    run's finished work is there (`finished_work`: refused). A killed writer's temporary files go first."""
    files, env = trainer.files, trainer.env
    files.checkpoints.mkdir(parents=True, exist_ok=True)
    if env.main:  # this job owns the folder (it holds its lock): a temporary file in it is a killed write's
        remove_leftovers(files.checkpoints, every=True, log=trainer.log)
    barrier(env)
    state = ckpt.newest_readable(files.checkpoints, trainer.log)
    why = state and reasons(state, trainer.identity, trainer.model_cfg.to_dict(), trainer.tr["steps"])
    if not why:  # (another run's checkpoints: they and the metrics are set aside, below)
        not_shared(files.metrics, trainer.identity)
    if state is None:  # training starts from step 0 (none written yet): so do its records
        if finished := finished_work(files, trainer.tr["checkpoint_interval"]):
            raise UserError(
                f"{files.checkpoints}: no checkpoint to resume from (resume_*.pt missing or damaged), yet this run's "
                f"work is here ({finished}); training from step 0 would rewrite it. To continue, put its newest "
                f"resume_*.pt back; to start again, move {files.checkpoints} and {files.metrics} aside"
            )
        if env.main:
            metrics.truncate(files.metrics, 0)
        return
    where = f"{files.checkpoints}: checkpoint of step {state['step']}"
    barrier(env)  # every rank has read the folder before rank 0 moves it
    if why:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = set_aside(files.checkpoints, stamp, files.metrics, files.out, files.tensorboard) if env.main else None
        barrier(env)
        trainer.log(
            f"{files.checkpoints}: the checkpoints (newest: step {state['step']}) are of another run "
            f"({'; '.join(why)}); moved to {aside}, training from scratch"
        )
        return
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.scaler.load_state_dict(state["scaler"])
    trainer.step = state["step"]
    watched = state.get("watch") or {}  # a checkpoint of aiayn 0.3 has none: watching starts afresh
    trainer.watch = Watch(env.device, lowest=watched.get("lowest", math.inf), mean=watched.get("mean", math.nan))
    trainer.watch.told = watched.get("told", False)
    trainer.carried = state.get("progress") or {}  # the open log interval (older checkpoints: none)
    # the data position is the step, and dropout masks follow the micro-batch (seed_dropout):
    # no random state to restore, at any GPU count, as long as the micro-batches are the same
    if state["data"] != trainer.data_plan():
        trainer.log(
            f"warning: {where} ran with another batch plan (GPU count x accumulation); resuming, not bit-exactly"
        )
    trainer.log(f"resumed from step {trainer.step}")
    if env.main:
        if not metrics.read(files.metrics, torn=True).start:  # its records removed (or emptied) since: said
            trainer.log(f"warning: {files.metrics} holds no record of this run's first {trainer.step} updates "
                        f"(removed?): its curves and hours start at step {trainer.step}")  # fmt: skip
        metrics.truncate(files.metrics, trainer.step)
        evaluate_missing(trainer, state["model"])
    barrier(env)


def evaluate_missing(trainer: Trainer, weights: dict) -> None:
    """Evaluate the kept checkpoints (on the grid, up to the resumed step) that have no dev record:
    a job killed between a checkpoint and its dev pass. The resumed weights are restored after."""
    if trainer.dev_data is None:
        return
    evaluated = {r["step"] for r in metrics.read(trainer.files.metrics, torn=True).dev}
    folder = trainer.files.checkpoints
    # a step's weights alone where kept, else its resume checkpoint (a run that keeps none for averaging)
    found = {**dict(ckpt.list_resumable(folder)), **dict(ckpt.list_checkpoints(folder))}
    interval, final = trainer.tr["checkpoint_interval"], trainer.tr["steps"]
    missing = [(s, p) for s, p in found.items() if s <= trainer.step and s not in evaluated]
    missing = [(s, p) for s, p in missing if ckpt.on_grid(s, interval, final)]
    loaded = False
    for step, path in sorted(missing):  # oldest first
        if step != trainer.step:
            try:
                trainer.model.load_state_dict(ckpt.load(path)["model"])
            except ckpt.CheckpointError as exc:
                trainer.log(f"warning: {exc.said}; its dev record stays missing")
                continue
            loaded = True
        elif loaded:
            trainer.model.load_state_dict(weights)
            loaded = False
        trainer.log_dev(step, trainer.evaluate(), note=" (evaluated on resume)")
    if loaded:
        trainer.model.load_state_dict(weights)


def model_config(settings: dict, train: Corpus) -> ModelConfig:
    """The model an experiment trains: its settings over the vocabularies `train` was encoded with,
    its learned positions (if any) holding the longest pair (`check_positions`); under a shared
    vocabulary (§3.4's tied embeddings), one vocabulary on both sides of the corpus."""
    meta, used = train.header["meta"], train.vocabularies
    if settings["vocab"]["shared"] and (meta["src_vocab"] != meta["tgt_vocab"] or None not in used.values() and
                                        used["src"] != used["tgt"]):  # fmt: skip
        raise UserError(
            f"{train.path}: encoded with two vocabularies (source and target), where vocab.shared says one: "
            "encode it with the one shared sentencepiece model, or set vocab.shared: false"
        )
    cfg = ModelConfig.from_settings(
        settings["model"],
        src_vocab=meta["src_vocab"],
        tgt_vocab=meta["tgt_vocab"],
        shared_vocab=settings["vocab"]["shared"],
    )
    check_positions(cfg, train, settings["name"])
    return cfg


def check_positions(cfg: ModelConfig, train: Corpus, name: str) -> None:
    """Learned positions end at max_positions: the longest training pair (EOS / BOS included) must
    fit, or its first update fails deep in the model (the lengths themselves, not what a header says)."""
    longest = int(max(train.src_lengths.max(initial=0), train.tgt_lengths.max(initial=0))) + 1
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


lock_of = Layout.train_lock  # the lock the one trainer of a run holds (its averaging too)


def lock_of_metrics(metrics) -> str:
    """The lock the one trainer writing the metrics file `metrics` holds: two runs given one metrics
    file are refused, as two given one folder are."""
    return f"{os.path.realpath(metrics)}.lock"


def derived_files(checkpoints, metrics=None, tensorboard=None) -> tuple[list, list]:
    """What `train` writes that no option names (aiayn.cli.paths): the run's metrics and TensorBoard
    events beside its checkpoints by default, and the locks of its folder and its metrics."""
    beside = [("--metrics", metrics, Layout.metrics_of), ("--tensorboard", tensorboard, Layout.tensorboard_of)]
    files = [(f"{option} (default)", of(checkpoints), "appended") for option, given, of in beside if not given]
    locks = [
        ("the run's lock", lock_of(checkpoints)),
        ("its metrics' lock", lock_of_metrics(metrics or Layout.metrics_of(checkpoints))),
    ]
    return [*files, *((name, path, "appended") for name, path in locks)], []


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
    (aiayn.training.progress.Board). Returns the exit code."""
    writable(out)  # before hours of training
    ckpt.not_other_work(out, "trained")
    settings = resolve.read(settings_path)
    train = binary.read(train_path)
    dev = binary.read(dev_path) if dev_path else None
    for corpus, what in ((train, "train on"), (dev, "measure the dev perplexity on")):
        if corpus is not None and corpus.header["pairs"] == 0:
            raise UserError(
                f"{corpus.path}: an encoded corpus of no sentence pairs, nothing to {what}; check the text it was "
                "encoded from (and `cleaning:`), then rerun its prepare and encode steps"
            )
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
    return run(Trainer(settings, train, dev, files, env=env, log=log), stop, max_updates=max_updates)
