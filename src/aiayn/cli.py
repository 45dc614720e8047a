"""`python -m aiayn <command>`: the one entry point of every command, and what they share around it.

The commands (`COMMANDS`) are the pipeline's steps, each run by its rule, and a few a user runs by
hand. Each command is a module of aiayn.commands: it parses its arguments and calls one library function.
Before it runs, every output is checked against the inputs (`guard`, from aiayn.inventory); after,
with AIAYN_COSTS set, what it cost is recorded (`record_cost`). What the user can act on (a bad
config, a missing or damaged file, a full disk or a read-only folder, too little memory, Ctrl-C)
ends with one line on stderr naming the file or key and what to do (`aiayn.errors.explain`),
and exit code 2 (130 for Ctrl-C, 143 and 129 for SIGTERM and SIGHUP; `train` has codes of its own:
aiayn.commands.train); only a bug of ours shows a traceback.

Every command, before it imports torch, sets the thread policy of the OpenMP runtime torch computes
with (`thread_policy`), and takes `--log-to FILE` (`log_to`): what a rule's job prints goes to its log,
and its progress lines to the terminal as well.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Iterator, MutableMapping, TextIO

from aiayn import commands, described, errors, inventory
from aiayn.errors import EXIT_USER, Stopped, UserError, explain, one_line, pending_stop, take_stop
from aiayn.inventory import Check
from aiayn.io import appendable, parse_json

# command -> module defining `add_arguments(add)` (its parser's add_argument) and `run(args)`; imported
# only when called, so a step's environment needs only the packages of its own command.
COMMANDS = {
    "resolve": ("aiayn.commands.resolve", "write the resolved settings of one experiment"),
    "download": ("aiayn.commands.download", "download one archive, resuming and checking its sha256"),
    "generate": ("aiayn.commands.generate", "generate the offline demo's archives"),
    "example-corpus": ("aiayn.commands.example_corpus", "write the plain-text corpus examples/own-pair.yaml reads"),
    "prepare": ("aiayn.commands.prepare", "assemble and clean a dataset's training corpora"),
    "prepare-eval": ("aiayn.commands.prepare_eval", "extract one dev/test set"),
    "prepare-treebank": ("aiayn.commands.prepare_treebank", "one WSJ split as words and linearized trees"),
    "vocab": ("aiayn.commands.vocab", "train the sentencepiece vocabularies of a dataset"),
    "vocab-info": ("aiayn.commands.vocab_info", "a dataset's vocabularies against the sizes asked (vocab.json)"),
    "encode": ("aiayn.commands.encode", "encode aligned text into the binary training format"),
    "check": (
        "aiayn.commands.check",
        "measure the paper's known failure modes on one experiment's model before training",
    ),
    "train": ("aiayn.commands.train", "train one experiment; resumes from its newest checkpoint"),
    "average": ("aiayn.commands.average", "average the last K checkpoints of a run"),
    "select": ("aiayn.commands.select", "take the best candidate of a tuning grid on the dev set (§6.3)"),
    "translate": ("aiayn.commands.translate", "decode a source file with beam search"),
    "score": ("aiayn.commands.score", "score a decoded test set (both BLEU protocols)"),
    "table1": ("aiayn.commands.table1", "measure Table 1: complexity, sequential operations, path length (§4)"),
    "tables": ("aiayn.commands.tables", "write Table 2, 3 or 4 beside the paper's numbers"),
    "figures": ("aiayn.commands.figures", "learning curves, learning rate and attention maps of one run"),
    "export": ("aiayn.commands.export", "write a trained model as a Hugging Face MarianMTModel folder"),
    "evalb": ("aiayn.commands.evalb", "EVALB (COLLINS.prm) of parsed trees against gold trees"),
    "params": ("aiayn.commands.params", "count the parameters of every experiment's model beside the paper's"),
    "plan": ("aiayn.commands.plan", "the study's GPU hours, checkpoint disk and memory before launch"),
}
# import name -> the distribution to install, where the two differ
DISTRIBUTIONS = {"yaml": "pyyaml", "google": "protobuf"}


THREAD_VARIABLES = {  # the environment variables thread_policy reads -> (the form of a value, what it means)
    "OMP_NUM_THREADS": (r"[1-9]\d*(,[1-9]\d*)*", "a number of threads from 1, such as 4 (or 4,2: nested levels)"),
    "OMP_WAIT_POLICY": (r"(?i)active|passive", "ACTIVE or PASSIVE"),
    "LOCAL_WORLD_SIZE": (r"[1-9]\d*", "torchrun's count of processes on this node, a whole number from 1"),
    "AIAYN_THREAD_POLICY": (r"on|off", "off (torch's own thread defaults) or on"),
}


def thread_policy(environ: MutableMapping[str, str] = os.environ) -> None:
    """How torch's OpenMP threads wait and how many there are, set before torch is imported.

    - `OMP_WAIT_POLICY=PASSIVE` unless set: a thread with no work sleeps instead of spinning. Spinning
      threads are what makes a busy machine many times slower (they take the cores the threads still
      working need; benchmarks/README.md measures it).
    - `OMP_NUM_THREADS` is a rule's `threads` (Snakemake exports it to every job); a process of a
      `torchrun` job with several processes on its node (`LOCAL_WORLD_SIZE`) takes its share of them,
      at least 1, so that N processes do not run N times the threads the job was given.

    `AIAYN_THREAD_POLICY=off` leaves both as the environment has them (torch's own defaults). A value
    of these that OpenMP or torchrun cannot read is refused (`THREAD_VARIABLES`), where OpenMP would
    warn once and take its default (every core).
    """
    for name, (form, meant) in THREAD_VARIABLES.items():
        if (value := environ.get(name, "")) and not re.fullmatch(form, value.strip()):
            raise UserError(f"{name}={value!r} is not {meant}; set it so, or unset it")
    threads, local = environ.get("OMP_NUM_THREADS", ""), environ.get("LOCAL_WORLD_SIZE", "")
    if environ.get("AIAYN_THREAD_POLICY") == "off":
        return
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads.isdigit() and local.isdigit() and int(local) > 1:
        environ["OMP_NUM_THREADS"] = str(max(1, int(threads) // int(local)))


class _Tee:
    """A text stream writing whole lines to `log`, each in one write (the processes of a job append to
    one log: `print` writes a line and its newline apart, and a line-buffered file a line past 8 KiB
    in two, and two ranks' lines once interleaved), and to `terminal` (if any) after `prefix`."""

    def __init__(self, terminal: TextIO | None, log: TextIO, prefix: str = ""):
        self.terminal, self.log, self.prefix, self.pending = terminal, log, prefix, ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        if not lines:
            return len(text)
        try:
            self.log.write("".join(f"{line}\n" for line in lines))
            self.log.flush()
        except OSError as exc:  # a full disk under the log: name the log
            exc.filename = exc.filename or self.log.name
            raise
        if self.terminal is not None:
            try:
                self.terminal.write("".join(f"{self.prefix}{line}\n" for line in lines))
                self.terminal.flush()
            except (OSError, ValueError):  # the terminal is gone (a closed pipe): the log goes on
                self.terminal = None
        return len(text)

    def writelines(self, lines) -> None:
        for text in lines:
            self.write(text)

    def end_line(self) -> None:
        """Complete a line written without its newline yet (before the command's last words)."""
        if self.pending:
            self.write("\n")

    def flush(self) -> None:
        self.log.flush()

    def __getattr__(self, name):
        return getattr(self.log, name)


STDOUT = "standard output"
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `cat big | head -1`'s cat


class _Stdout:
    """The process's stdout, whose failed writes name it (`STDOUT`): a full disk under `> file` or
    a reader gone (`| head -1`) is then told from a failure of the command's own outputs."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def _named(self, write, *args):
        try:
            return write(*args)
        except OSError as exc:
            exc.filename, exc.filename2 = STDOUT, None
            raise

    def write(self, text: str) -> int:
        return self._named(self.stream.write, text)

    def writelines(self, lines) -> None:
        return self._named(self.stream.writelines, lines)

    def flush(self) -> None:
        return self._named(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _stdout_gone() -> int:
    """The reader of stdout has gone (a closed pipe): stop quietly, as Unix tools do, with SIGPIPE's
    status; what is left in the buffer goes nowhere (Python would report it at exit otherwise)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    return EXIT_PIPE


@contextlib.contextmanager
def log_to(path: str) -> Iterator[TextIO | None]:
    """`--log-to FILE`: while the command runs, what it prints on stdout (its progress lines) is
    appended to `path` and said on stdout too, each line after the log's name (`train/base: step
    50/200 ...`, so that the lines of jobs running side by side can be told apart); its stderr
    (warnings, C libraries' and child processes' output) is appended to `path` only. Every line the
    command writes reaches the log whole (`_Tee`), text that UTF-8 cannot hold escaped. Yields the
    terminal's stdout, where a failure's one line is said too (None where stdout is the log itself);
    restores both streams at the end."""
    log = open(appendable(path), "a", encoding="utf-8", errors="backslashreplace", buffering=1)  # closed below
    sys.stdout.flush()
    sys.stderr.flush()
    terminal, saved_stderr, saved_fd = sys.stdout, sys.stderr, os.dup(2)
    os.dup2(log.fileno(), 2)
    sys.stderr = commands.DETAIL_LOG = _Tee(None, log)
    if _same_file(terminal, log):  # stdout already the log (`>> log`, `> log`): once, appended
        sys.stdout, said_on = _Tee(None, log), None
    else:
        name = Path(path)
        sys.stdout, said_on = _Tee(terminal, log, f"{name.parent.name}/{name.stem}: ".lstrip("/")), terminal
    try:
        yield said_on
    finally:
        with contextlib.suppress(OSError):  # a full disk under the log was said already, on the terminal
            end_lines()
        sys.stdout, sys.stderr = terminal, saved_stderr
        commands.DETAIL_LOG = None
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        with contextlib.suppress(OSError):
            log.close()


def _same_file(stream, other) -> bool:
    try:
        return os.path.samestat(os.fstat(stream.fileno()), os.fstat(other.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


def end_lines() -> None:
    """Complete the lines stdout and stderr hold without their newline (under `log_to`), so that
    what comes next starts a line of its own."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, _Tee):
            stream.end_line()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a help text that cannot be written (`--help > /dev/full`, `| head -1`)
    fails as any other write to stdout does (argparse drops the error and exits 0); it keeps its
    arguments (`arguments`), where `options` reads their checks."""

    def __init__(self, *args, **kwargs):
        self.arguments = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        self.arguments.append(super().add_argument(*args, **kwargs))
        return self.arguments[-1]

    def _print_message(self, message, file=None):
        if message:
            (file or sys.stderr).write(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, with the arguments of `command` (only its module is imported);
    its `commands`: each command's own parser."""
    parser = _Parser(prog="python -m aiayn", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"aiayn {described()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    parser.commands = sub.choices
    for name, (module, help_) in COMMANDS.items():
        # allow_abbrev=False: an option is typed whole (`--lr` is not `--lr-plot`)
        cmd = sub.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        cmd.add_argument(
            "--log-to",
            metavar="FILE",
            help="append stdout to FILE as well and stderr to FILE only (a rule's log; progress stays on stdout)",
        )
        if name == command:
            importlib.import_module(module).add_arguments(cmd.add_argument)
        cmd.set_defaults(_module=module)
    return parser


@functools.cache
def options(command: str) -> dict[str, Check]:
    """Each argument of `command` that has a check (an option by its name, a positional one by its
    dest) -> that check (`aiayn.inventory.check_of`), read off the command's parser; --log-to aside
    (`aiayn.inventory.COMMON`). tests/test_inventory.py fails on an argument without one."""
    found = {}
    for action in build_parser(command).commands[command].arguments:
        name = action.option_strings[0] if action.option_strings else action.dest
        if name not in inventory.COMMON and (check := inventory.check_of(action)) is not None:
            found[name] = check
    return found


def inputs_of(command: str) -> list[str]:
    """The options of `command` that name files it reads."""
    return [option for option, check in options(command).items() if check.kind == "file"]


def inputs(command: str | None, args) -> list[str]:
    """The files a command was given to read (its file options): what an error names when it has
    no file of its own (running out of memory)."""
    return [path for option in (inputs_of(command) if command in COMMANDS else []) for path in _given(args, option)]


def _given(args, option: str) -> list[str]:
    """The values `args` holds for `option`: its one value, or each of a list; none where absent."""
    value = getattr(args, option.lstrip("-").replace("-", "_"), None)
    return [str(v) for v in (value if isinstance(value, list) else [value]) if v]


def paths(command: str | None, args) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """Every path this invocation writes and reads, known before any work: (outputs, inputs), each
    (what names it, the path, its kind). From the inventory's options; the paths inside its JSON
    options, where the schema marks them (`aiayn.study.config.paths_in`); and what its library
    function derives from other options or defaults (`aiayn.inventory.DERIVED`)."""

    from aiayn.study.config import paths_in

    kinds = {"output": "file", "output folder": "folder", "output appended": "appended"}
    outputs, inputs = [], []
    checks = options(command) if command in COMMANDS else {}
    for option, check in {**checks, **inventory.COMMON}.items():
        for given in _given(args, option):
            if check.kind in kinds:
                outputs.append((option, given, kinds[check.kind]))
            elif check.kind in ("file", "folder", "optional file", "run folder"):
                inputs.append((option, given, check.kind))
                inputs += [(f"{option} (a file in it)", p, "file") for p in files_read(given, check.reads)]
            elif check.kind in ("settings", "settings list"):
                with contextlib.suppress(ValueError):  # JSON the command itself refuses, naming the option
                    inputs += [
                        (option + at, p, "file") for at, p in paths_in(check.what, parse_json(given, finite=False))
                    ]
    more_outputs, more_inputs = [], []
    if command in inventory.DERIVED:
        import inspect

        module, _, name = inventory.DERIVED[command].rpartition(".")
        derive = getattr(importlib.import_module(module), name)
        more_outputs, more_inputs = derive(**{p: getattr(args, p) for p in inspect.signature(derive).parameters})
    return outputs + more_outputs, inputs + more_inputs


def files_read(folder: str, names: str) -> list[str]:
    """The files under a run folder whose names match `names` (the inventory's `reads`): read by the
    command as its inputs are, so that no output of it may be one."""
    if not names or not os.path.isdir(folder):
        return []
    pattern = re.compile(names)
    return [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if pattern.fullmatch(f)]


def guard(command: str | None, args) -> None:
    """Every output of this invocation against its inputs, its other outputs and what is at its path,
    before any work (`aiayn.io.guard_outputs`)."""
    from aiayn.io import guard_outputs

    outputs, inputs = paths(command, args)
    for option, path, kind in inputs:
        if kind in ("folder", "run folder") and os.path.lexists(path) and not os.path.isdir(path):
            raise UserError(f"{option} {path}: not a folder, where a folder is meant; give the folder's path")
    runs = [(option, path) for option, path, kind in inputs if kind == "run folder"]  # each written in, as outputs
    for n, (option, path) in enumerate(runs):
        if other := next((f"{o} {p}" for o, p in runs[n + 1 :] if os.path.realpath(p) == os.path.realpath(path)), 0):
            raise UserError(f"{option} {path} and {other} are one folder: give each its own")
    guard_outputs(outputs, inputs)


def costs_file(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """AIAYN_COSTS, checked before the command works: a new file, or one of cost records (the first
    line one) that the command's record is appended to; anything else is refused, never appended to."""
    path = environ.get("AIAYN_COSTS")
    if not path or not os.path.lexists(path) or (os.path.isfile(path) and os.path.getsize(path) == 0):
        return path
    try:
        with open(path, encoding="utf-8") as f:
            first = parse_json(f.readline(), finite=False)
        if isinstance(first, dict) and "command" in first and "wall_s" in first:
            return path
    except (OSError, ValueError):
        pass
    raise UserError(f"AIAYN_COSTS={path}: not a file of cost records (the JSON lines a command appends there); "
                    "name a new file, or unset it")  # fmt: skip


def record_cost(command: str | None, argv: list[str], started: float, code) -> None:
    """With AIAYN_COSTS=FILE in the environment (the rehearsal of the study sets it), what this
    command cost, appended to FILE as a JSON line: its wall and CPU seconds, its peak resident
    memory in MiB (`max_rss_mib`, the larger of its own and its waited-for children's `ru_maxrss`;
    Slurm's `--mem` counts in the same unit) and the bytes it wrote (this process and those children)."""
    with contextlib.suppress(UserError):  # (a file that is not cost records was refused at the start)
        if path := costs_file():
            _append_cost(path, command, argv, started=started, code=code)


def _append_cost(path: str, command: str | None, argv: list[str], *, started: float, code) -> None:
    import resource
    import time

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    try:
        io = dict(line.split(": ", 1) for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:  # not Linux
        io = {}
    record = {
        "command": command,
        "argv": argv,
        "cwd": os.getcwd(),
        "exit": code,
        "wall_s": round(time.time() - started, 3),
        "cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
        "max_rss_mib": round(max(own.ru_maxrss, children.ru_maxrss) / 1024, 1),  # ru_maxrss: KiB on Linux
        "write_bytes": int(io.get("write_bytes", 0)),
    }
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def main(argv: list[str] | None = None, *, process: bool = False) -> int:
    """Run one command; its exit code. `process`: the command is the whole process (`python -m
    aiayn`): once it has ended and said how, a late Ctrl-C or stop signal (a second one, on its way
    out or in an exit handler) changes nothing."""
    import time

    started = time.time()
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    code = None
    if sys.stdout is None:  # its file descriptor closed (`>&-`): what the command says would go nowhere
        with contextlib.suppress(OSError, AttributeError):
            print(f"{_prog(command)}: error: {STDOUT} is closed; give it a file (> FILE, "
                  "> /dev/null) or the terminal", file=sys.stderr, flush=True)  # fmt: skip
        return EXIT_USER
    if getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # a file name's stray byte escaped, as on stderr
    wrapped = sys.stdout is sys.__stdout__
    if wrapped:
        sys.stdout = _Stdout(sys.stdout)
    if not process:
        take_stop()  # one command's stop is not the next one's (the tests run commands in one process)
    try:
        try:
            code = _main(argv, command)
            if process:
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_IGN)
        except SystemExit:  # argparse's --help and usage errors: their text flushed here too
            if wrapped:
                failed = _flushed(command)
                if failed is not None:
                    raise SystemExit(failed) from None
            raise
        if wrapped:  # what is still buffered fails here, not at exit where Python would only warn
            failed = _flushed(command)
            code = code if failed is None else failed
        return code
    finally:
        if wrapped:
            sys.stdout = sys.stdout.stream
        record_cost(command, argv, started, code)


def _flushed(command: str | None) -> int | None:
    """Flush stdout: None, or the exit code of its failure (`_stdout_failed`)."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        return _stdout_failed(exc, command)
    return None


def _prog(command: str | None) -> str:
    """Who says a failure: `aiayn <command>`, or `aiayn` before a command is named (`--version`)."""
    return f"aiayn {command}" if command else "aiayn"


def _stdout_failed(exc: OSError, command: str | None) -> int:
    """A write to stdout failed: a reader gone ends quietly (EXIT_PIPE); anything else (a full
    disk under `> file`) is one line naming standard output."""
    if isinstance(exc, BrokenPipeError):
        return _stdout_gone()
    said = explain(exc, [])
    with contextlib.suppress(OSError):
        print(f"{_prog(command)}: error: {said[0]}", file=sys.stderr, flush=True)
    with contextlib.suppress(OSError, ValueError):  # nothing more is written to it at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
    return said[1]


def _main(argv: list[str], command: str | None) -> int:
    if threading.current_thread() is threading.main_thread():  # SIGTERM, SIGHUP: one line, writes cleaned up
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, errors.stop_signal)
    args = None
    with contextlib.ExitStack() as logged:
        terminal, logged_to = None, False
        try:
            with errors.stoppable():  # a stop swallowed on its way is raised again (aiayn.errors)
                thread_policy()  # before torch is imported
                costs_file()
                args = build_parser(command if command in COMMANDS else None).parse_args(argv)
                guard(command, args)
                if args.log_to:
                    terminal, logged_to = logged.enter_context(log_to(args.log_to)), True
                result = importlib.import_module(args._module).run(args)
                if (signum := pending_stop()) is not None:  # its Stopped swallowed for good: still stopped
                    raise Stopped(signum)
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.split(".")[0] == "aiayn":
                raise
            top = exc.name.split(".")[0]
            said = (
                f"needs the Python package {DISTRIBUTIONS.get(top, top)!r}, which this environment lacks; install "
                "the project (pip install -e .) or use the rule's envs/ file",
                EXIT_USER,
            )
        except (Exception, KeyboardInterrupt, Stopped) as exc:
            logged.enter_context(_uninterrupted())  # a second Ctrl-C while the failure is said
            if isinstance(exc, BrokenPipeError) and exc.filename == STDOUT:
                return _stdout_gone()
            said = explain(exc, inputs(command, args) if args is not None else [])
            if said is None:  # a bug of ours: its traceback is what to report
                raise
        else:
            return int(result or 0)
        line = one_line(f"{_prog(command)}: error: {said[0]}")
        with contextlib.suppress(OSError):  # stderr may be a log on the full disk that failed the command
            end_lines()
            print(line, file=sys.stderr, flush=True)
        if terminal is None and args is not None and args.log_to and not logged_to:  # refused before log_to
            with contextlib.suppress(OSError):  # ...and stderr is the log already (a rule's `2>> {log}`)
                log = os.stat(args.log_to)
                if os.path.samestat(os.fstat(2), log) and not os.path.samestat(os.fstat(1), log):
                    terminal = sys.stdout
        if terminal is not None:  # stderr is the log: the terminal says it too
            print(f"{line} (log: {args.log_to})", file=terminal, flush=True)
        return said[1]


@contextlib.contextmanager
def _uninterrupted():
    """Ctrl-C ignored while the command's one line is said (a second one, or the group's after the
    child's, would end it in a traceback); as it was after."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        yield
    finally:
        if main and before is not None:  # (None: a handler not set from Python, left as ignored)
            signal.signal(signal.SIGINT, before)
