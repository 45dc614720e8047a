"""`python -m aiayn`: every option of every command explains itself; --version; the small things a
newcomer reads (table footers, the study line, why cost and MFU are blank, the figure legend,
vocabularies smaller than asked)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from conftest import ROOT

import aiayn
from aiayn.cli import COMMANDS, build_parser, main
from aiayn.report import figures, tables
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
    probe = (
        "import contextlib, io, sys\n"
        "from aiayn.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main([sys.argv[1], '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(*sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    loaded = {}
    for name in COMMANDS:
        run = subprocess.run([sys.executable, "-c", probe, name], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        loaded[name] = run.stdout.split()
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
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"aiayn {aiayn.__version__}"
    run = subprocess.run([sys.executable, "-m", "aiayn", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == f"aiayn {aiayn.__version__}"


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
    md = tables.markdown_document(2, [row()], study)
    lines = md.splitlines()
    assert lines[2] == study and lines[-1] == f"Written by aiayn {aiayn.__version__}."
    assert "CPU runs (hardware CPU) leave cost_flops_paper_formula and mfu blank" in md
    gpu = tables.markdown_document(2, [row(gpu="H100", mfu=0.4)])
    assert "CPU runs" not in gpu and "No peak FLOP/s" not in gpu
    odd = tables.markdown_document(2, [row(gpu="Quadro X9")])
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
                        "tgt_tokens_per_update": 10, "src_tokens_per_update": 10})  # fmt: skip
        records.append({"step": step, "dev_nll": 1.0, "dev_ppl": 2.7, "dev_loss": 1.0})
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    saved = {}
    monkeypatch.setattr(figures, "save", lambda fig, out: saved.setdefault("fig", fig))
    figures.learning_curves(metrics, tmp_path / "c.png", "t")
    legend = saved["fig"].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["train loss (label-smoothed)", "dev perplexity"]


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
