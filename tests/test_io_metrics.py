"""The one atomic writer (and its cleaning of killed writers' leftovers) and the one reader and
writer of metrics.jsonl."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiayn import io
from aiayn.errors import UserError
from aiayn.io import atomic_paths, write_json
from aiayn.runtime import metrics
from aiayn.runtime.metrics import MetricsError


def test_atomic_paths_rename_together_or_not_at_all(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "sub" / "b.txt"
    with atomic_paths(a, b) as (ta, tb):
        assert ta.parent == a.parent and tb.parent == b.parent and ta != tb
        ta.write_text("A")
        tb.write_text("B")
        assert not a.exists()
    assert a.read_text() == "A" and b.read_text() == "B"
    with pytest.raises(RuntimeError), atomic_paths(a, b) as (ta, tb):
        ta.write_text("new")
        raise RuntimeError("killed")
    assert a.read_text() == "A" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "sub"]


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    """atomic_dir (an export's folder): two writers of one folder fill folders of their own; the
    one that finishes replaces the old folder whole; one that fails leaves it as it was."""
    out = tmp_path / "hf"
    with io.atomic_dir(out) as one, io.atomic_dir(out) as two:
        assert one != two and one.parent == two.parent == tmp_path and not out.exists()
        (one / "a.txt").write_text("one")
        (two / "b.txt").write_text("two")
    assert sorted(p.name for p in out.iterdir()) == [io.OUTPUT_MARK, "a.txt"]  # the last to finish, alone
    with pytest.raises(RuntimeError), io.atomic_dir(out) as three:
        (three / "c.txt").write_text("half")
        raise RuntimeError("killed")
    assert sorted(p.name for p in out.iterdir()) == [io.OUTPUT_MARK, "a.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary folder left behind
    old = os.umask(0o022)
    try:
        with io.atomic_dir(out) as four:
            (four / "d.txt").write_text("d")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and (out / "d.txt").read_text() == "d"
    here = io._host()
    dead = leftover(tmp_path, "hf", f"{here}-{dead_pid()}", directory=True)  # a killed writer's
    with io.atomic_dir(out):
        assert not dead.exists()


def test_a_folder_someone_else_filled_is_never_replaced(tmp_path):
    """An existing folder without aiayn's mark and not empty (a user's, another tool's) is refused,
    untouched; an empty one, or one aiayn wrote, is replaced."""
    out = tmp_path / "hf"
    out.mkdir()
    (out / "mine.txt").write_text("a user's file")
    with pytest.raises(UserError, match="a folder aiayn did not write"), io.atomic_dir(out) as new:
        (new / "a.txt").write_text("a")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    (out / "mine.txt").unlink()
    with io.atomic_dir(out) as new:
        (new / "a.txt").write_text("a")
    with io.atomic_dir(out) as new:  # its own: replaced
        (new / "b.txt").write_text("b")
    assert sorted(p.name for p in out.iterdir()) == [io.OUTPUT_MARK, "b.txt"]
    (out / "sub").mkdir()
    (out / "sub" / "notes.txt").write_text("a user's notes, put in aiayn's folder since")
    with pytest.raises(UserError, match=r"holds sub/notes.txt, which aiayn did not write \(its mark does not list"):
        io.guard_outputs([("--out", str(out), "folder")], [])  # before any work
    with pytest.raises(UserError, match=r"holds sub/notes.txt"), io.atomic_dir(out):  # and when it replaces it
        pass
    assert (out / "sub" / "notes.txt").exists() and (out / "b.txt").exists()
    (out / io.OUTPUT_MARK).write_text("written whole by aiayn\n")  # an older aiayn's mark: no list of files
    os.utime(out / "b.txt", (1, 1))
    os.utime(out / io.OUTPUT_MARK, (2, 2))  # ...written after its files, before the notes were put there
    with pytest.raises(UserError, match=r"holds sub/notes.txt, which aiayn did not write \(written after its mark"):
        io.guard_outputs([("--out", str(out), "folder")], [])
    (out / "sub" / "notes.txt").unlink()
    os.utime(out / io.OUTPUT_MARK)  # its own files only, all older than the mark: replaced
    with io.atomic_dir(out) as new:
        (new / "c.txt").write_text("c")
    assert sorted(p.name for p in out.iterdir()) == [io.OUTPUT_MARK, "c.txt"]


def test_a_writers_own_error_of_the_disk_names_the_output(tmp_path):
    """A library that reports a full disk in its own exception (safetensors' Rust "os error 28", a wrapped
    "[Errno 28]") inside an atomic write is said as the file system error it is, naming the output; any other
    error of it is left as it is (a bug keeps its traceback)."""
    import errno

    class SafetensorError(Exception):
        pass

    for write in (io.atomic_dir, io.atomic_path):
        with pytest.raises(OSError) as caught, write(tmp_path / "out"):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "out")
        with pytest.raises(SafetensorError), write(tmp_path / "out"):
            raise SafetensorError("Error while serializing: a tensor that is not contiguous")
    assert sorted(tmp_path.iterdir()) == []


def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path):
    with atomic_paths(tmp_path / "x") as (one,), atomic_paths(tmp_path / "x") as (two,):
        assert one != two


def test_outputs_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "s.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "s.json").stat().st_mode) == 0o644  # mkstemp alone would give 0600


def records(path, *recs, torn=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs) + torn)
    return path


START = {
    "event": "start",
    "step": 0,
    "world_size": 1,
    "device_name": "cpu",
    "params": 10,
    "precision": "fp32",
    "wall": 0.0,
}


def progress(*, wall: float) -> dict:
    """metrics.jsonl's progress record of update 2, `wall` seconds into the run."""
    return {"step": 2, "loss": 1.0, "lr": 1e-3, "tgt_tokens_per_s": 1.0, "tgt_tokens_per_update": 5,
            "flops_per_update": 1.0, "wall": wall}  # fmt: skip


def test_a_torn_last_line_is_dropped_by_the_trainer_and_refused_by_a_report(tmp_path):
    """A last line cut short (its writer killed while writing it): the run's trainer reads on without it (and
    cuts it when it resumes); a reader of a finished run (a table, a figure, a selection) would take an earlier
    record for the last (Table 3's dev perplexity) and refuses it, naming the line."""
    path = records(
        tmp_path / "m.jsonl",
        START,
        progress(wall=3600.0),
        torn='{"step": 4, "lo',
    )
    assert [r["step"] for r in metrics.read(path, torn=True).progress] == [2]
    for read in (metrics.read, metrics.summary):
        with pytest.raises(ValueError, match=r"m.jsonl, line 3: cut short \(its writer killed while writing it"):
            read(path)
    metrics.truncate(path, 2)
    assert path.read_text().splitlines()[-1].startswith('{"step": 2')


def test_records_are_lines_of_their_own_whatever_their_strings_hold(tmp_path):
    """metrics.jsonl split on "\\n" only, as JSON Lines: U+2028, U+0085 and a form feed inside a
    record's string (JSON allows them raw) keep it one record; an editor's byte-order mark is no text."""
    start = {**START, "device_name": "gpu\u2028x\x85y\x0cz"}
    lines = [json.dumps(r, ensure_ascii=False) for r in (start, progress(wall=1.0))]
    path = tmp_path / "m.jsonl"
    path.write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    read = metrics.read(path)
    assert read.start[0]["device_name"] == start["device_name"] and len(read.progress) == 1


def test_a_torn_line_in_the_middle_names_the_line(tmp_path):
    path = records(tmp_path / "m.jsonl", START)
    path.write_text(path.read_text() + '{"st\n' + json.dumps({"step": 1, "dev_ppl": 3.0}) + "\n")
    with pytest.raises(ValueError, match="m.jsonl, line 2: not a metrics record; remove that line"):
        metrics.read(path)


@pytest.mark.parametrize("reader", [metrics.read, metrics.summary, lambda path: metrics.truncate(path, 0)])
def test_a_metrics_link_to_nothing_is_refused_not_read_as_a_run_not_started(tmp_path, reader):
    """No file is a run not started (no records); a link to nothing is a moved or lost run, which the
    tables, the selection and the trainer refuse naming it, never read as empty."""
    reader(tmp_path / "absent.jsonl")  # no file: no records, no error
    (tmp_path / "m.jsonl").symlink_to(tmp_path / "moved/m.jsonl")
    with pytest.raises(UserError, match=r"m\.jsonl: a link to .*which does not exist"):
        reader(tmp_path / "m.jsonl")


@pytest.mark.parametrize("reader", [metrics.read, metrics.summary])
def test_records_of_two_runs_or_out_of_order_are_refused_naming_the_line(tmp_path, reader):
    """A metrics file is one run's records in order, as its trainer writes it: another run's start, or
    progress not past the step before (an edited or joined file), is refused naming the line, never
    summed into the run's steps, tokens and hours."""
    step = {**progress(wall=5.0)}
    joined = records(tmp_path / "joined.jsonl", {**START, "run": {"model": "a"}}, step,
                     {**START, "run": {"model": "b"}, "wall": 9.0}, {**step, "step": 4, "wall": 10.0})  # fmt: skip
    with pytest.raises(MetricsError, match=r"joined\.jsonl, line 3: the start of another run than line 1's"):
        reader(joined)
    order = records(tmp_path / "order.jsonl", START, {**step, "step": 4}, {**step, "step": 2})
    with pytest.raises(MetricsError, match=r"order\.jsonl, line 3: progress of step 2 after step 4"):
        reader(order)
    again = {**START, "run": {"model": "a"}, "step": 2, "wall": 9.0}
    resumed = records(tmp_path / "resumed.jsonl", {**START, "run": {"model": "a"}}, step, again, {**step, "step": 4})
    assert reader(resumed)  # one run, resumed: read


def test_records_are_told_apart_in_one_place():
    assert metrics.kind(START) == "start"
    assert metrics.kind({"step": 1, "loss": 2.0}) == "progress" and metrics.kind({"dev_ppl": 3.0}) == "dev"
    with pytest.raises(ValueError):
        metrics.kind({"step": 1})


def test_the_dev_perplexity_is_the_newest_checkpoints_whatever_the_order_of_records(tmp_path):
    path = records(
        tmp_path / "m.jsonl",
        START,
        {"step": 8, "dev_nll": 1.0, "dev_ppl": 30.0},
        {"step": 4, "dev_nll": 2.0, "dev_ppl": 40.0},  # evaluated on resume, recorded after
    )
    assert metrics.summary(path)["dev_ppl"] == 30.0
    assert [r["step"] for r in metrics.read(path).dev] == [4, 8]


def leftover(folder, target, owner, age_s=0.0, directory=False):
    path = folder / f".{target}.{owner}.abc123.tmp"
    path.mkdir() if directory else path.write_bytes(b"partial")
    if age_s:
        t = time.time() - age_s
        os.utime(path, (t, t))
    return path


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_writer_removes_what_killed_writers_of_its_target_left(tmp_path):
    here = io._host()
    dead = leftover(tmp_path, "average.pt", f"{here}-{dead_pid()}")
    dead_dir = leftover(tmp_path, "train.bin", f"{here}-{dead_pid()}", directory=True)
    alive = leftover(tmp_path, "average.pt", f"{here}-{os.getppid()}")  # a running writer: kept
    remote_fresh = leftover(tmp_path, "average.pt", "othernode-123")  # may still be writing: kept
    remote_old = leftover(tmp_path, "average.pt", "othernode-124", age_s=2 * io.STALE_AFTER_S)
    other_target = leftover(tmp_path, "other.pt", f"{here}-{dead_pid()}")  # not this writer's
    write_json(tmp_path / "average.pt", {"x": 1})
    assert not dead.exists() and not remote_old.exists()
    assert alive.exists() and remote_fresh.exists() and other_target.exists() and dead_dir.exists()
    with io.scratch_dir(tmp_path / "train.bin") as scratch:
        assert scratch.name.startswith(f".train.bin.{here}-{os.getpid()}.")
    assert not dead_dir.exists() and not any(p.name.startswith(".train.bin") for p in tmp_path.iterdir())


def test_a_stop_is_recorded_and_ends_that_jobs_hours(tmp_path):
    path = records(
        tmp_path / "m.jsonl",
        START,
        progress(wall=1800.0),
        {"event": "stop", "step": 3, "reason": "stop signal (SIGTERM)", "wall": 3600.0},
        {**START, "step": 3, "wall": 10000.0},  # the requeued job, hours later
        {
            "step": 4,
            "loss": 1.0,
            "lr": 1e-3,
            "tgt_tokens_per_s": 1.0,
            "tgt_tokens_per_update": 5,
            "flops_per_update": 1.0,
            "wall": 13600.0,
        },
    )
    assert [r["step"] for r in metrics.read(path).stop] == [3]
    assert metrics.summary(path)["hours"] == pytest.approx(2.0) and metrics.summary(path)["dev_ppl"] is None


def test_a_whole_line_that_is_no_record_is_refused_even_as_the_only_or_last_line(tmp_path):
    """A torn line is one a crash cut: it has no newline. A user's file at the metrics path (a note of
    one line) is refused, not read as a torn run and then overwritten by the training."""
    for text in ("my notes, one line\n", json.dumps({**START}) + "\nmy notes\n"):
        path = tmp_path / "notes.md"
        path.write_text(text)
        with pytest.raises(MetricsError, match=r"notes.md, line \d: not a metrics record; remove that line"):
            metrics.read(path)
    path.write_text(json.dumps({**START}) + '\n{"step": 4, "lo')  # torn: no newline
    assert len(metrics.read(path, torn=True).start) == 1


def test_a_clock_set_back_during_a_job_moves_no_hours(tmp_path):
    """Each job's hours are its own monotonic seconds (job_s) where its records have them: the wall
    clock set back an hour (NTP, a VM restored) counts nothing negative."""
    path = records(
        tmp_path / "m.jsonl",
        {**START, "wall": 10000.0},
        {**progress(wall=6400.0), "job_s": 1800.0},  # the clock set back an hour, 30 minutes in
        {"event": "stop", "step": 3, "reason": "stop signal (SIGTERM)", "wall": 8200.0, "job_s": 3600.0},
        {**START, "step": 3, "wall": 20000.0},  # the requeued job, its records as before: the wall clock
        {**progress(wall=23600.0), "step": 4},
    )
    assert metrics.summary(path)["hours"] == pytest.approx(2.0)


def test_outputs_written_together_are_in_place_all_or_none(tmp_path):
    from aiayn.io import atomic_path, atomic_write_text, together

    (tmp_path / "b.txt").write_text("before")
    with pytest.raises(RuntimeError), together():
        atomic_write_text(tmp_path / "a.txt", "a")
        with together():  # nested: one block
            atomic_write_text(tmp_path / "b.txt", "b")
        assert not (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").read_text() == "before"
        raise RuntimeError("the last output failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"] and (tmp_path / "b.txt").read_text() == "before"
    with together():
        atomic_write_text(tmp_path / "a.txt", "a")
        with atomic_path(tmp_path / "b.txt") as tmp:
            tmp.write_text("b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]
    assert (tmp_path / "a.txt").read_text() == "a" and (tmp_path / "b.txt").read_text() == "b"


@pytest.mark.parametrize("order", ["device last", "device first"])
@pytest.mark.parametrize("how", ["one atomic_paths", "together"])
def test_an_output_that_fails_as_it_lands_leaves_none_of_the_others(tmp_path, how, order):
    """A device that refuses its bytes (/dev/full) as the outputs land: no file written beside it is
    put in place, whichever comes first (`average --record /dev/full` left its model in place)."""
    from aiayn.io import atomic_write_text, together

    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    targets = [*files, Path("/dev/full")] if order == "device last" else [Path("/dev/full"), *files]
    with pytest.raises(OSError) as failed:
        if how == "together":
            with together():
                for target in targets:
                    atomic_write_text(target, "x")
        else:
            with atomic_paths(*targets) as temps:
                for tmp in temps:
                    tmp.write_text("x")
    assert failed.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []


def test_no_output_is_a_new_file_among_the_systems_devices_and_only_there():
    """A path derived from a device's (/dev/null.nbest, /proc/self/fd/1.csv) is refused; a folder whose
    name merely starts like one (/processing, /system) is a folder like any other."""
    for path in ("/dev/null.nbest", "/proc/self/fd/1.csv", "/sys/x.html"):
        with pytest.raises(UserError, match="where the system keeps devices"):
            io.guard_outputs([("--out", path, "file")], [])
    for path in ("/processing/run/x.txt", "/system/x.txt", "/devices/x.txt"):
        io.guard_outputs([("--out", path, "file")], [])
