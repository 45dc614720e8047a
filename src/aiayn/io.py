"""File writing that never leaves a half-written file under a final name: `atomic_paths` for files
(text, JSON, checkpoints, corpora, vocabularies, archives, figures) and `atomic_dir` for a folder
written whole (an exported model) are the one mechanism the package's outputs go through. Two
writers are not atomic by design: a download grows `<out>.part` across attempts so that the next
resumes it (`aiayn.data.download`, renamed once verified), and `metrics.jsonl` is appended to, a
record per write (`aiayn.runtime.metrics`).

A writer gets temporary paths in the targets' folders, unique to it (two writers running at once
never share one), writes them, and on success each is flushed to disk, given the permissions of
an ordinary new file (the umask honoured) and renamed into place; on failure they are removed.

A writer killed outright (kill -9, a node lost) cannot remove its temporary files. Their names
say whose they were, `.<target>.<host>-<pid>.<random>.tmp`, so the next writer of the same
target removes them (`remove_leftovers`): those of a process of this host that no longer runs,
and those of another host untouched for `STALE_AFTER_S`. Scratch folders (`scratch_dir`) and the
folders of `atomic_dir` are named and cleaned the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from aiayn.errors import WRITING, Stopped, UserError, held, landed, pending_stop

STALE_AFTER_S = 3600  # a leftover of another host untouched this long is a dead writer's
# the file in every folder aiayn writes whole (`atomic_dir`, example-corpus): such a folder may be
# replaced by its command's next run; one without it is someone else's and is never replaced
OUTPUT_MARK = ".aiayn-output"
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[^.]+\.tmp$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0]) or "host"


def _owner() -> str:
    return f"{_host()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _stale(host: str, pid: int, path: Path) -> bool:
    if host == _host():
        return pid != os.getpid() and not _alive(pid)
    try:
        return time.time() - path.lstat().st_mtime > STALE_AFTER_S
    except FileNotFoundError:
        return False


def remove_leftovers(
    folder: str | os.PathLike, name: str | None = None, *, every: bool = False, log: Callable[[str], None] | None = None
) -> list[Path]:
    """Remove the temporary files and scratch folders that killed writers left in `folder` (of
    target `name`, or of any target): those whose writer is gone, or all of them with `every`
    (for a folder that one job owns, at that job's start). Returns what was removed."""
    folder = Path(folder)
    removed = []
    try:
        entries = [p for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]
    except FileNotFoundError:
        return removed
    for path in entries:
        if not (_every_match(path, name) if every else _stale_match(path, name)):
            continue
        size = _size(path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
        if log:
            log(f"removed {path}, {size / 1e6:.1f} MB left by an interrupted write")
    return removed


def _every_match(path: Path, name: str | None) -> bool:
    """Any temporary entry (of `name`), named the way this module names them or not."""
    return name is None or path.name.startswith(f".{_short(name)}.")


def _stale_match(path: Path, name: str | None) -> bool:
    m = LEFTOVER.match(path.name)
    return bool(m) and (name is None or m["name"] == _short(name)) and _stale(m["host"], int(m["pid"]), path)


def _size(path: Path) -> int:
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def _umask() -> int:
    with open("/proc/self/status", encoding="ascii") as f:  # Linux: read without changing it
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: the classic set-and-restore
    os.umask(mask)
    return mask


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISCHR, "a character device"))  # fmt: skip


def _kind(mode: int) -> str | None:
    """What a file of `mode` is, if not a regular file."""
    return next((name for test, name in KINDS if test(mode)), None)


def _stat(path: Path) -> os.stat_result | None:
    """os.stat of `path` (a link followed), None when nothing is there; a link to nothing or a
    link that loops is a UserError naming it."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            where = os.readlink(path)
            raise UserError(f"{path}: a link to {where}, which does not exist; give a file's path") from None
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: a link that loops back on itself; give a file's path") from None
        raise


def readable(path: str | os.PathLike, what: str = "a file") -> Path:
    """Check an input before it is opened: it is there and is a regular file (a folder is not one,
    and a FIFO or a device would be read forever or never). A UserError naming it otherwise; an
    empty file is the reader's to judge."""
    path = Path(path)
    st = _stat(path)
    if st is None:
        raise UserError(f"{path}: not found; check the path")
    kind = _kind(st.st_mode)
    if kind == "a folder":
        raise UserError(f"{path}: is a folder, where {what} is meant; give the file's path")
    if kind:
        raise UserError(f"{path}: is {kind}, where {what} is meant; give a file on disk")
    return path


def appendable(path: str | os.PathLike) -> Path:
    """Check a file that is appended to (a log, metrics.jsonl) before it is opened: absent, a regular
    file or a character device (/dev/null); a folder, a FIFO (whose open would wait for a reader),
    a socket, a block device or a broken link is refused naming it."""
    path = Path(path)
    st = _stat(path)
    kind = _kind(st.st_mode) if st else None
    if st is None and not path.parent.is_dir():  # a log in a folder not made yet: made, as an output's is
        path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a folder":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if kind and kind != "a character device":
        raise UserError(f"{path}: is {kind}, not a file that can be appended to; give a file's path")
    return path


def output_target(path: str | os.PathLike) -> tuple[Path, bool]:
    """(where to write, whether to write through): an output path as it is, or the regular file a
    link points to (the link is kept); a character device (/dev/null) is written through, never
    renamed over. A folder is an IsADirectoryError naming it; a FIFO, socket or block device, a link
    to nothing and a link that loops are UserErrors naming it."""
    path = Path(path)
    st = _stat(path)
    if st is None:
        return path, False
    kind = _kind(st.st_mode)
    if kind == "a folder":
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if kind == "a character device":
        return path, True
    if kind:
        raise UserError(f"{path}: is {kind}, not a file an output can be written to; give a file's path")
    return (Path(os.path.realpath(path)) if path.is_symlink() else path), False


def _short(name: str) -> str:
    """A target's name as its temporary files carry it: cut (with a digest of the whole) when long,
    so that `.<name>.<host>-<pid>.<random>.tmp` fits wherever the name itself fits; a byte of the name
    that is not UTF-8 written as `\\xfe`, so that a library that takes only text (sentencepiece) takes it."""
    raw = os.fsencode(name)
    text = raw.decode("utf-8", "backslashreplace")
    if len(text.encode()) <= 150:
        return text
    return text.encode()[:100].decode("utf-8", "ignore") + "~" + hashlib.sha256(raw).hexdigest()[:12]


def _temp_prefix(final: Path) -> str:
    return f".{_short(final.name)}.{_owner()}."


_PENDING: contextvars.ContextVar[list | None] = contextvars.ContextVar("aiayn_io_pending", default=None)


@contextlib.contextmanager
def together() -> Iterator[None]:
    """The outputs of one command as one write: every `atomic_paths` (`atomic_path`,
    `atomic_write_text`) finished inside the block keeps its temporary files until
    the block ends, and all are renamed into place then, or, if the block fails, all removed: a
    command that fails on its last output leaves none of its earlier ones under their final names.
    An output written inside the block cannot be read back inside it (it is not in place yet).
    Nested blocks are one block."""
    if _PENDING.get() is not None:
        yield
        return
    pending: list[tuple[Callable[[], None], Callable[[], None], Callable[[], None]]] = []
    token = _PENDING.set(pending)
    try:
        yield
    except BaseException:
        for *_, abandon in pending:
            abandon()
        raise
    finally:
        _PENDING.reset(token)
    _land(pending)


def _land(pending: list[tuple[Callable[[], None], Callable[[], None], Callable[[], None]]]) -> None:
    """Outputs put in place in two rounds: each one's bytes made final where they can still fail
    (flushed to disk, written to a device), then the renames; a failure leaves none in place that
    is not yet (a rename is the one step left once every output's bytes are safe)."""
    for stage in (0, 1):
        with held() if stage else contextlib.nullcontext():  # a stop waits for the renames' end
            for n, step in enumerate(pending):
                try:
                    step[stage]()
                except BaseException:
                    for *_, abandon in pending[n + 1 :] if stage else pending:
                        abandon()
                    raise


@contextlib.contextmanager
def atomic_paths(*targets: str | os.PathLike) -> Iterator[list[Path]]:
    """Temporary paths for `targets`, renamed into place together once the block succeeds (inside
    `together()`, once that block succeeds).

    Each is a fresh `.<name>.<host>-<pid>.<random>.tmp` beside its target (so the rename stays on one file
    system); the caller writes it (or replaces it). On an exception none of the targets changes.
    """
    finals, through, givens = [], [], []
    temps: list[Path] = []
    try:
        for given in map(Path, targets):
            try:
                given.parent.mkdir(parents=True, exist_ok=True)
                final, direct = output_target(given)  # found now, not after the work that was to fill it
                remove_leftovers(final.parent, final.name)
                with held():  # made and listed for removal as one step
                    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=_temp_prefix(final), suffix=".tmp")
                    temps.append(Path(tmp))
            except OSError as exc:  # name the output, not our temporary file
                exc.filename, exc.filename2 = str(given), None
                raise
            os.close(fd)
            finals.append(final)
            through.append(direct)
            givens.append(given)
        yield temps
    except BaseException as exc:
        said = refused_by_disk(exc, givens)
        _name_the_target(exc, temps, givens)
        _remove(temps)
        if said is not None:
            raise said from None
        raise

    def named(step):
        def run() -> None:
            try:
                step(temps, finals, through)
            except BaseException as exc:
                _name_the_target(exc, temps, givens)
                _remove(temps)
                raise

        return run

    landing = (named(_make_final), named(_rename), lambda: _remove(temps))
    pending = _PENDING.get()
    if pending is None:
        _land([landing])
    else:
        pending.append(landing)


def _remove(temps: list[Path]) -> None:
    for tmp in temps:
        tmp.unlink(missing_ok=True)


def _make_final(temps: list[Path], finals: list[Path], through: list[bool]) -> None:
    """Each output's bytes where they stay: a file's flushed to disk, readable by others; a
    character device's written to it."""
    if (signum := pending_stop()) is not None:  # a stop whose exception was swallowed: nothing lands
        raise Stopped(signum)
    mode = 0o666 & ~_umask()  # mkstemp makes 0600; a collaborator may need to read results
    for tmp, final, direct in zip(temps, finals, through):
        if direct:  # a character device: its bytes go to it, the device stays
            try:
                with open(tmp, "rb") as src, open(final, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            except OSError as exc:  # (a write names no file): the device refused them
                exc.filename = exc.filename or str(final)
                raise
            tmp.unlink()
        else:
            os.chmod(tmp, mode)
            _fsync(tmp)


def _rename(temps: list[Path], finals: list[Path], through: list[bool]) -> None:
    for tmp, final, direct in zip(temps, finals, through):
        if not direct:
            os.replace(tmp, final)
        if not LEFTOVER.match(final.name):  # (an outer writer's temporary file is no output yet)
            landed(str(final))
    for folder in {final.parent for final, direct in zip(finals, through) if not direct}:
        _fsync(folder)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """`atomic_paths` for one target: `with atomic_path(out) as tmp: torch.save(x, tmp)`."""
    with atomic_paths(target) as (tmp,):
        yield tmp


@contextlib.contextmanager
def scratch_dir(target: str | os.PathLike) -> Iterator[Path]:
    """A scratch folder beside `target` for the intermediate files of its writer, removed afterwards
    (and, if the writer is killed, by the next writer of `target`)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(target.parent, target.name)
    try:
        with tempfile.TemporaryDirectory(
            dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp", ignore_cleanup_errors=True
        ) as tmp:
            yield Path(tmp)
    except BaseException as exc:  # named here only if the scratch folder's disk is the one that refuses
        if isinstance(exc, OSError) and exc.filename is None and write_failure(target, None) is not None:
            _name_the_target(exc, [], [target])
        raise


def _real(path) -> str:
    return os.path.realpath(path)


def _inside(path, folder) -> bool:
    """Whether `path` is `folder` or lies in it (both resolved through links)."""
    path, folder = _real(path), _real(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _same_file(a, b) -> bool:
    """Whether two paths name one file: the same path through links, or one file through a hard link."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def guard_outputs(outputs: list[tuple[str, str, str]], inputs: list[tuple[str, str, str]]) -> None:
    """Before a command does any work, like `cp` refusing to copy a file onto itself: every output
    `(option, path, kind)` ("file", "folder" written whole, "appended") against every input `(option,
    path, kind)` of the same invocation (the same path, the same file through a link, an input inside
    an output folder, an output inside a folder the command reads: "folder"; a "run folder" is one it
    also writes in), against every other output, and against what is at its path (a FIFO, socket or
    block device is no output; a folder written whole is replaced only when it holds OUTPUT_MARK, or
    is empty). Refused with one line naming both; nothing is touched."""
    for n, (option, path, kind) in enumerate(outputs):
        for other, given, given_kind in inputs:
            holds = kind == "folder" and _inside(given, path) and not _same_file(path, given)
            within = given_kind == "folder" and _inside(path, given) and not _same_file(path, given)
            if _same_file(path, given) or holds or within:
                what = "holds" if holds else "lies inside" if within else "is"
                raise UserError(
                    f"{option} {path} {what} the input {other} {given}: writing it would destroy what the command "
                    "reads; give the output another path"
                )
        for other, second, second_kind in outputs[n + 1 :]:
            inside = (kind == "folder" and _inside(second, path)) or (second_kind == "folder" and _inside(path, second))
            if _same_file(path, second) or inside:
                raise UserError(
                    f"{option} {path} and {other} {second} are one place: one output would overwrite the other; "
                    "give each its own path"
                )
        st = _stat(Path(path))
        odd = _kind(st.st_mode) if st else None
        if odd in ("a FIFO", "a socket", "a block device"):
            raise UserError(f"{option} {path}: is {odd}, not a file an output can be written to; give a file's path")
        where = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        system = where in ("/dev", "/proc", "/sys") or where.startswith(("/proc/", "/sys/"))  # a device's path, derived
        if st is None and system:
            raise UserError(f"{option} {path}: would be a new file in {where}, where the system keeps devices, not "
                            "files; give a file's path (and, for a device, the outputs derived from it)")  # fmt: skip
        if kind == "folder" and os.path.exists(path) and not os.path.isdir(path):
            raise UserError(f"{option} {path}: a file, where the folder the command writes is meant; give a folder")
        if kind == "folder":
            replaceable(path, f"{option} {path}")


def replaceable(folder: str | os.PathLike, label: str) -> None:
    """Refuse to replace a folder whole unless aiayn wrote it (OUTPUT_MARK) and it holds nothing the mark
    does not list (a user's file put there since; a mark of aiayn before 0.6 lists none: there, a file
    changed after the mark was written)."""
    folder = Path(folder)
    if not folder.is_dir() or not os.listdir(folder):
        return
    if not os.path.lexists(folder / OUTPUT_MARK):
        raise UserError(f"{label}: a folder aiayn did not write (no {OUTPUT_MARK} in it), which would be filled or "
                        "replaced whole; give a new or an empty folder")  # fmt: skip
    mark = folder / OUTPUT_MARK
    listed, since = set(mark.read_text(encoding="utf-8", errors="replace").splitlines()[1:]), mark.lstat().st_mtime
    files = {str(p.relative_to(folder)): p for p in folder.rglob("*") if not p.is_dir()}
    extra = sorted(n for n, p in files.items() if (n not in listed if listed else p.lstat().st_mtime > since))
    if extra := [name for name in extra if name != OUTPUT_MARK]:
        more = " and more" if len(extra) > 1 else ""
        why = "its mark does not list it" if listed else "written after its mark"
        raise UserError(f"{label}: holds {extra[0]}{more}, which aiayn did not write ({why}) and replacing the "
                        "folder would delete; move it out first")  # fmt: skip


def mark_output(folder: str | os.PathLike) -> None:
    """Mark `folder` as one aiayn wrote whole (OUTPUT_MARK), listing its files: its command may replace it."""
    names = sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if not p.is_dir())
    text = "\n".join(["written whole by aiayn: the command that wrote it may replace it (its files:)", *names])
    (Path(folder) / OUTPUT_MARK).write_text(text + "\n")


def writable(*targets: str | os.PathLike, folders: bool = False) -> None:
    """Check now, before long work, that each target can be written where it goes (its folder made
    if need be, a temporary file created there and removed): an OSError naming the target if not.
    `folders`: the targets are folders written whole (`atomic_dir`), which may exist."""
    for target in map(Path, targets):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if folders:
                if target.exists() and not target.is_dir():
                    raise UserError(f"{target}: is a file, where a folder is written; give a folder's path")
            else:
                target = output_target(target)[0]
            with held():
                fd, probe = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            exc.filename, exc.filename2 = str(target), None
            raise


def write_failure(target: str | os.PathLike, original: BaseException, needed: int = 0) -> BaseException:
    """Why a write toward `target` failed when the writer did not say (torch and sentencepiece name
    no errno, numpy says "n requested and 0 written"): an OSError of the file system naming
    `target` (less free space than the `needed` bytes, or a probe written beside it fails), else
    `original`."""
    target = Path(target)
    try:
        if shutil.disk_usage(target.parent).free < needed:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, str(target))
    probe = target.parent / f"{_temp_prefix(target)}probe.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * (1 << 16))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return OSError(exc.errno, exc.strerror or str(exc), str(target))
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return original


def refused_by_disk(exc: BaseException, targets: list) -> OSError | None:
    """A writer's own exception, not an OSError (safetensors', sentencepiece's, torch's), that is one of the disk:
    the error number its text gives as Rust or Python write it ("os error 28", "[Errno 28]"), or the disk of a
    target refusing a write now (probed before what was written is removed); as the OSError naming that target,
    which the error boundary says in one line. None otherwise."""
    if not isinstance(exc, Exception) or isinstance(exc, (OSError, UserError)) or not targets:
        return None
    if (code := re.search(r"os error (\d+)|\[Errno (\d+)\]", str(exc))) and int(code[1] or code[2]) in WRITING:
        number = int(code[1] or code[2])
        return OSError(number, os.strerror(number), str(targets[0]))
    return next((said for t in targets if isinstance(said := write_failure(t, None), OSError)), None)


def _name_the_target(exc: BaseException, temps: list[Path], targets: list[Path]) -> None:
    """A write that failed for want of space (or on a read-only disk) names the output the user gave,
    the one that could not be written: not our temporary file (gone by the time the line is read),
    not the source of a copy (`shutil.copyfile`'s error names both), and, when the error names no
    file (a write to an open file), the output being written when it failed: the temporary file
    written last (the newest), or the only target."""
    if not isinstance(exc, OSError) or exc.errno not in WRITING:
        return
    ours = {str(tmp): target for tmp, target in zip(temps, targets)}
    for name in (exc.filename2, exc.filename):
        if name is not None and str(name) in ours:
            exc.filename, exc.filename2 = str(ours[str(name)]), None
            return
    if exc.filename is not None:
        return
    if len(targets) > 1:  # the one whose disk refuses a write now; of several, the one written last
        refused = [(tmp, t) for tmp, t in zip(temps, targets) if write_failure(tmp, None) is not None] or list(
            zip(temps, targets)
        )
        exc.filename = str(max(refused, key=lambda pair: _modified(pair[0]))[1])
    elif targets:
        exc.filename = str(targets[0])


def _modified(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def ensure_space(path: str | os.PathLike, size: int) -> None:
    """Reserve `size` bytes for the file `path` now (posix_fallocate), so that a full disk is an
    OSError here rather than a SIGBUS later, when a memory map of it is written."""
    with open(path, "r+b") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, size)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without it: fill by writing
                f.truncate(size)
                return
            exc.filename = str(path)
            raise


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """A fresh folder beside `target` for the caller to fill; once the block succeeds its files are
    flushed to disk, it is marked as aiayn's (OUTPUT_MARK) and it replaces `target` whole (an old
    `target` is moved away, then removed); on an exception it is removed and `target` is unchanged.
    An existing `target` that is not aiayn's (no OUTPUT_MARK) and not empty is refused, untouched."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(target.parent, target.name)
    if target.exists() and not target.is_dir():
        raise UserError(f"{target}: is a file, where a folder is written; give a folder's path")
    replaceable(target, str(target))
    made: list[Path] = []
    try:
        with held():
            made.append(Path(tempfile.mkdtemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")))
        tmp = made[0]
        yield tmp
        if (signum := pending_stop()) is not None:  # as _make_final: a stop swallowed on its way
            raise Stopped(signum)
        mark_output(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700
        for path in tmp.rglob("*"):
            if path.is_file() and not path.is_symlink():
                _fsync(path)
        with held():  # the old folder moved aside and the new one in: one step
            if target.exists() or target.is_symlink():
                old = target.parent / f"{_temp_prefix(target)}{secrets.token_hex(4)}.tmp"
                os.rename(target, old)
                os.rename(tmp, target)
                if old.is_dir() and not old.is_symlink():
                    shutil.rmtree(old)
                else:
                    old.unlink()
            else:
                os.rename(tmp, target)
            landed(str(target))
        _fsync(target.parent)
    except BaseException as exc:
        said = refused_by_disk(exc, [target])
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)
        if said is not None:
            raise said from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number a record may hold")


def _no_duplicate_keys(pairs: list) -> dict:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} is given twice (JSON would keep the last one silently)")
        seen.add(key)
    return dict(pairs)


def _finite_float(text: str) -> float:
    if not math.isfinite(value := float(text)):  # 1e999
        raise ValueError(f"{text} is not a finite number")
    return value


def parse_json(text: str | bytes, *, finite: bool = True):
    """JSON text as Python values, the package's one JSON reader (every record, metrics line, JSON
    option, header and result file): every failure is a ValueError (a document nested past Python's
    recursion limit too); a key given twice in one object is refused (as the YAML files refuse it),
    and with `finite`, NaN and infinities."""
    hook = _refuse_constant if finite else None
    try:
        return json.loads(text, parse_constant=hook, parse_float=_finite_float if finite else float,
                          object_pairs_hook=_no_duplicate_keys)  # fmt: skip
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None


def zip_damage(path: str | os.PathLike) -> str | None:
    """What is wrong with a zip file (a torch checkpoint is one; torch's load checks no checksum, so
    a flipped bit would be used): None, or the record that fails its CRC-32 or why none can be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, KeyError) as exc:
        return f"not a readable checkpoint ({type(exc).__name__}: {exc})"
    except zlib.error as exc:
        bad = f"({exc})"
    bad = bad if bad is None else bad.partition("/")[2] or bad  # (torch's records: <the name it was saved as>/...)
    return None if bad is None else f"a damaged checkpoint (record {bad} does not match its checksum)"


def file_sha256(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()
