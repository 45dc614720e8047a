"""TensorBoard event files of a run, for watching a run of days live as fairseq's
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
import os
import threading


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
        """A progress record of metrics.jsonl (aiayn.training.progress)."""
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
