"""Shared helpers: the repository root, the paper config, and Snakemake dry-runs parsed into jobs."""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Run inside a Slurm allocation (an interactive srun), a trainer the tests start would take the
# allocation for its own job and requeue it on a stop (aiayn.training.distributed.requeue): the tests are
# no Slurm job of theirs. Tests that need one set SLURM_JOB_ID themselves.
for _var in ("SLURM_JOB_ID", "SLURM_JOBID"):
    os.environ.pop(_var, None)

# torch on one thread in the tests' own processes and the ones they start, unless you set it: their
# models are tiny, and a second thread costs more than it gives (test_check's bugs and rewrites:
# 41 s on one thread, 89 s on two, alone on 2 cores; the fast tests 7 min 11 s against 9 min 27 s),
# the more so on CI's two cores, which run three Pythons' tests at once. Threads without work
# sleep rather than spin (a `python -m aiayn` sets that itself: aiayn.cli.thread_policy). Set here,
# before anything imports torch, which reads both when it starts; a Snakemake job gets its rule's
# threads from Snakemake whatever this says.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# Every process a test starts runs in a process group of its own, and the whole group ends with
# it: on a timeout, an error, Ctrl-C, or a normal end that left children behind (subprocess.run
# alone kills only the child: a timed-out `snakemake` left its training job running). Installed
# here for every test module (they call subprocess.run); tests/test_processes.py proves it.
_RUN = subprocess.run


def _end_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Every timeout is multiplied by AIAYN_TEST_TIMEOUT_SCALE (default 1): a slow or busy machine can
# give every process of the tests more time at once (docs/development.md, "Tests").
def timeout_scale() -> float:
    text = os.environ.get("AIAYN_TEST_TIMEOUT_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not scale > 0:
        raise pytest.UsageError(f"AIAYN_TEST_TIMEOUT_SCALE={text!r}: expected a number > 0 (say 3)")
    return scale


class GroupTimedOut(subprocess.TimeoutExpired):
    def __str__(self) -> str:
        return (
            f"{super().__str__()} Its whole process group was killed. On a slow or busy machine run this test "
            f"alone, or give every test's processes more time: AIAYN_TEST_TIMEOUT_SCALE=3 (now {timeout_scale():g})."
        )


def run_in_own_group(*popenargs, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """subprocess.run, with the child in a new session (so a new process group) that is killed
    whole when the call returns or raises; a timeout says what to try."""
    if kwargs.get("start_new_session") is False or "preexec_fn" in kwargs or "process_group" in kwargs:
        return _RUN(*popenargs, input=input, capture_output=capture_output, timeout=timeout, check=check, **kwargs)
    kwargs["start_new_session"] = True
    if timeout is not None:
        timeout = timeout * timeout_scale()
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with subprocess.Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _end_group(process.pid)
            process.wait()
            raise GroupTimedOut(exc.cmd, timeout, output=exc.output, stderr=exc.stderr) from None
        except BaseException:
            _end_group(process.pid)
            process.wait()
            raise
        finally:
            _end_group(process.pid)  # what the command left running when it ended
        code = process.poll()
    done = subprocess.CompletedProcess(process.args, code, stdout, stderr)
    if check:
        done.check_returncode()
    return done


subprocess.run = run_in_own_group
SHARED = ROOT.parent / "shared"
# Real public data some tests read (newstest sets, a WMT news slice, the NLTK treebank sample):
# ../shared/data in the project's tree, or the folder AIAYN_TEST_DATA names (docs/development.md, "Tests").
TEST_DATA = Path(os.environ.get("AIAYN_TEST_DATA") or SHARED / "data")


def real_data(*parts: str) -> Path:
    """A file of the real test data, or a skip that says how to lift it."""
    path = TEST_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"{path} is absent: the real public test data is not in a clone; set AIAYN_TEST_DATA to a "
            "folder laid out as docs/development.md, section Tests, describes (which file, from where)"
        )
    return path


@pytest.fixture(scope="session")
def paper_config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def with_treebank(config: dict, path: str = "/data/ptb3") -> dict:
    """A copy of `config` whose parsing datasets name a Penn Treebank (the default config has none)."""
    config = copy.deepcopy(config)
    for ds in config["datasets"].values():
        if ds["task"] == "parsing":
            ds["treebank"] = path
    return config


def snakemake(*args: str, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run Snakemake as a user would (from `cwd`), with a private cache and no user profile."""
    env = dict(os.environ)
    env.pop("SNAKEMAKE_PROFILE", None)
    env.setdefault("XDG_CACHE_HOME", str(Path(os.environ.get("TMPDIR", "/tmp")) / "aiayn-test-cache"))
    cmd = [sys.executable, "-m", "snakemake", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def snakemake_study(folder: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """The project's Snakefile run in `folder` on 2 cores with `args` (targets, --configfile, ...),
    each job that computes with torch on one thread as the demo profile runs them (two small
    trainings side by side on two threads each took half as long again: the tiny parsing study
    70 s against 46 s)."""
    snakefile = str(ROOT / "Snakefile")
    threads = ("--set-threads", "train=1", "check=1", "translate=1")
    return snakemake(*args, "-s", snakefile, "-d", str(folder), "--cores", "2", *threads, timeout=timeout)


def sacrebleu_cli(ref: Path, hyp: Path, *metrics: str) -> str:
    """What sacreBLEU's own command line prints for `hyp` against `ref`: the scores alone (-b), to 6
    digits; of `metrics` (default: BLEU), as a JSON list where there are several."""
    chosen = ["-m", *metrics] if metrics else []
    argv = [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), *chosen, "-b", "-w", "6"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def fresh_clone(folder: Path, copied: tuple[str, ...] = ()) -> Path:
    """`folder` laid out as a fresh clone of the repository (its files by link, no results/), where
    commands run as the README types them: `snakemake --profile profiles/demo` from the root. The
    folders named in `copied` are copies, which a test may edit as a user edits their clone."""
    for name in ("Snakefile", "workflow", "src", "profiles", "examples", "config.yaml", "slurm"):
        if name in copied:
            shutil.copytree(ROOT / name, folder / name, symlinks=True)
        else:
            (folder / name).symlink_to(ROOT / name)
    return folder


def planned_jobs(output: str) -> list[dict]:
    """Jobs of a `snakemake -n -p` run:
    [{"rule": ..., "input": ..., "output": ..., "threads": ..., "resources": {...}, "shell": ...}]
    (Snakemake prints no `threads` line for a job of one thread)."""
    jobs = []
    for block in re.split(r"\n(?=rule \w+:\n)", output):
        head = re.match(r"rule (\w+):\n", block)
        if not head:
            continue
        job = {"rule": head.group(1), "input": "", "output": "", "threads": 1, "resources": {}, "shell": ""}
        for line in block.splitlines()[1:]:
            key, _, value = line.strip().partition(": ")
            if key in ("input", "output", "wildcards"):
                job[key] = value
            elif key == "threads":
                job["threads"] = int(value)
            elif key == "resources":
                job["resources"] = dict(kv.split("=", 1) for kv in value.split(", ") if "=" in kv)
        shell = re.search(r"Shell command: (.*)", block)
        job["shell"] = shell.group(1) if shell else ""
        jobs.append(job)
    return jobs


def job_counts(jobs: list[dict]) -> Counter:
    return Counter(j["rule"] for j in jobs)


# -- the paper study's plan: what its dry-runs must count ------------------------------------------
# Table 2, Table 3's new rows (18 of the paper, 1 ours), Table 4 (parse-semi waits for extra corpora)
N_EXPERIMENTS = 4 + 19 + 1
# the paper study with a treebank configured (the default config has none: the Penn Treebank is licensed)
WITH_TREEBANK = 'datasets={"wsj": {"treebank": "/data/ptb3"}, "wsj-semi": {"treebank": "/data/ptb3"}}'
N_CANDIDATES = 6  # parse-wsj's §6.3 selection on WSJ 22: P_drop 0.1/0.2/0.3 x lr_scale 0.5/1.0
N_TRAINED = N_EXPERIMENTS - 1 + N_CANDIDATES  # parse-wsj takes its best candidate's model
N_TRAINED_AS_TYPED = N_EXPERIMENTS - 1  # the default config, without a treebank: the WMT study


# -- small studies the end-to-end tests run --------------------------------------------------------
def tiny_demo_config() -> dict:
    config = yaml.safe_load((ROOT / "profiles/demo/study.yaml").read_text())
    config["archives"]["demo-pair"]["generate"]["sizes"] = {"train": 1500, "dev": 40, "test": 40}
    config["archives"]["demo-treebank"]["generate"]["sizes"] = {"02": 300, "22": 20, "23": 30}
    for es in config["datasets"]["eng-zil"]["eval_sets"].values():
        es["lines"] = 40
    config["datasets"]["eng-zil"]["vocab"]["size"] = 300
    config["datasets"]["demo-wsj"]["vocab"]["size"] = 200
    config["training"].update(
        steps=24, warmup_steps=10, checkpoint_interval=6, log_interval=6, tokens_per_update=600, max_tokens=600
    )
    config["scoring"] = {"bootstrap_resamples": 50}
    for preset in config["presets"].values():
        preset["model"].update(d_model=32, d_ff=64, h=2, d_k=16, d_v=16)
        preset.pop("train", None)  # the demo parser's longer training: the tiny steps above for all
    config["presets"]["big"]["model"].update(d_model=48, d_ff=96)
    config["results"] = "results"
    return config


def write_corpus(workdir: Path, sizes: dict[str, int]) -> None:
    """The demo's made-up pair as plain files where examples/own-pair.yaml expects them (what
    `python -m aiayn example-corpus` writes)."""
    from aiayn.data import generate

    generate.write_example_corpus(workdir / "data" / "my-pair", 7, sizes, log=lambda _: None)


def squeeze(markdown: str) -> str:
    """A Markdown document with its tables' cells unpadded (`| a | b |`, an empty cell `|  |`), so that
    a test can look for a row as text; the padding is pandas' (tabulate's), not what is tested."""
    out = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            line = "| " + " | ".join(c.strip() for c in cells) + " |"
        out.append(line)
    return "\n".join(out) + "\n"


def flat(text: str) -> str:
    """Text with every run of whitespace one space: prose wrapped to a width (the tables' notes) read
    as the sentences it is."""
    return " ".join(text.split())


# the training process itself on one node, not its torchrun agent (python .../torchrun ... -m aiayn train)
# or srun: torchrun starts each worker as `python -u -m aiayn train ...`. Picked by its argv, element by
# element, with a python as its program: never by a pattern that this step's own command line (bash -c
# "<this script>") also matches, whatever the order of process ids (pgrep -f found the step first once
# ids had wrapped, and it killed itself). Only a worker running in the folder given as $1 (its
# Snakemake working directory) and in this step's network namespace (its node): a training of another
# test, or of another CI leg running beside this one, is never touched.
KILL_WORKER = """
me=$(readlink /proc/self/ns/net)
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$$" ] && continue
  mapfile -d '' argv < "$d/cmdline" 2>/dev/null || continue
  case "${argv[0]##*/}" in python*) ;; *) continue ;; esac
  [ "${argv[1]-}" = -u ] && [ "${argv[2]-}" = -m ] && [ "${argv[3]-}" = aiayn ] && [ "${argv[4]-}" = train ] || continue
  [ "$(readlink "$d/cwd")" = "$1" ] || continue
  [ "$(readlink "$d/ns/net")" = "$me" ] && kill -KILL "$p" && echo "killed $p on $(hostname)"
done; true
"""


def command_options(command: str) -> dict:
    """The argparse actions of `command` by option (a positional argument by its name)."""
    import argparse

    from aiayn.cli import build_parser

    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {(a.option_strings[0] if a.option_strings else a.dest): a for a in sub._actions if a.dest != "help"}
