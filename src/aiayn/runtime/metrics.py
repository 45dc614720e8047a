"""`metrics.jsonl`, a run's record of itself: the one writer and the one reader.

One JSON object per line, of six kinds (`kind`): a job's start, a progress record every
`log_interval` updates, a dev record at every checkpoint, a stop (a signal, a coming time limit: the
job's log may not survive a requeue, this record does), and once each a diverging and a stalling
run (aiayn.training.progress). Their fields are their schemas' (`aiayn.runtime.records.SCHEMAS`,
"metrics <kind>"), each checked when read.

The trainer appends; `tables` and `figures` read through `read` / `summary`. Pure Python: the
tables' environment has no torch.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import appendable, atomic_write_text, parse_json, readable
from aiayn.runtime import records


class MetricsError(UserError, ValueError):
    """A metrics file that cannot be read; the message names the file and line."""


def kind(record: dict) -> str:
    """ "start", "stop", "diverging", "stalling", "progress" or "dev"."""
    if not isinstance(record, dict):
        raise ValueError(f"not a metrics record: {record!r}")
    if record.get("event") in ("start", "stop", "diverging", "stalling"):
        return record["event"]
    if "loss" in record:
        return "progress"
    if "dev_ppl" in record:
        return "dev"
    raise ValueError(f"not a metrics record: {record}")


def append(path: str | os.PathLike, record: dict) -> None:
    """Add one record as one line, written by a single `write` to a file opened for appending, so a
    crash leaves at worst a torn last line (cut when the run starts again: `truncate`, which every
    start and resume of aiayn.training.train.restore calls before its first append)."""
    kind(record)
    appendable(path)
    line = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        written = os.write(fd, line)
        if written != len(line):  # a short write: the disk filled up under it
            raise OSError(errno.ENOSPC, f"wrote {written} of {len(line)} bytes", str(path))
    except OSError as exc:  # a full disk: name the file (a write to a descriptor names none)
        exc.filename = exc.filename or str(path)
        raise
    finally:
        os.close(fd)


def _records(path: Path, torn: bool = False) -> list[dict]:
    """The records of a metrics file, each checked against the schema of its kind (aiayn.runtime.records);
    none when there is no file yet (a run not started). A last line cut short (its writer killed while
    writing it) is left out where `torn` (the run's own trainer, which cuts it), else refused: a reader of a
    finished run would take an earlier record for the last. The file is one run's, in order, as its trainer
    writes it (a start refuses another run's file, a resume cuts what is past its step): another run's
    start or a progress record not past the one before is refused, never summed into this run's figures."""
    if not path.exists() and not path.is_symlink():
        return []
    readable(path, "a metrics file")
    try:  # (an editor's byte-order mark is not text)
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise MetricsError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); remove the damaged lines"
        ) from None
    lines = text.split("\n")  # on "\n" only: U+2028 and U+0085 may stand inside a record's string
    out, lines, first, step = [], lines[:-1] if lines[-1] == "" else lines, None, 0
    for i, line in enumerate(lines):
        try:
            rec = parse_json(line, finite=False)  # a diverged run's loss is NaN, and says so
            kind(rec)
        except ValueError:
            if i == len(lines) - 1 and not text.endswith("\n"):  # a torn last line: a crash while it was written
                if torn:  # (a whole line ends with its newline: one that does is someone's text, never torn)
                    break
                raise MetricsError(f"{path}, line {i + 1}: cut short (its writer killed while writing it?); remove "
                                   "that line, or resume the run, which cuts it") from None  # fmt: skip
            raise MetricsError(f"{path}, line {i + 1}: not a metrics record; remove that line") from None
        where = f"{path}, line {i + 1}"
        records.check(rec, f"metrics {kind(rec)}", where)
        if kind(rec) == "start" and rec.get("run") is not None:
            first = first or (i + 1, rec["run"])
            if rec["run"] != first[1]:
                raise MetricsError(f"{where}: the start of another run than line {first[0]}'s: a metrics file holds "
                                   "one run's records; move each run's lines to a file of its own")  # fmt: skip
        if kind(rec) == "progress":
            if rec["step"] <= step:
                raise MetricsError(f"{where}: progress of step {rec['step']} after step {step}: a run's records "
                                   "go forward (an edited or joined file?); remove the lines out of order")  # fmt: skip
            step = rec["step"]
        out.append(rec)
    return out


@dataclass
class Records:
    """The records of one metrics.jsonl by kind, each progress record with `hours` since the first start."""

    start: list[dict] = field(default_factory=list)
    stop: list[dict] = field(default_factory=list)
    diverging: list[dict] = field(default_factory=list)
    stalling: list[dict] = field(default_factory=list)
    progress: list[dict] = field(default_factory=list)
    dev: list[dict] = field(default_factory=list)


def read(path: str | os.PathLike, *, torn: bool = False) -> Records:
    out = Records()
    first_wall = None
    for rec in _records(Path(path), torn):
        k = kind(rec)
        if k == "start" and first_wall is None:
            first_wall = rec["wall"]
        if k == "progress":
            rec = {**rec, "hours": (rec["wall"] - first_wall) / 3600 if first_wall is not None else 0.0}
        getattr(out, k).append(rec)
    out.dev.sort(key=lambda r: r["step"])  # a checkpoint evaluated on resume is recorded after later ones
    return out


def summary(path: str | os.PathLike) -> dict:
    """Training facts of a run: step reached, hours trained (summed over its jobs, idle time between
    jobs excluded; a job's own monotonic seconds where its records have them, so that a clock set back
    moves none), GPUs, device, precision, parameters, target tokens seen, training FLOPs (counted
    from the batches, `aiayn.runtime.hardware.training_flops`; None before the first progress
    record), the dev perplexity of the newest evaluated checkpoint, and the steps a diverging and a
    stalling run were said at (None: they were not)."""
    out = {"step": 0, "hours": 0.0, "tgt_tokens": 0.0, "flops": 0.0}
    out |= dict.fromkeys(("gpus", "device", "precision", "params", "dev_ppl", "diverging", "stalling"))
    start = last_wall = job_s = None  # a job's seconds: its own monotonic count where its records have it
    prev_step = dev_step = 0
    for rec in _records(Path(path)):
        k = kind(rec)
        if k in ("progress", "stop"):
            job_s = rec.get("job_s", job_s)
        if k == "start":
            if start is not None:
                out["hours"] += (job_s if job_s is not None else last_wall - start) / 3600
            start, last_wall, prev_step, job_s = rec["wall"], rec["wall"], rec["step"], None
            out.update(
                gpus=rec["world_size"],
                device=rec["device_name"],
                params=rec["params"],
                precision=rec["precision"],
            )
        elif k == "progress":
            out["tgt_tokens"] += rec["tgt_tokens_per_update"] * (rec["step"] - prev_step)
            out["flops"] += rec["flops_per_update"] * (rec["step"] - prev_step)
            prev_step, last_wall = rec["step"], rec["wall"]
            out["step"] = rec["step"]
        elif k == "stop":
            last_wall = rec["wall"]
        elif k in ("diverging", "stalling"):
            out[k] = rec["step"]
        elif rec["step"] >= dev_step:
            out["dev_ppl"], dev_step = rec["dev_ppl"], rec["step"]
    if start is not None:
        out["hours"] += (job_s if job_s is not None else last_wall - start) / 3600
    if not out["step"]:
        out["flops"] = None
    return out


def truncate(path: str | os.PathLike, step: int) -> None:
    """Drop records past `step` (left by a job that died after its last checkpoint)."""
    path = Path(path)
    keep = [r for r in _records(path, torn=True) if r.get("step", 0) <= step]  # (a link to nothing: refused)
    if path.exists():
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in keep))
