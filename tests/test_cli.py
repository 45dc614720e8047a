"""`python -m aiayn`: every option of every command explains itself; --version; the small things a
newcomer reads (table footers, the study line, why cost and MFU are blank, the figure legend,
vocabularies smaller than asked)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

import aiayn
from aiayn.cli import COMMANDS, THREAD_VARIABLES, build_parser, main, thread_policy
from aiayn.errors import UserError
from aiayn.report import figures, notes
from aiayn.report.format import markdown_of
from aiayn.study.grid import sources_line


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_has_help(command):
    missing = [
        a.option_strings[0] if a.option_strings else a.dest
        for a in subparser(command)._actions
        if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()
    ]
    assert not missing, f"aiayn {command}: options without help: {missing}"


def test_every_command_prints_help_naming_each_option(capsys):
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            main([command, "--help"])
        assert exit_.value.code == 0
        text = capsys.readouterr().out
        for action in subparser(command)._actions:
            for option in action.option_strings:
                assert option in text, (command, option)


HEAVY = ("torch", "pandas", "matplotlib", "transformers", "ctranslate2")  # seconds to import, each


def test_every_commands_help_imports_no_heavy_package():
    """`python -m aiayn <command> --help` answers at once: the commands import their library (torch,
    plotting, ...) when they run, not to print their options (train --help once took 9-16 s)."""
    # one fresh Python answers every command's --help in turn and says which heavy packages each
    # one loaded first (a package a command loads is named at that command)
    probe = (
        "import contextlib, io, sys\n"
        "from aiayn.cli import main\n"
        "for name in sys.argv[1:]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main([name, '--help'])\n"
        "        except SystemExit:\n"
        "            pass\n"
        f"    print(name, *sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe, *COMMANDS], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    loaded = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines()}
    assert list(loaded) == list(COMMANDS), run.stdout
    assert {name: mods for name, mods in loaded.items() if mods} == {}


def test_options_are_typed_whole():
    """`figures --lr` was an image path; renamed --lr-plot, and no prefix of it is accepted."""
    options = [o for a in subparser("figures")._actions for o in a.option_strings]
    assert "--lr-plot" in options and "--lr" not in options
    with pytest.raises(SystemExit) as exit_:
        build_parser("figures").parse_args(["figures", "--lr", "x.png"])
    assert exit_.value.code == 2


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"aiayn {aiayn.described()}"
    run = subprocess.run([sys.executable, "-m", "aiayn", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == f"aiayn {aiayn.described()}"
    assert aiayn.described().startswith(aiayn.__version__)


def test_the_version_names_the_commit_of_a_checkout(tmp_path):
    """From a git checkout of aiayn the version says its commit (and -dirty with changed tracked
    files); from a copy outside git, or inside another project's repository, the version alone."""
    if not shutil.which("git"):
        pytest.skip("no git on this machine")

    def version(root) -> str:
        env = {**os.environ, "PYTHONPATH": str(root / "src")}
        probe = "import aiayn; print(aiayn.described())"
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout.strip()

    def git(*args, cwd):
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    repo = tmp_path / "checkout"
    (repo / "src/aiayn").mkdir(parents=True)
    shutil.copy(Path(aiayn.__file__), repo / "src/aiayn/__init__.py")
    assert version(repo) == aiayn.__version__  # not a checkout (yet)
    git("init", "-q", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x", cwd=repo)
    sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=repo, capture_output=True, text=True)
    assert version(repo) == f"{aiayn.__version__} (git {sha.stdout.strip()})"
    with (repo / "src/aiayn/__init__.py").open("a") as f:
        f.write("\n# a local change\n")
    assert version(repo) == f"{aiayn.__version__} (git {sha.stdout.strip()}-dirty)"
    other = repo / "vendor"  # aiayn copied into another project's repository
    (other / "src/aiayn").mkdir(parents=True)
    shutil.copy(Path(aiayn.__file__), other / "src/aiayn/__init__.py")
    assert version(other) == aiayn.__version__


def test_the_version_is_written_once():
    """pyproject.toml takes it from aiayn.__version__ (dynamic), so the two cannot disagree."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "aiayn.__version__"' in pyproject
    assert "\nversion =" not in pyproject.split("[tool.setuptools.dynamic]")[0]


def row(**over) -> dict:
    base = {
        "experiment": "base",
        "status": "done",
        "bleu": 27.0,
        "gpu": "cpu",
        "mfu": None,
        "sacrebleu_signature": None,
    }
    return {**base, **over}


def test_tables_carry_the_study_line_the_version_and_why_cells_are_blank():
    study = sources_line(["profiles/demo/study.yaml"], replaced=True)
    assert study == "Study: `profiles/demo/study.yaml`, which replaces `config.yaml` in this run."
    md = markdown_of(notes.document(2, [row()], study=study))
    lines = md.splitlines()
    assert lines[2] == study and lines[-1] == f"Written by aiayn {aiayn.described()}."
    assert "CPU runs (hardware CPU) leave cost_flops_paper_formula and mfu blank" in md
    gpu = markdown_of(notes.document(2, [row(gpu="H100", mfu=0.4)]))
    assert "CPU runs" not in gpu and "No peak FLOP/s" not in gpu
    odd = markdown_of(notes.document(2, [row(gpu="Quadro X9")]))
    assert "No peak FLOP/s is known for Quadro X9" in odd
    assert sources_line([], replaced=False) == "Study: `config.yaml`."
    assert sources_line(["site.yaml"], replaced=False) == "Study: `config.yaml`, extended by `site.yaml`."


def test_learning_curves_legend_names_the_dev_line(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.jsonl"
    records = [
        {
            "event": "start",
            "step": 0,
            "wall": 0.0,
            "world_size": 1,
            "params": 1,
            "device_name": "cpu",
            "precision": "fp32",
        }
    ]
    for step in (10, 20):
        records.append({"step": step, "loss": 3.0 / step, "lr": 1e-3, "tgt_tokens_per_s": 100.0, "wall": step * 1.0,
                        "tgt_tokens_per_update": 10, "src_tokens_per_update": 10, "flops_per_update": 1.0})  # fmt: skip
        records.append({"step": step, "dev_nll": 1.0, "dev_ppl": 2.7, "dev_loss": 1.0})
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    saved = {}
    monkeypatch.setattr(figures, "save", lambda fig, out: saved.setdefault("fig", fig))
    figures.learning_curves(metrics, tmp_path / "c.png", "t")
    legend = saved["fig"].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["train loss (label-smoothed)", "dev perplexity"]


def test_the_learning_rate_figure_shows_the_warmup_and_the_attention_maps_say_their_axes(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics.jsonl"
    logged = [{"step": s, "loss": 1.0, "lr": 0.1, "tgt_tokens_per_s": 1.0, "wall": 1.0, "tgt_tokens_per_update": 1,
               "src_tokens_per_update": 1, "flops_per_update": 1.0} for s in (50, 100)]  # fmt: skip
    metrics.write_text("".join(json.dumps(r) + "\n" for r in logged))
    settings = {"model": {"d_model": 64}, "train": {"steps": 120, "warmup_steps": 40, "lr_scale": 2.0}}
    saved = []
    monkeypatch.setattr(figures, "save", lambda fig, out: saved.append(fig))
    figures.learning_rate(metrics, tmp_path / "lr.png", "t", settings=settings)
    curve, _, dots = saved[0].axes[0].get_lines()  # the schedule, the end of warmup, the logged rates
    x, y = list(curve.get_xdata()), list(curve.get_ydata())
    assert x[0] == 1 and x[-1] == 120 and max(range(len(y)), key=y.__getitem__) == 39  # the peak: update 40
    assert y[39] == pytest.approx(2.0 * 64**-0.5 * 40**-0.5) and y[0] == pytest.approx(y[39] / 40)
    assert list(dots.get_xdata()) == [50, 100]
    torch = pytest.importorskip("torch")
    figures.attention_maps(torch.full((2, 3, 3), 1 / 3), ["a", "b", "</s>"], tmp_path / "att.png", "t")
    fig = saved[1]
    heads, bar = fig.axes[:2], fig.axes[-1]
    assert heads[0].get_ylabel() == "attending (query)" and heads[1].get_xlabel() == "attended to (key)"
    assert bar.get_ylabel() == "attention weight"


def test_a_vocabulary_smaller_than_asked_says_why(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("(S (NP XX )NP )S\n" * 50)
    out = tmp_path / "spm.model"
    settings = json.dumps({"model_type": "bpe", "size": 300, "shared": True})
    assert main(["vocab", "--vocab", settings, "--train-src", str(text), "--train-tgt", str(text),
                 "--out-src", str(out), "--out-tgt", str(tmp_path / "spm2.model")]) == 0  # fmt: skip
    log = capsys.readouterr().out
    assert "not the 300 asked" in log and "only 5 distinct words" in log
    info_path = tmp_path / "vocab.json"
    assert main(["vocab-info", "--vocab", settings, "--spm-src", str(out), "--spm-tgt", str(tmp_path / "spm2.model"),
                 "--train-src", str(text), "--train-tgt", str(text), "--out", str(info_path)]) == 0  # fmt: skip
    info = json.loads(info_path.read_text())
    assert info["target"]["asked"] == 300 and info["target"]["pieces"] < 300
    assert "5 distinct words" in info["target"]["reason"] and info["target"]["reason"] in log


# -- the thread policy and --log-to: every command, before its library is imported ------------------------
def test_the_thread_policy_waits_passively_and_shares_a_jobs_threads_among_its_processes():
    env = {}
    thread_policy(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "8"}  # the user's own choice stays
    thread_policy(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "8"}
    for threads, processes, share in (("8", "4", "2"), ("8", "3", "2"), ("2", "4", "1"), ("8", "1", "8")):
        env = {"OMP_NUM_THREADS": threads, "LOCAL_WORLD_SIZE": processes}
        thread_policy(env)
        assert env["OMP_NUM_THREADS"] == share, (threads, processes)
    env = {"AIAYN_THREAD_POLICY": "off", "OMP_NUM_THREADS": "8", "LOCAL_WORLD_SIZE": "4"}
    thread_policy(env)
    assert env == {"AIAYN_THREAD_POLICY": "off", "OMP_NUM_THREADS": "8", "LOCAL_WORLD_SIZE": "4"}


@pytest.mark.parametrize("name", sorted(THREAD_VARIABLES))
def test_a_thread_variable_openmp_cannot_read_is_one_line_naming_it(name, monkeypatch, capsys):
    for value in ("abc", "0", "-1", "4.5"):
        with pytest.raises(UserError, match=f"^{name}='{value}' is not "):
            thread_policy({name: value})
    monkeypatch.setenv(name, "abc")
    assert main(["tables", "--help"]) == 2
    said = f"aiayn tables: error: {name}='abc' is not {THREAD_VARIABLES[name][1]}; set it so, or unset it"
    assert capsys.readouterr().err.strip() == said
    for good in {"OMP_NUM_THREADS": ("4", "4,2"), "OMP_WAIT_POLICY": ("passive", "ACTIVE")}.get(name, ()):
        thread_policy({name: good})


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_sets_the_policy_before_it_imports_torch(command, monkeypatch):
    """main() sets the policy before parsing (so before any command's module or torch is imported):
    shown with each command's --help, which imports its module and nothing heavy."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_torch_computes_with_the_policys_threads(tmp_path):
    """torch reads the variables the policy sets: a process of a 2-process torchrun job given 2
    threads computes with 1."""
    code = "from aiayn.cli import thread_policy; thread_policy(); import torch; print(torch.get_num_threads())"
    env = dict(os.environ, OMP_NUM_THREADS="2", LOCAL_WORLD_SIZE="2", PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["1"], done.stderr


def test_a_logged_training_says_its_progress_on_the_terminal_and_everything_in_its_log(tmp_path):
    """`--log-to FILE` (the train and translate rules): each progress line on stdout after the log's
    name, all of them in the log, stderr in the log only; the start line names the threads."""
    import toy

    log = tmp_path / "logs" / "train" / "toy.log"
    log.parent.mkdir(parents=True)
    settings = toy.settings(steps=4, log_interval=2, checkpoint_interval=4)
    args = toy.train_command(tmp_path, settings, "--log-to", str(log))
    env = {k: v for k, v in toy.env_for_subprocess().items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, log.read_text()
    assert done.stderr == ""
    said, logged = done.stdout.splitlines(), log.read_text().splitlines()
    assert said and all(line.startswith("train/toy: ") for line in said), said
    shown = [line.removeprefix("train/toy: ") for line in said]
    assert shown == [line for line in logged if line in shown], "the terminal's lines are not the log's, in order"
    assert any(line.startswith("train/toy: step 2/4 loss ") for line in said), said
    assert "1 CPU thread(s) per process, OMP_WAIT_POLICY PASSIVE" in said[0]
    assert set(logged) >= {line.removeprefix("train/toy: ") for line in said}


def test_processes_logging_to_one_file_leave_whole_lines(tmp_path):
    """The processes of a training job append to one log (`--log-to`): each line arrives whole, never
    cut by another process's, on each of the log's three ways in (stdout, stderr, a command's
    details), long lines too (`print` writes a line and its newline apart, and the stop lines of two
    ranks once ran together into one; a line-buffered file writes a line past 8 KiB in two)."""
    import toy

    log = tmp_path / "job.log"
    code = (  # both ranks' lines at the same moment, as after the barrier of a stop
        "import sys, time\nfrom aiayn import cli, commands\nwith cli.log_to(sys.argv[1]):\n"
        "    while time.time() < float(sys.argv[3]):\n        pass\n"
        "    for i in range(3000):\n"
        "        line = f'rank {sys.argv[2]} line {i}' + ('.' * 9000 if i % 50 == 0 else '')\n"
        "        [print(line, flush=True), print(line, file=sys.stderr), commands.say_to_log(line)][0]\n"
    )
    start = str(time.time() + 1.5)
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(log), str(r), start], env=toy.env_for_subprocess(),
                              stdout=subprocess.DEVNULL) for r in (0, 1)]  # fmt: skip
    assert [rank.wait(timeout=120) for rank in ranks] == [0, 0]
    want = sorted(f"rank {r} line {i}" + ("." * 9000 if i % 50 == 0 else "") for r in (0, 1) for i in range(3000)) * 3
    got = log.read_text().splitlines()
    assert sorted(got) == sorted(want), [line[:60] for line in got if line not in set(want)][:5]


FAKE_COMMAND = """
import sys
from aiayn.errors import UserError
def add_arguments(add):
    pass
def run(args):
    print("progress 1", flush=True)
    name = b"caf\\xe9".decode("utf-8", "surrogateescape")
    print("a name UTF-8 cannot hold: " + name, file=sys.stderr)
    print("on stdout too: " + name)
    sys.stderr.write("loading 50%")  # a partial line on stderr, as a progress meter writes it
    sys.stdout.writelines(["step 2 ", "of 3 ... "])  # and one on stdout
    raise UserError("fake.txt: damaged; rerun its step")
"""


@pytest.mark.parametrize("shell", ["> term 2>> job.log", ">> job.log", "> job.log"])
def test_a_logged_failure_ends_the_lines_before_it_and_is_said_once(tmp_path, shell):
    """Under `--log-to` (the rule's way, `2>> {log}`, or stdout the log itself, appended or not):
    every line reaches the log once and whole, a line left without its newline is ended before the
    failure's one line, which starts a line of its own (on the terminal after the progress it
    follows), and text UTF-8 cannot hold is escaped, in the log and on the terminal, never the
    command's end in a traceback nor the terminal's."""
    import toy

    (tmp_path / "fakecmd.py").write_text(FAKE_COMMAND)
    code = "import sys\nfrom aiayn import cli\ncli.COMMANDS['fake'] = ('fakecmd', '')\nsys.exit(cli.main(sys.argv[1:]))"
    # a terminal of UTF-8 that refuses what it cannot encode (the locale en_US.UTF-8's way)
    env = {**toy.env_for_subprocess(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    env["PYTHONIOENCODING"] = "utf-8"
    line = "aiayn fake: error: fake.txt: damaged; rerun its step"
    done = subprocess.run(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} fake --log-to job.log {shell}",
                          shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stderr == "", done.stderr
    logged = (tmp_path / "job.log").read_text().splitlines()
    assert sorted(logged) == sorted(["progress 1", "loading 50%", "step 2 of 3 ... ", line, "on stdout too: caf\\udce9",
                                     "a name UTF-8 cannot hold: caf\\udce9"]), logged  # fmt: skip
    assert logged[-1] == line, logged
    if shell.startswith("> term"):
        said = (tmp_path / "term").read_text().splitlines()
        want = ["job: progress 1", "job: on stdout too: caf\\udce9", "job: step 2 of 3 ... ", f"{line} (log: job.log)"]
        assert said == want, said


def test_a_refusal_before_the_log_is_opened_is_said_on_the_terminal_too(tmp_path):
    """A rule runs a command with `--log-to {log} 2>> {log}`: a refusal before the command opens its
    log (two outputs at one path, aiayn.cli.guard) is in the log, and on the terminal with its name."""
    import toy

    outs = "--out-md t.md --out-csv t.md --out-html t.html --figure t.png"
    done = subprocess.run(f"{shlex.quote(sys.executable)} -m aiayn table1 --settings '{{}}' {outs} --log-to job.log "
                          "> term 2>> job.log", shell=True, cwd=tmp_path, env=toy.env_for_subprocess(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    logged = (tmp_path / "job.log").read_text().splitlines()
    assert done.returncode == 2 and len(logged) == 1 and "are one place" in logged[0], logged
    assert (tmp_path / "term").read_text().splitlines() == [f"{logged[0]} (log: job.log)"]


def test_every_train_option_passes_through_torchrun():
    """torchrun parses the whole command line, ours included, and refuses an option of ours that
    abbreviates one of its own (`--log` for its --log-dir / --logs-specs): every option of `train`
    must reach it untouched."""
    from torch.distributed.run import get_args_parser

    ours = [o for a in subparser("train")._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    argv = [x for o in ours for x in (o, "1")]
    parsed = get_args_parser().parse_args(["--nnodes", "1", "--nproc-per-node", "2", "-m", "aiayn", "train", *argv])
    assert parsed.training_script == "aiayn" and parsed.training_script_args == ["train", *argv]


def passed_on(command: str) -> list[tuple[str, str, object]]:
    """(option dest, library parameter, the library function) of every option `command`'s run()
    passes to its one library call as `parameter=args.<dest>`, read from the command's source."""
    import ast
    import importlib

    module = importlib.import_module(COMMANDS[command][0])
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiayn.") and node.level == 0:
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    found = []
    for call in (n for n in ast.walk(run) if isinstance(n, ast.Call)):
        parts = ast.unparse(call.func).split(".")
        if parts[0] not in imported or imported[parts[0]][0] == "aiayn.commands":
            continue
        target = importlib.import_module(imported[parts[0]][0])
        for name in [imported[parts[0]][1], *parts[1:]]:
            target = getattr(target, name, None) or importlib.import_module(f"{target.__name__}.{name}")
        for kw in call.keywords:
            value = ast.unparse(kw.value)
            if value.startswith("args.") and value.count(".") == 1:
                found.append((value[5:], kw.arg, target))
    return found


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_option_passed_to_the_library_has_the_librarys_default(command):
    """One home per default: an option a command passes on to its library function defaults to that
    function's own default (aiayn.commands.library_default), so running the function by hand and
    running the command do the same thing."""
    import inspect

    parser = build_parser(command)._subparsers._group_actions[0].choices[command]
    defaults = {a.dest: a.default for a in parser._actions}
    differ = {}
    for dest, parameter, function in passed_on(command):
        theirs = inspect.signature(function).parameters[parameter].default
        if theirs is not inspect.Parameter.empty and defaults.get(dest) != theirs:
            differ[dest] = (defaults.get(dest), f"{function.__qualname__}({parameter}={theirs!r})")
    assert not differ, f"{command}: option defaults written apart from the library's: {differ}"


def test_every_exit_code_is_in_the_troubleshooting_table():
    """Each EXIT_* code the package defines (and 128 + the signals a command stops on) is a row of
    docs/troubleshooting.md's table of exit codes, which says what to do."""
    import ast
    import signal

    codes = {}
    for path in (ROOT / "src" / "aiayn").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("EXIT_") and node.value.value:
                        codes[target.id] = node.value.value
    codes.update(SIGTERM=128 + signal.SIGTERM, SIGHUP=128 + signal.SIGHUP)
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    rows = {int(n) for cells in re.findall(r"^\| ([\d, ]+) \|", page, re.M) for n in cells.split(",")}
    assert len(codes) >= 6 and {k: v for k, v in codes.items() if v not in rows} == {}


@pytest.mark.parametrize("option", ["--decode", "--settings"])
@pytest.mark.parametrize("text, why", [('{"beam": 4, "beam": 5}', "the key 'beam' is given twice"),
                                       ("[" * 20000 + "]" * 20000, "nested too deeply")])  # fmt: skip
def test_a_json_option_with_a_key_given_twice_or_nested_too_deeply_is_refused(option, text, why, capsys):
    """As the YAML files refuse a key given twice: JSON would keep the last value silently. A value
    nested past Python's recursion limit was a RecursionError's traceback."""
    command = "translate" if option == "--decode" else "table1"
    argv = {"translate": ["--model", "m", "--input", "i", "--spm-src", "a", "--spm-tgt", "b", "--out", "o"],
            "table1": ["--out-md", "t.md", "--out-csv", "t.csv", "--out-html", "t.html", "--figure", "t.png"],
            }[command]  # fmt: skip
    assert main([command, *argv, option, text]) == 2
    err = capsys.readouterr().err
    assert f"{option} is not valid JSON: {why}" in err and "Traceback" not in err


def test_json_is_read_by_one_function():
    """Every JSON the package reads goes through aiayn.io.parse_json, whose every failure is a ValueError
    its callers name the file or option in: no json.loads or json.load elsewhere."""
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "src/aiayn").rglob("*.py")
             if re.search(r"\bjson\.loads?\(", p.read_text(encoding="utf-8"))}  # fmt: skip
    assert found == {"src/aiayn/io.py"}, found


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": -Infinity}', '{"a": 1e999}', "[-1e400]"])
def test_the_json_reader_refuses_what_is_not_finite(text):
    from aiayn.io import parse_json

    with pytest.raises(ValueError, match="not a (finite )?number"):
        parse_json(text)
    assert parse_json(text, finite=False) is not None  # (a diverged run's metrics say NaN)


def test_a_json_file_with_a_key_given_twice_is_refused(tmp_path):
    """The one JSON reader (aiayn.io.parse_json) refuses it in every file too: experiment.json with
    "steps" twice trained to the last one's count."""
    from aiayn.study import resolve

    path = tmp_path / "experiment.json"
    path.write_text('{"name": "x", "train": {"steps": 200, "steps": 5}}')
    with pytest.raises(UserError, match=r"experiment.json is not valid JSON: the key 'steps' is given twice"):
        resolve.read(path)


AIAYN = [sys.executable, "-m", "aiayn"]
PRINTING = {  # commands whose output is on stdout, long enough to meet a reader gone
    "help": ["tables", "--help"],
    "top help": ["--help"],
    "params": ["params", "--config", str(ROOT / "config.yaml")],
}


@pytest.mark.parametrize("what", sorted(PRINTING))
def test_a_reader_gone_ends_the_command_quietly(what):
    """`python -m aiayn params | head -1`: the reader closes the pipe; the command stops as Unix
    tools do, with SIGPIPE's status (141) and not a word on stderr."""
    proc = subprocess.Popen([*AIAYN, *PRINTING[what]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # before the command has written a byte: it starts in seconds
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


@pytest.mark.parametrize("what", sorted(PRINTING))
def test_standard_output_on_a_full_disk_is_one_line_naming_it(what):
    """`> /dev/full`: one line naming standard output, exit 2 (argparse alone drops a help text it
    could not write and exits 0); so is `>&-`, a standard output closed (Python's print writes nowhere)."""
    with open("/dev/full", "w") as full:
        run = subprocess.run([*AIAYN, *PRINTING[what]], stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(err) == 1, run.stderr
    assert err[0].split(":")[0] in ("aiayn", f"aiayn {PRINTING[what][0]}"), err  # who says it: never "aiayn None"
    assert "standard output: no space left" in err[0], err
    closed = subprocess.run(["sh", "-c", '"$0" "$@" >&-', *AIAYN, *PRINTING[what]], capture_output=True, text=True,
                            cwd=ROOT)  # fmt: skip
    assert closed.returncode == 2 and "error: standard output is closed" in closed.stderr, closed.stderr


def test_what_a_user_may_mistype_or_press_twice_is_said_in_one_line(tmp_path):
    """A --log-to in a folder not made yet is made, as an output's folder is; a URL of another scheme
    and a --checkpoints folder that is not there are refused naming them; a second Ctrl-C while the
    command's one line is said is ignored (it ended in a traceback), the handler as it was after."""
    import signal

    from aiayn import io
    from aiayn.cli import _uninterrupted
    from aiayn.data.download import download
    from aiayn.training.average import average_run

    assert io.appendable(tmp_path / "logs" / "deep" / "r.log").parent.is_dir()
    with pytest.raises(UserError, match="--url ftp://example.org/x.tgz: not an http://, https:// or file:// address"):
        download("ftp://example.org/x.tgz", tmp_path / "x.tgz", "0" * 64)
    with pytest.raises(UserError, match=r"--checkpoints .*nope: not found"):
        average_run(tmp_path / "nope", tmp_path / "avg.pt", k=2, interval=2, final=4)
    before = signal.getsignal(signal.SIGINT)
    with _uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_missing_results_folder_or_an_empty_metrics_file_is_no_table_or_figure(tmp_path):
    from aiayn.report.figures import learning_curves
    from aiayn.report.tables import write_table

    with pytest.raises(UserError, match=r"--results .*nope: not found; give the study's results folder"):
        write_table(2, config=ROOT / "config.yaml", results=tmp_path / "nope", out_md=tmp_path / "t.md")
    (tmp_path / "e.jsonl").touch()
    with pytest.raises(UserError, match=r"e.jsonl: no training records to draw"):
        learning_curves(tmp_path / "e.jsonl", tmp_path / "c.png", "empty")
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".md", ".png")]


def test_an_empty_or_contradictory_json_option_is_named_with_what_to_do(tmp_path):
    from aiayn.commands import evaluation_chain
    from aiayn.data.prepare import prepare_train

    out = dict(out_src=tmp_path / "a", out_tgt=tmp_path / "b", report_path=tmp_path / "r.json")
    with pytest.raises(UserError, match=r"--corpora: no training corpus given \(an empty list\)"):
        prepare_train([], {}, {}, **out)
    with pytest.raises(UserError, match="--cleaning: min_len 20 is above max_len 5: no pair could be kept"):
        prepare_train([{"src": "s", "tgt": "t"}], {}, {"min_len": 20, "max_len": 5}, **out)
    with pytest.raises(UserError, match="--paper-row: unknown key 'tabel'; expected null or an object with table"):
        evaluation_chain('{"tabel": 2}', "--paper-row")
    row = {"table": 2, "preset": "base", "task": "translation", "decode": {}, "average": 5}
    assert evaluation_chain(json.dumps({**row, "name": "base", "pair": ["en", "de"]}), "--paper-row")["table"] == 2
    assert not list(tmp_path.iterdir())


LATE_SIGNAL = """
import atexit, os, signal
def add_arguments(add):
    pass
def run(args):
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a training's stop flag takes Ctrl-C
    atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))  # a second Ctrl-C on the way out
    print("done")
"""


def test_a_ctrl_c_after_the_command_has_ended_changes_nothing(tmp_path):
    """A Ctrl-C that reaches `python -m aiayn` after its command has ended and said so (a second one,
    in an exit handler): the exit code and the output are the command's, no traceback."""
    import toy

    (tmp_path / "latecmd.py").write_text(LATE_SIGNAL)
    code = "import sys\nfrom aiayn import cli\ncli.COMMANDS['late'] = ('latecmd', '')\nsys.exit(cli.main(process=True))"
    env = {**toy.env_for_subprocess(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    done = subprocess.run([sys.executable, "-c", code, "late"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
