"""The resume policy: whether a checkpoint continues this run, and what becomes of one that does not.

A run is what its settings say. Each checkpoint carries its run's identity (`identity`): the
model, the vocabulary settings and sentencepiece models, the encoded training data (its SHA-256)
and every training setting but the OPERATIONAL ones, which do not change the weights. A newest
checkpoint whose identity differs from the job's, or that is past a lowered `steps`, is of another
run (`reasons`): its checkpoints and metrics are moved aside, never deleted (`set_aside`), and
training starts afresh, with one line naming each change. Raising `steps` continues the run. A
resumed run evaluates the kept checkpoints whose dev pass a kill cut off (`evaluate_missing`).
`restore` does all of it to a trainer (aiayn.training.train.Trainer) before its first update.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import parse_json, remove_leftovers
from aiayn.runtime import checkpoint, metrics
from aiayn.runtime.checkpoint import on_grid
from aiayn.study.layout import Layout
from aiayn.training.distributed import barrier
from aiayn.training.watch import Watch

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
    kept = [step for step, _ in checkpoint.list_checkpoints(files.checkpoints)]
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


# -- resuming a trainer (aiayn.training.train.Trainer) -----------------------------------------------
def restore(trainer) -> None:
    """Resume or start, the one place it is decided and done: resume `trainer` from the newest
    readable checkpoint of its folder when it is of the same run (`reasons`); set the folder aside
    and start from step 0 when it is of another; start from step 0 when there is none, unless the
    run's finished work is there (`finished_work`: refused). A killed writer's temporary files go first."""
    files, env = trainer.files, trainer.env
    files.checkpoints.mkdir(parents=True, exist_ok=True)
    if env.main:  # this job owns the folder (it holds its lock): a temporary file in it is a killed write's
        remove_leftovers(files.checkpoints, every=True, log=trainer.log)
    barrier(env)
    state = checkpoint.newest_readable(files.checkpoints, trainer.log)
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


def evaluate_missing(trainer, weights: dict) -> None:
    """Evaluate the kept checkpoints (on the grid, up to the resumed step) that have no dev record:
    a job killed between a checkpoint and its dev pass. The resumed weights are restored after."""
    if trainer.dev_data is None:
        return
    evaluated = {r["step"] for r in metrics.read(trainer.files.metrics, torn=True).dev}
    folder = trainer.files.checkpoints
    # a step's weights alone where kept, else its resume checkpoint (a run that keeps none for averaging)
    found = {**dict(checkpoint.list_resumable(folder)), **dict(checkpoint.list_checkpoints(folder))}
    interval, final = trainer.tr["checkpoint_interval"], trainer.tr["steps"]
    missing = [
        (s, p) for s, p in found.items() if s <= trainer.step and s not in evaluated and on_grid(s, interval, final)
    ]
    loaded = False
    for step, path in sorted(missing):  # oldest first
        if step != trainer.step:
            try:
                trainer.model.load_state_dict(checkpoint.load(path)["model"])
            except checkpoint.CheckpointError as exc:
                trainer.log(f"warning: {exc.said}; its dev record stays missing")
                continue
            loaded = True
        elif loaded:
            trainer.model.load_state_dict(weights)
            loaded = False
        trainer.log_dev(step, trainer.evaluate(), note=" (evaluated on resume)")
    if loaded:
        trainer.model.load_state_dict(weights)
