"""Checkpoint averaging (§6.1): the element-wise mean of the last K checkpoints of a run.

The paper averages the last 5 (base) / 20 (big) checkpoints "written at 10-minute intervals":
evenly spaced. So only the checkpoints on the run's `checkpoint_interval` grid (and its final
step) are averaged, as fairseq's update-based averaging does; one written on a stop signal at
another step (a time limit, a preemption) is for resuming only. And only checkpoints of the run
itself: one of another run's identity found in the folder (another seed, another setting) is left
out, never averaged in.
"""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path

import torch

from aiayn.data import vocab
from aiayn.errors import UserError
from aiayn.io import together, writable
from aiayn.runtime import checkpoint as ckpt
from aiayn.runtime import records
from aiayn.study.layout import Layout
from aiayn.training.train import changes


def newest_on_grid(
    folder: str | Path, k: int, interval: int, final: int, *, run: dict | None = None, log=print
) -> list[Path]:
    """The k newest step checkpoints of `folder` on the grid of `interval` updates and the `final`
    step (the paper's "last k checkpoints"), oldest first; with `run` (a run identity), only those
    of that run (another run's are left out, said in the log)."""
    if k < 1:
        raise UserError(f"the number of checkpoints to average must be at least 1, got {k}")
    found = ckpt.list_checkpoints(folder)
    grid = [path for step, path in found if ckpt.on_grid(step, interval, final)]
    if run is not None:
        mine = []
        for path in grid:
            if len(mine) == k:
                break
            theirs = ckpt.read_identity(path)
            if theirs == run:
                mine.append(path)
            else:
                log(f"{path} is of another run ({'; '.join(changes(theirs or {}, run))}): not averaged")
        others, grid = len(grid) - len(mine), mine
    if len(grid) < k:
        off = sorted(step for step, _ in found if not ckpt.on_grid(step, interval, final))
        said = ", ".join(map(str, off[:5])) + (", ..." if len(off) > 5 else "")
        raise UserError(
            f"{folder}: {len(grid)} step checkpoint(s) every {interval} updates, {k} are to be averaged"
            + (
                f" (steps {said} are off that grid: written on a stop signal, or under another "
                "checkpoint_interval; if training.checkpoint_interval was changed, set it back)"
                if off
                else ""
            )
            + (f" ({others} of another run left out)" if run is not None and others else "")
            + "; keep at least that many (training.keep_checkpoints) and rerun training"
        )
    return list(reversed(grid[:k]))


def average(paths: list[Path]) -> dict:
    """Mean of the models in `paths` (in fp32), with the first one's config; records the steps averaged."""
    total: dict[str, torch.Tensor] = {}
    first, steps = None, []
    for path in paths:
        state = ckpt.load(path)
        steps.append(int(state.get("step", -1)))
        if first is None:
            first = state
            total = {k: v.detach().to(torch.float32).clone() for k, v in state["model"].items()}
            continue
        if state.get("model_config") != first.get("model_config"):
            raise UserError(f"{path} has another model than {paths[0]}; refusing to average them")
        side = vocab.differing_side(first.get("vocab"), state.get("vocab"))
        if side:
            raise UserError(f"{path} has another {side} vocabulary than {paths[0]}; refusing to average them")
        if state["model"].keys() != total.keys():
            raise UserError(f"{path} holds other weights than {paths[0]}; refusing to average them")
        for k, v in state["model"].items():
            total[k] += v.to(torch.float32)
    mean = {k: v / len(paths) for k, v in total.items()}
    return {
        "model_config": first["model_config"],
        "model": mean,
        "vocab": first.get("vocab"),
        "settings": first.get("settings"),
        "averaged_steps": steps,
        "step": steps[-1],
    }


def derived_files(checkpoints) -> tuple[list, list]:
    """What `average` writes that no option names (aiayn.cli.paths): the run's lock, held while it reads."""
    return [("the run's lock", Layout.train_lock(checkpoints), "appended")], []


def average_run(folder, out, *, k: int, interval: int, final: int, record=None, log=print) -> dict:
    """Average the k newest grid checkpoints of the run in `folder` into `out` (the run: that of its
    final model, else of its newest grid checkpoint); with `record`, also write which steps were
    averaged (JSON, what the tables read). Returns the averaged model."""
    if not Path(folder).is_dir():
        raise UserError(f"--checkpoints {folder}: not found; give the run's folder of step checkpoints")
    writable(out, *([record] if record else []))  # before reading GBs of checkpoints
    ckpt.not_other_work(out, "average")
    reference = Path(Layout.final_in(folder))
    if not reference.is_file():
        grid = [path for step, path in ckpt.list_checkpoints(folder) if ckpt.on_grid(step, interval, final)]
        reference = grid[0] if grid else None
    run = ckpt.read_identity(reference) if reference else None
    # the run's lock, as its trainer holds it: a run still training is said as such, and prunes nothing read here
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(ckpt.exclusive(folder, Layout.train_lock(folder), "trained"))
        except OSError as exc:  # beside a folder on a read-only disk (an archived run): no trainer writes there
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise
        paths = newest_on_grid(folder, k, interval, final, run=run, log=log)
        result = average(paths)
    with together():  # the model and its record, or neither
        ckpt.save(result, out)
        if record:
            records.write(
                record,
                "average",
                {"steps": result["averaged_steps"], "interval": interval, "checkpoints": [str(p) for p in paths]},
            )
    log(f"averaged steps {result['averaged_steps']} -> {out}")
    return result
