"""`python -m aiayn <command>`: one thin entry point per pipeline stage.

Each command parses its arguments and calls one library function. What the user can act on (a bad
config, a missing or damaged file, a full disk or a read-only folder, too little memory, Ctrl-C)
ends with one line on stderr naming the file or key and what to do (`aiayn.errors.explain`),
and exit code 2 (130 for Ctrl-C); only a bug of ours shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from aiayn import described
from aiayn.errors import EXIT_USER, explain

# command -> module defining `add_arguments(parser)` and `run(args)`; imported only when called,
# so a step's environment needs only the packages of its own command.
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
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, with the arguments of `command` (only its module is imported)."""
    parser = argparse.ArgumentParser(prog="python -m aiayn", description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"aiayn {described()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    for name, (module, help_) in COMMANDS.items():
        # allow_abbrev=False: an option is typed whole (`--lr` is not `--lr-plot`)
        cmd = sub.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        if name == command:
            importlib.import_module(module).add_arguments(cmd)
        cmd.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        args = build_parser(command if command in COMMANDS else None).parse_args(argv)
        result = importlib.import_module(args._module).run(args)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "aiayn":
            raise
        print(
            f"aiayn {command}: error: needs the Python package {exc.name.split('.')[0]!r}, which this "
            "environment lacks; install the project (pip install -e .) or use the rule's envs/ file",
            file=sys.stderr,
        )
        return EXIT_USER
    except (Exception, KeyboardInterrupt) as exc:
        said = explain(exc, [a for a in argv if os.path.isfile(a)])
        if said is None:  # a bug of ours: its traceback is what to report
            raise
        print(f"aiayn {command}: error: {said[0]}", file=sys.stderr)
        return said[1]
    return int(result or 0)
