"""TensorBoard event files of a run, for watching a run of days live as fairseq's
`--tensorboard-logdir` and tensor2tensor's summaries are watched: training loss, learning rate,
gradient norm, throughput and MFU at every logged update, dev loss and perplexity at every
checkpoint.

Optional: written only where the `tensorboard` package is installed (`pip install
"aiayn[tensorboard]"`); without it the run says so once and writes none (metrics.jsonl has every
figure either way). Only the main process writes. A resumed run purges the events past the step it
resumes from, so that a run killed after its last checkpoint shows no curve twice.
"""

from __future__ import annotations

import os

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
        self.writer = SummaryWriter(str(folder), purge_step=step + 1 if step else None)
        log(f"TensorBoard: events in {folder} (tensorboard --logdir {folder})")

    def _write(self, names: dict, record: dict, step: int) -> None:
        if self.writer is None:
            return
        for key, tag in names.items():
            value = record.get(key)
            if value is not None:
                self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def progress(self, record: dict) -> None:
        """A progress record of metrics.jsonl (aiayn.training.progress)."""
        self._write(TRAIN, record, record["step"])

    def dev(self, step: int, record: dict) -> None:
        """A checkpoint's dev figures."""
        self._write(DEV, record, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
