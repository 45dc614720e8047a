"""What a command says when it cannot go on: the one base class of errors a user can cause and fix
(bad config, missing or corrupt files), and `explain`, the one boundary that turns every such
error, every error of the file system (a full disk, a read-only folder, a permission), running out
of memory, an input nested too deeply and Ctrl-C into one line and an exit code.

`python -m aiayn` prints that line and exits 2 (130 for Ctrl-C, 128 + the signal for SIGTERM and
SIGHUP); anything else is a bug of ours and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import threading
import time
import weakref
from typing import Iterator

EXIT_USER = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C

# what to do about an error of the file system, by errno
ADVICE = {
    errno.ENOSPC: "no space left on its disk: free some (or point `results` at a larger disk) and run again",
    errno.EDQUOT: "over the disk quota: free some and run again",
    errno.EFBIG: "the file grew past the file system's largest: point `results` at another disk",
    errno.EROFS: "on a read-only file system: choose a folder you can write (`results`, --out)",
    errno.EACCES: "permission denied: make it readable and writable for you, or choose another path",
    errno.EPERM: "operation not permitted: check its owner and permissions, or choose another path",
    errno.EISDIR: "is a folder, where a file is meant: give the file's path",
    errno.ENOTDIR: "a part of the path is a file, not a folder: check the path",
    errno.EEXIST: "already exists and is in the way: move it aside",
    errno.ENOTEMPTY: "is a folder that is not empty: move it aside",
    errno.ENOENT: "not found: check the path",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n) and run again",
    errno.ENFILE: "too many open files on this machine: run again when fewer are open",
    errno.EIO: "an I/O error of the disk: check the disk (or the network file system) and run again",
    errno.ENAMETOOLONG: "the name is too long for the file system: choose a shorter path",
    errno.ELOOP: "too many symbolic links: check the path",
}
# errors of writing: a failed write names the file it was writing, where the system named none
WRITING = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


class UserError(Exception):
    """An error caused by input the user controls; its message says what to do."""


# The stop signal this process received (SIGTERM, SIGHUP), kept beside the Stopped raised for it: a
# handler's exception can vanish where C code runs Python and clears its error (torch's C module
# initialised while `import torch` runs: a SIGTERM then ran `table1` to its end; a C-API attribute
# lookup that reaches a Python __getattr__). Such a stop is raised again: every Stopped is held by a
# weak reference only, so once the last one is gone (swallowed, or caught and let go) while the
# command still runs, a watcher thread (`_redeliver`) sends the signal to the main thread again, every
# quarter second. A Stopped on its way (through finally blocks and cleanups) is alive and is never raised
# over. A stop swallowed for good anyway: aiayn.io puts no output in place after it, and the
# command ends as stopped; `train`'s own handler takes it over (`take_stop`).
_STOP: list[int] = []
_RAISED: list = []  # a weak reference to the Stopped last made
_RUNNING: list[bool] = []  # [True] while a command runs with `stop_signal` as its handler
_HELD: list[bool] = []  # one per `held` block open: a stop waits for its end
_LANDED: list[str] = []  # the outputs this command has put in place (aiayn.io), for its stop's line
_WATCHER: list[threading.Thread] = []
_LOCK = threading.RLock()  # (reentrant: the handler may run while the main thread holds it)


class Stopped(BaseException):
    """A stop signal (SIGTERM, SIGHUP) to a command that does not checkpoint (all but `train`):
    raised where the command is, so that its writes clean up as for Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        _RAISED[:] = [weakref.ref(self)]


def note_stop(signum: int) -> None:
    """The stop received, the first one (a second signal is the same stop)."""
    if not _STOP:
        _STOP[:] = [signum]


def pending_stop() -> int | None:
    """The stop signal received, if any."""
    return _STOP[0] if _STOP else None


def take_stop() -> int | None:
    """The stop signal received, if any, forgotten here (its taker acts on it)."""
    signum = pending_stop()
    _STOP.clear()
    return signum


@contextlib.contextmanager
def stoppable() -> Iterator[None]:
    """While a command runs: `stop_signal` raises Stopped, and raises it again if it is swallowed."""
    with _LOCK:
        _RUNNING[:] = [True]
        _LANDED.clear()
    try:
        if _STOP:  # one received before the command began (`python -m aiayn` notes it from its start)
            raise Stopped(_STOP[0])
        yield
    finally:
        with _LOCK:
            _RUNNING.clear()


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Steps a stop must not cut in two (a temporary file made and registered for its removal;
    outputs renamed into place): a stop that arrives in the block is raised when it ends."""
    with _LOCK:
        _HELD.append(True)
    try:
        yield
    finally:
        with _LOCK:
            _HELD.pop()
    if _STOP and _RUNNING and not _HELD:
        raise Stopped(_STOP[0])


def landed(path: str) -> None:
    """An output put in place (aiayn.io): a stop after it says so."""
    _LANDED.append(str(path))


def stop_signal(signum: int, frame) -> None:
    """The handler of SIGTERM and SIGHUP (aiayn.cli): the stop noted, and raised as Stopped where the
    command is while it runs (after it has ended, a late or repeated one changes nothing)."""
    with _LOCK:
        note_stop(signum)
        if not _RUNNING or _HELD:
            return
        if not _WATCHER:
            _WATCHER.append(threading.Thread(target=_redeliver, name="aiayn-stop", daemon=True))
            _WATCHER[0].start()
    raise Stopped(_STOP[0])  # (held by no local: a swallowed one is freed, and seen so)


def _redeliver() -> None:
    while True:
        time.sleep(0.25)
        with _LOCK:
            if not _RUNNING or not _STOP:  # the command ended, or its stop was taken over (train's handler)
                _WATCHER.clear()
                return
            if not _HELD and (not _RAISED or _RAISED[0]() is None):  # swallowed: raised again
                signal.pthread_kill(threading.main_thread().ident, _STOP[0])  # (wakes a wait too)


def out_of_memory(exc: BaseException) -> bool:
    """torch's allocation failures are RuntimeErrors (CPU: "DefaultCPUAllocator: can't allocate
    memory", CUDA: torch.cuda.OutOfMemoryError), not MemoryError."""
    text = str(exc)
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError)
        and (type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text or "can't allocate memory" in text)
    )


def file_system_error(exc: OSError) -> str:
    """One line for an error of the file system: the path, what happened, what to do."""
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    advice = ADVICE.get(exc.errno) if exc.errno is not None else None
    what = advice or (exc.strerror or str(exc) or type(exc).__name__)
    return f"{' -> '.join(paths)}: {what}" if paths else what


def explain(exc: BaseException, inputs: list[str]) -> tuple[str, int] | None:
    """(the one line, the exit code) for an error a user can act on, or None for a bug of ours.
    `inputs`: the files the command was given, named when the error has no file of its own."""
    given = ", ".join(inputs) or "its input"
    if isinstance(exc, UserError):
        return str(exc), EXIT_USER
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C); no output was left under its final name: run the command again", EXIT_INTERRUPTED
    if isinstance(exc, Stopped):
        name = signal.Signals(exc.signum).name
        if _LANDED:  # (each whole: outputs are put in place whole, together)
            return f"stopped by {name} after writing {', '.join(_LANDED)}: run the command again", 128 + exc.signum
        return f"stopped by {name}; no output was left under its final name: run the command again", 128 + exc.signum
    if isinstance(exc, OSError):
        return file_system_error(exc), EXIT_USER
    if out_of_memory(exc):
        return (
            f"out of memory reading {given}: give the job more memory (mem_mb; a GPU job, a larger GPU) or a smaller "
            "input (batch_tokens, max_tokens, beam)",
            EXIT_USER,
        )
    if isinstance(exc, RecursionError):
        return f"{given}: nested too deeply to read (a malformed or adversarial tree?); check the file", EXIT_USER
    return None


def one_line(message: str) -> str:
    """A message as one line: a line break or other control character in it (a path may hold one)
    written as Python writes it in a string (\\n), so that the one line stays one."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in message)


def boundary(main, name: str) -> None:
    """Run a script's `main` (benchmarks/rehearsal.py, ...) under the commands' error boundary: an
    error a user can act on (`explain`) ends it in one line, `<name>: error: ...`, and its exit code;
    a bug of ours keeps its traceback."""
    import sys

    try:
        main()
    except (Exception, KeyboardInterrupt, Stopped) as exc:
        said = explain(exc, [])
        if said is None:
            raise
        print(one_line(f"{name}: error: {said[0]}"), file=sys.stderr, flush=True)
        sys.exit(said[1])
