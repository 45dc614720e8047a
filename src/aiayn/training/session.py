"""One run of the trainer around its update loop (`aiayn.training.train.run`): what happens between
updates, and the exit code it ends with.

Before the first update: the run's folder cleared of a killed writer's temporary files, the run
resumed (`aiayn.training.resume.restore`), its start record written (metrics.jsonl, the log, TensorBoard). After
each update: the first diverging loss told once (`aiayn.training.watch`), a non-finite loss stops
the run, every `log_interval` updates a progress record (`aiayn.training.progress`), every
`checkpoint_interval` updates a checkpoint and a dev pass, a run stalled at the word frequencies'
loss told once after either (`aiayn.training.watch.Stall`, made at the start from metrics.jsonl),
and a stop signal or a coming time limit (`aiayn.training.distributed`) ends the run with a
checkpoint, requeued under Slurm. At the last update the final model is copied to its name. Every
rank runs it; rank 0 writes.
"""

from __future__ import annotations

import time

import torch

from aiayn.io import remove_leftovers
from aiayn.runtime import metrics
from aiayn.training import resume
from aiayn.training.board import Board
from aiayn.training.distributed import StopFlag, hosts, requeue, stop_requested
from aiayn.training.progress import Progress, format_progress, format_start, start_record
from aiayn.training.watch import Stall, warning

EXIT_DONE = 0
EXIT_NONFINITE = 3
EXIT_PEER_LOST = 4  # another process of the job was lost (killed, crashed, its node gone): run again
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: a checkpoint is written, run the job again to resume


def checkpoint_and_evaluate(trainer) -> None:
    trainer.save()
    if trainer.env.main:
        trainer.log_dev(trainer.step, trainer.evaluate())
    if trainer.env.world_size > 1:
        torch.distributed.barrier()


class Session:
    """The wiring of one run of `trainer` (an aiayn.training.train.Trainer) that `stop` can stop."""

    def __init__(self, trainer, stop):
        self.trainer, self.stop, self.env = trainer, stop, trainer.env
        self.total, self.files = trainer.tr["steps"], trainer.files
        self.where = hosts(self.env)
        self.progress = None

    def start(self) -> None:
        """Resume, then say where and how the run trains."""
        trainer, env, files = self.trainer, self.env, self.files
        files.checkpoints.mkdir(parents=True, exist_ok=True)
        if env.main:  # this job owns the folder: a temporary file in it is a killed write's
            remove_leftovers(files.checkpoints, every=True, log=trainer.log)
        if env.world_size > 1:
            torch.distributed.barrier()
        resume.restore(trainer)
        if env.main:
            rec = start_record(
                env=env,
                hosts=self.where,
                step=trainer.step,
                accumulation=trainer.accumulation,
                budget=trainer.batcher.budget,
                params=trainer.params,
                precision=trainer.precision,
            )
            metrics.append(files.metrics, rec)
            trainer.log(format_start(rec, name=trainer.settings["name"], total=self.total))
            trainer.board = Board(files.tensorboard, step=trainer.step, log=trainer.log)
            trainer.stall = Stall.for_run(trainer, metrics.read(files.metrics))
        self.progress = Progress(env=env, precision=trainer.precision, step=trainer.step, total=self.total)
        trainer.model.train()

    def after(self, update: tuple) -> int | None:
        """What follows an update (`Trainer.update`'s result): the exit code to end the run with, or None."""
        trainer, env, files = self.trainer, self.env, self.files
        self.progress.add(*update)
        step = trainer.step
        at_log = step % trainer.tr["log_interval"] == 0 or step == self.total
        at_checkpoint = step % trainer.tr["checkpoint_interval"] == 0 or step == self.total
        if at_log or at_checkpoint:
            news = trainer.watch.news()  # the first diverging update, told once
            if news is not None and env.main:
                metrics.append(files.metrics, {**news, "wall": time.time()})
                trainer.log(warning(news))
            if trainer.first_nonfinite() is not None:
                trainer.log(
                    f"error: the loss is not finite at step {trainer.first_nonfinite()}; stopping, no checkpoint "
                    "written (lower training.lr_scale or turn on training.clip_norm)"
                )
                return EXIT_NONFINITE
        if at_log:
            rec = self.progress.record(step, trainer.scheduler.get_last_lr()[0])
            if env.main:
                metrics.append(files.metrics, rec)
                trainer.board.progress(rec)
                trainer.log(format_progress(rec, self.total))
                trainer.said(trainer.stall.progress(rec))
        if at_checkpoint:
            checkpoint_and_evaluate(trainer)
        if stop_requested(self.stop, env, step):
            return self.stopped(at_checkpoint)
        return None

    def stopped(self, checkpointed: bool) -> int:
        """A stop signal or a coming time limit: a checkpoint, the job requeued, EXIT_PREEMPTED."""
        trainer, env, step = self.trainer, self.env, self.trainer.step
        if not checkpointed:
            trainer.save(grid=False)  # off the checkpoint grid: for resuming only
        if env.world_size > 1:
            torch.distributed.barrier()  # the checkpoint is on disk before the job is requeued
            # each process says where it stopped: the same step on every node
            print(f"rank {env.rank} on {self.where[env.rank]}: stops at step {step}", flush=True)
        why = self.stop.reason() if isinstance(self.stop, StopFlag) else "stop signal"
        if env.main:
            metrics.append(self.files.metrics, {"event": "stop", "step": step, "reason": why, "wall": time.time()})
        again = requeue(env, trainer.log)
        trainer.log(f"{why}: checkpoint of step {step} written; {again} (exit {EXIT_PREEMPTED})")
        return EXIT_PREEMPTED

    def finish(self) -> int:
        """After the last update of this job: the final model under its name once the run is done."""
        trainer = self.trainer
        if trainer.step >= self.total and self.env.main:
            trainer.save_final()
            trainer.log(f"done: {self.files.out}")
        return EXIT_DONE
