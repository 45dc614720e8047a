"""Every fault of the machine, met by every command that writes: one line, no traceback, nothing
under the final name, and the command run again afterwards gives what it gives without the fault.

The faults: outputs in a read-only folder, an output that is a folder, a full disk (a small tmpfs,
filled), and Ctrl-C during the final write. The commands: every command of `aiayn.cli.COMMANDS`
that writes a file, each run in-process (`cli.main`) with arguments that work (`WORKING`)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import toy
from conftest import ROOT
from working import NO_OUTPUT, SAME_BYTES, WORKING, argv, options_given, outputs, prepare_world, sha
from world import build_world

from aiayn import cli, errors
from aiayn.errors import EXIT_INTERRUPTED, EXIT_USER, Stopped, explain


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    return prepare_world(build_world(tmp_path_factory.mktemp("world")))


def test_every_command_that_writes_is_here():
    assert set(WORKING) | NO_OUTPUT == set(cli.COMMANDS)


def snapshot(paths: list[Path]) -> dict:
    return {p.name: p.read_bytes() for p in paths}


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@contextlib.contextmanager
def tmpfs(path: Path, *, full: bool = False, read_only: bool = False):
    """A small tmpfs at `path` (root only), filled to the last byte or read-only."""
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)]).returncode:
        pytest.skip("this machine refuses to mount a tmpfs")
    try:
        if full:
            fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 4096)
            os.close(fd)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def reference(command: str, world: Path, folder: Path) -> dict:
    assert cli.main(argv(command, world, folder)) == 0
    return snapshot(outputs(command, world, folder))


@pytest.mark.parametrize("fault", ["read-only folder", "full disk", "output is a folder", "ctrl-c"])
@pytest.mark.parametrize("command", sorted(WORKING))
def test_a_fault_gets_one_line_and_the_rerun_is_whole(command, fault, world, tmp_path, capsys, monkeypatch):
    clean = tmp_path / "clean"
    want = reference(command, world, clean)
    shutil.rmtree(clean)
    capsys.readouterr()
    where = tmp_path / "faulty"
    with contextlib.ExitStack() as stack:
        if fault == "read-only folder":
            stack.enter_context(tmpfs(where, read_only=True))
        elif fault == "full disk":
            stack.enter_context(tmpfs(where, full=True))
        elif fault == "output is a folder":
            where = clean
            for path in outputs(command, world, where, marked=True)[:1]:
                path.mkdir(parents=True)
        else:
            where = clean

            def interrupted(*args, **kwargs):
                raise KeyboardInterrupt

            monkeypatch.setattr(os, "replace", interrupted)
            monkeypatch.setattr(os, "rename", interrupted)
        code = cli.main(argv(command, world, where))
        monkeypatch.undo()
        line = one_line(capsys)
        assert code == (EXIT_INTERRUPTED if fault == "ctrl-c" else EXIT_USER), line
        said = {
            "read-only folder": ["read-only file system"],
            "full disk": ["no space left"],
            "output is a folder": ["is a folder"],
            "ctrl-c": ["interrupted (Ctrl-C)"],
        }[fault]
        assert any(s in line for s in said), line
        if fault != "ctrl-c":
            assert str(where) in line, f"the line names no path under {where}: {line}"
        left = [p for p in outputs(command, world, where) if p.is_file()]
        assert left == [], f"left under the final name: {left}"
    # the command run again, without the fault, gives what it gives
    if where != clean:
        shutil.rmtree(clean, ignore_errors=True)
    for path in outputs(command, world, clean):
        if path.is_dir():
            path.rmdir()
    assert cli.main(argv(command, world, clean)) == 0, capsys.readouterr().err
    got = snapshot(outputs(command, world, clean))
    assert got.keys() == want.keys()
    if command in SAME_BYTES:
        assert got == want


def test_ctrl_c_stops_a_training_with_a_checkpoint(tmp_path):
    """Ctrl-C (SIGINT) stops `train` as SIGTERM does: the update finishes, a checkpoint is written,
    exit 75; the rerun resumes from it."""
    settings = toy.settings(steps=4000, checkpoint_interval=1000, log_interval=1)
    args = toy.train_command(tmp_path, settings)
    proc = subprocess.Popen([sys.executable, *args], env=toy.env_for_subprocess(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.time() + 120
    metrics = tmp_path / "metrics.jsonl"
    while time.time() < deadline and not (metrics.exists() and metrics.read_text().count('"loss"') >= 3):
        time.sleep(0.2)
    proc.send_signal(2)  # SIGINT
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, out + err
    assert "stop signal (SIGINT)" in out and "Traceback" not in err
    assert list((tmp_path / "checkpoints").glob("resume_*.pt"))


def test_a_full_disk_is_not_reported_as_a_damaged_archive(world, tmp_path, capsys):
    """prepare extracting onto a full disk said 'not a readable archive ... delete it and download
    again' about a good archive (at EN-FR scale the user deletes gigabytes)."""
    with tmpfs(tmp_path / "full", full=True) as full:
        code = cli.main(argv("prepare", world, full))
    line = one_line(capsys)
    assert code == EXIT_USER and "no space left" in line and "readable archive" not in line, line


# every output of a command that writes more than one file, each in turn the one on a full disk
ONE_OF_SEVERAL = [(c, o) for c in sorted(WORKING) for o in WORKING[c][1] if len(WORKING[c][1]) > 1 and "/" not in o]


@pytest.mark.parametrize("command, option", ONE_OF_SEVERAL)
def test_a_full_disk_names_the_file_that_could_not_be_written(command, option, world, tmp_path, capsys):
    """Only `option`'s file goes to a full disk, the command's other outputs to a disk with room:
    the line names that file, not the command's first output nor a temporary file, and nothing is
    left under any final name."""
    args = argv(command, world, tmp_path / "room")
    where = args.index(option) + 1
    with tmpfs(tmp_path / "full", full=True) as full:
        args[where] = str(full / Path(args[where]).name)
        code = cli.main(args)
        if code == 0:  # a file of no bytes (an empty table) takes no space, even on a full disk
            assert Path(args[where]).stat().st_size == 0
            return
        line = one_line(capsys)
        assert code == EXIT_USER and "no space left" in line, line
        assert line.startswith(args[where] + ": ") or f" {args[where]}" in line, line
        others = [args[args.index(o) + 1] for o in WORKING[command][1] if o != option]
        assert not any(other in line for other in others), line
        assert ".tmp" not in line, line
        assert not [p for p in (tmp_path / "room").rglob("*") if p.is_file()], "an output left as final"
        assert not Path(args[where]).exists()


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_download_never_writes_past_the_configured_size(world, tmp_path, capsys, scheme):
    """A server (or mirror) that sends more than config.yaml's size is cut off as it sends, not after
    the disk has taken it all (at WMT sizes, GBs)."""
    from wmt_fixtures import Server

    from aiayn.data.download import fetch

    size = (world / "a.txt").stat().st_size
    with Server(world) as server:
        url = f"{server.url}a.txt" if scheme == "http" else f"file://{world}/a.txt"
        args = ["download", "--url", url, "--sha256", sha(world / "a.txt"), "--size", str(size - 10),
                "--out", str(tmp_path / "d"), "--retries", "0"]  # fmt: skip
        assert cli.main(args) == EXIT_USER
        assert "config.yaml expects" in one_line(capsys)
        assert list(tmp_path.iterdir()) == []  # nothing kept, not even the .part
        if scheme == "http":  # the transfer itself stops at the size
            part = tmp_path / "part"
            seen = []
            with pytest.raises(Exception, match="sends more than"):
                fetch(url, part, 10, size=size - 10, on_block=lambda: seen.append(part.stat().st_size))
            assert max(seen, default=0) <= size - 10 and not part.exists()


def test_the_boundary_names_each_error_of_the_file_system():
    from aiayn.errors import ADVICE, explain

    for number in ADVICE:
        line, code = explain(OSError(number, os.strerror(number), "/some/file"), [])
        assert code == EXIT_USER and line.startswith("/some/file: ") and ADVICE[number] in line
    line, _ = explain(OSError(errno.ENOSPC, "No space left on device"), ["in.txt"])
    assert "no space left" in line
    assert explain(MemoryError(), ["big.txt"])[0].startswith("out of memory reading big.txt")
    cpu = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB"
    )
    assert explain(cpu, ["m.pt", "in.txt"])[0].startswith("out of memory reading m.pt, in.txt")
    assert "nested too deeply" in explain(RecursionError(), ["deep.trees"])[0]
    assert explain(KeyboardInterrupt(), [])[1] == EXIT_INTERRUPTED
    assert explain(ZeroDivisionError(), []) is None  # a bug of ours keeps its traceback


# -- the fault matrix of the inventory: outputs and inputs that are not regular files, stop signals ----
OUTPUT_KINDS = ["a FIFO", "a link to nothing", "a link that loops", "a link to /dev/null"]


def make(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a link to nothing":
        path.symlink_to(path.parent / "nothing-here")
    elif kind == "a link that loops":
        path.symlink_to(path.name)
    elif kind == "a link to /dev/null":
        path.symlink_to("/dev/null")
    elif kind == "a folder":
        path.mkdir()
    elif kind == "a device":
        path.symlink_to("/dev/zero")
    elif kind == "empty":
        path.write_bytes(b"")


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("command", sorted(WORKING))
def test_an_output_that_is_not_a_file_is_refused_in_one_line_or_written_through(command, kind, world, tmp_path, capsys):
    """Every command's first output made a FIFO, a broken or looping link: one line naming it, exit 2,
    nothing left under the other outputs' names. A link to a character device (/dev/null) is written
    through: the device stays a device (renamed over, `/dev/null` would have become a file)."""
    target = outputs(command, world, tmp_path, marked=True)[0]
    make(target, kind)
    code = cli.main(argv(command, world, tmp_path))
    if kind == "a link to /dev/null":  # written through (a command that reads back what it wrote says it cannot)
        assert code == 0 or (code == EXIT_USER and "is a character device" in one_line(capsys))
        assert target.is_symlink() and os.readlink(target) == "/dev/null" and Path("/dev/null").is_char_device()
        return
    line = one_line(capsys)
    assert code == EXIT_USER and str(target) in line, line
    assert {"a FIFO": "is a FIFO", "a link to nothing": "which does not exist", "a link that loops": "loops"}[
        kind
    ] in line
    assert [p for p in outputs(command, world, tmp_path)[1:] if p.is_file()] == []


def input_options(command: str) -> list[str]:
    """The options of `command` naming a file it reads (the inventory's), as WORKING gives them."""
    given = options_given(command)
    return [o for o in cli.inputs_of(command) if o in given]


INPUT_CASES = [(c, o) for c in sorted(WORKING) for o in input_options(c)]


@pytest.mark.parametrize("kind", ["a folder", "a FIFO", "a device", "empty"])
@pytest.mark.parametrize("command, option", INPUT_CASES, ids=[f"{c} {o}" for c, o in INPUT_CASES])
def test_an_input_that_is_not_a_readable_file_is_named_in_one_line(command, option, kind, world, tmp_path, capsys):
    """Every file a command reads given as a folder, a FIFO (which a plain open would wait on
    forever), a device or an empty file: one line naming it and why, exit 2, nothing under an
    output's name; an empty file may also be one the command can take (an empty metrics file)."""
    args = argv(command, world, tmp_path)
    given = tmp_path / "given" / f"input{Path(args[args.index(option) + 1]).suffix}"
    make(given, kind)
    args[args.index(option) + 1] = str(given)
    code = cli.main(args)
    if kind == "empty" and code == 0:
        return
    line = one_line(capsys)
    assert code == EXIT_USER and str(given) in line, line
    if kind != "empty":
        assert {"a folder": "is a folder", "a FIFO": "is a FIFO", "a device": "is a character device"}[kind] in line
    assert [p for p in outputs(command, world, tmp_path) if p.is_file()] == []


# the kinds of file that carry their own check (CRC-32 of each record, SHA-256, gzip's CRC)
SELF_CHECKED = (".pt", ".bin", ".model", ".tgz", ".gz")


def checked_inputs(command: str, w: Path, o: Path) -> list[tuple[str, Path]]:
    """(how it is given, path) of each file `command` reads that carries its own check: every path
    the guard sees (`aiayn.cli.paths`: options and the files named inside JSON options)."""
    _, inputs = cli.paths(command, cli.build_parser(command).parse_args(argv(command, w, o)))
    return [(name, Path(p)) for name, p, kind in inputs if kind == "file" and Path(p).name.endswith(SELF_CHECKED)]


@pytest.mark.parametrize("command", sorted(WORKING))
def test_a_damaged_input_is_refused_even_where_it_is_only_copied(command, world, tmp_path, capsys):
    """Each file a command is given that carries its own check, an option's or one named inside a
    JSON option (select's candidate model, which it copies without loading), cut to half its
    length: one line naming it, exit 2, nothing under an output's name."""
    for i, (given, _) in enumerate(checked_inputs(command, world, tmp_path / "o")):
        w = shutil.copytree(world, tmp_path / f"w{i}", symlinks=True)
        path = dict(checked_inputs(command, w, tmp_path / "o"))[given]
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        code = cli.main(argv(command, w, tmp_path / "o"))
        line = one_line(capsys)
        assert code == EXIT_USER and str(path) in line, (given, line)
        assert [p for p in outputs(command, w, tmp_path / "o") if p.is_file()] == [], given


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("command", sorted(set(WORKING) - {"train"}))
def test_a_stop_signal_mid_write_is_one_line_and_leaves_nothing(command, signum, world, tmp_path, capsys, monkeypatch):
    """SIGTERM or SIGHUP arriving while a command writes its outputs (raised where it is, as the
    handler of `aiayn.cli.main` does): one line, exit 128 + the signal, nothing under a final name."""

    def stopped(*args, **kwargs):
        raise Stopped(signum)

    monkeypatch.setattr(os, "replace", stopped)
    monkeypatch.setattr(os, "rename", stopped)
    code = cli.main(argv(command, world, tmp_path))
    monkeypatch.undo()
    line = one_line(capsys)
    assert code == 128 + signum and f"stopped by {signal.Signals(signum).name}" in line, line
    assert [p for p in outputs(command, world, tmp_path) if p.is_file()] == []


def test_a_stop_signal_ends_a_running_command_in_one_line(world, tmp_path):
    """A real SIGTERM to a command working (Table 1 measured at larger sizes): one line on stderr,
    exit 143, no traceback, nothing under its outputs' names."""
    settings = '{"d_model": 256, "n": [64, 512, 2048, 4096], "d": [128, 256], "repeats": 3}'
    args = ["table1", "--settings", settings, "--out-md", str(tmp_path / "t.md"), "--out-csv", str(tmp_path / "t.csv"),
            "--out-html", str(tmp_path / "t.html"), "--figure", str(tmp_path / "t.png")]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "aiayn", *args], env=toy.env_for_subprocess(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(3)
    assert proc.poll() is None, "Table 1 finished before it could be stopped: measure larger sizes"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.strip().splitlines() == [
        "aiayn table1: error: stopped by SIGTERM; no output was left under its final name: run the command again"
    ], err
    assert not any((tmp_path / name).exists() for name in ("t.md", "t.csv", "t.html", "t.png"))


@pytest.fixture(autouse=True)
def no_stop_left():
    """A stop noted in one test (this process's stop state, aiayn.errors) is not the next test's."""
    yield
    errors.take_stop()


def swallowed_stop(signum=signal.SIGTERM) -> None:
    """The stop handler run, and its exception lost on its way, as where C code runs Python and
    clears the error (torch's C module initialised in `import torch`: torch 2.4's SIGTERM'd
    `table1` ran to its end; a C-API attribute lookup reaching a Python __getattr__)."""
    try:
        errors.stop_signal(signum, None)
    except Stopped:
        pass


def test_a_stop_whose_exception_is_swallowed_still_stops_the_command(tmp_path, monkeypatch, capsys):
    """A stop whose exception is lost is raised again where the command goes on working: it ends as
    stopped (one line, 143) within moments, its work not done, no output put in place."""
    from aiayn.report import table1

    measure, worked = table1.measure, []

    def measured_through_a_stop(**kwargs):
        swallowed_stop()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # work that goes on after the stop (here: waiting)
            time.sleep(0.01)
        worked.append("measured after the stop")
        return measure(**kwargs)

    monkeypatch.setattr(table1, "measure", measured_through_a_stop)
    settings = '{"d_model": 16, "n": [8, 16], "d": [8, 16], "k": 3, "r": 2, "path_n": [8], "repeats": 1}'
    outputs = [f"--{kind}={tmp_path / name}" for kind, name in
               [("out-md", "t.md"), ("out-csv", "t.csv"), ("out-html", "t.html"), ("figure", "t.png")]]  # fmt: skip
    for _ in range(2):  # the stop is noted after the command ends, and the next command starts clean
        code = cli.main(["table1", "--settings", settings, *outputs])
        assert code == 143 and worked == [] and list(tmp_path.iterdir()) == []
        assert capsys.readouterr().err.strip().splitlines() == [
            "aiayn table1: error: stopped by SIGTERM; no output was left under its final name: run the command again"
        ]
        assert errors.pending_stop() == signal.SIGTERM
    monkeypatch.setattr(table1, "measure", measure)
    assert cli.main(["table1", "--settings", settings, *outputs]) == 0
    assert (tmp_path / "t.md").exists()


def test_a_stop_swallowed_for_good_still_puts_no_output_in_place(tmp_path, monkeypatch, capsys):
    """A stop whose every exception is lost (the command ignores Stopped): the work ends, but no
    output is put in place and the command ends as stopped."""
    from aiayn.report import table1

    measure = table1.measure

    def measured_through_stops(**kwargs):
        swallowed_stop()
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            try:
                time.sleep(0.01)
            except Stopped:
                pass
        return measure(**kwargs)

    monkeypatch.setattr(table1, "measure", measured_through_stops)
    settings = '{"d_model": 16, "n": [8, 16], "d": [8, 16], "k": 3, "r": 2, "path_n": [8], "repeats": 1}'
    outputs = [f"--{kind}={tmp_path / name}" for kind, name in
               [("out-md", "t.md"), ("out-csv", "t.csv"), ("out-html", "t.html"), ("figure", "t.png")]]  # fmt: skip
    assert cli.main(["table1", "--settings", settings, *outputs]) == 143
    assert list(tmp_path.iterdir()) == [] and "stopped by SIGTERM" in capsys.readouterr().err


def test_a_stop_while_outputs_land_waits_for_them_and_says_they_are_written(tmp_path, monkeypatch, capsys):
    """A stop that arrives while the outputs are renamed into place is raised once all are: every
    output whole, none missing, and the one line says which were written (it said none were)."""
    renamed, rename = [], os.replace

    def stopped_while_renaming(a, b):
        renamed.append(b)
        if len(renamed) == 1:
            errors.stop_signal(signal.SIGTERM, None)  # (what the handler does when the signal comes)
        rename(a, b)

    monkeypatch.setattr(os, "replace", stopped_while_renaming)
    settings = '{"d_model": 16, "n": [8, 16], "d": [8, 16], "k": 3, "r": 2, "path_n": [8], "repeats": 1}'
    names = ["t.md", "t.csv", "t.html", "t.png"]
    outputs = [f"--{kind}={tmp_path / name}" for kind, name in zip(["out-md", "out-csv", "out-html", "figure"], names)]
    assert cli.main(["table1", "--settings", settings, *outputs]) == 143
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names) and len(renamed) >= 4
    line = one_line(capsys)
    assert line.startswith("aiayn table1: error: stopped by SIGTERM after writing ") and str(tmp_path / "t.png") in line


def test_a_stop_between_making_a_temporary_file_and_listing_it_leaves_none(tmp_path, monkeypatch):
    """The temporary file of an output, made and listed for removal as one step: a stop right after
    it is made is raised once it is listed, and it is removed."""
    from aiayn.io import atomic_paths

    make = tempfile.mkstemp

    def made_then_stopped(*args, **kwargs):
        made = make(*args, **kwargs)
        errors.stop_signal(signal.SIGTERM, None)
        return made

    monkeypatch.setattr(tempfile, "mkstemp", made_then_stopped)
    with pytest.raises(Stopped), errors.stoppable(), atomic_paths(tmp_path / "a", tmp_path / "b"):
        pytest.fail("the stop was not raised before the outputs were written")
    assert list(tmp_path.iterdir()) == []


def test_a_stop_before_the_command_begins_stops_it_and_the_first_stop_is_the_one_said():
    """`python -m aiayn` notes a stop from its first line: one noted before the command begins ends
    it before any work; a second signal is the same stop, said as the first."""
    errors.note_stop(signal.SIGTERM)
    errors.note_stop(signal.SIGHUP)
    with pytest.raises(Stopped) as stopped, errors.stoppable():
        pytest.fail("the command began")
    assert stopped.value.signum == signal.SIGTERM
    main = (ROOT / "src/aiayn/__main__.py").read_text()
    assert main.index("signal.signal(_sig, stop_signal)") < main.index("from aiayn.cli import main")


def test_a_training_takes_over_a_stop_received_before_its_own_handler():
    """A stop that reached aiayn.cli's handler before `train` installed its own (and whose exception
    was swallowed) stops the training as its own would: with a checkpoint, not never."""
    from aiayn.training.distributed import StopFlag

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT, signal.SIGHUP)}
    try:
        swallowed_stop(signal.SIGHUP)
        flag = StopFlag()
        flag.install()
        assert flag and flag.reason() == "stop signal (SIGHUP)" and errors.pending_stop() is None
        clean = StopFlag()
        clean.install()
        assert not clean
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        errors.take_stop()


def test_sighup_stops_a_training_with_a_checkpoint(tmp_path):
    """The terminal closed under a training: SIGHUP stops it as SIGTERM does (a checkpoint, exit 75);
    it died without a word or a checkpoint before."""
    settings = toy.settings(steps=4000, checkpoint_interval=1000, log_interval=1)
    proc = subprocess.Popen([sys.executable, *toy.train_command(tmp_path, settings)], env=toy.env_for_subprocess(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    metrics_file = tmp_path / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (metrics_file.exists() and metrics_file.read_text().count('"loss"') >= 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75 and "stop signal (SIGHUP)" in out and "Traceback" not in err, out + err
    assert list((tmp_path / "checkpoints").glob("resume_*.pt"))


def test_an_append_that_is_cut_short_is_a_full_disk_naming_the_file(tmp_path, monkeypatch):
    """metrics.jsonl is appended a record per write: a short write (the disk filled under it) is the
    full disk it is, naming the file, never a record silently lost."""
    from aiayn.runtime import metrics

    path = tmp_path / "metrics.jsonl"
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, data[: len(data) // 2]))
    with pytest.raises(OSError) as raised:
        metrics.append(path, {"event": "stop", "step": 1, "reason": "x", "wall": 1.0})
    monkeypatch.undo()
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(path)
    line, code = explain(raised.value, [])
    assert code == EXIT_USER and line.startswith(f"{path}: no space left")


def test_a_full_disk_under_the_log_is_one_line_on_the_terminal(tmp_path, capsys):
    with tmpfs(tmp_path / "full", full=True) as full:
        gold = str(ROOT / "tests/fixtures/protocol/evalb/gold.mrg")
        code = cli.main(["evalb", gold, gold, "--log-to", str(full / "e.log")])
    out = capsys.readouterr()
    assert code == EXIT_USER and "Traceback" not in out.err + out.out
    said = [line for line in out.out.splitlines() if "error:" in line]
    assert len(said) == 1 and "no space left" in said[0] and str(full / "e.log") in said[0], out
