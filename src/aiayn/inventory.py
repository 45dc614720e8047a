"""Every input of aiayn, each bound to the one check it goes through: the options of every command,
the values a rule puts on a shell line, the environment variables read, the config, and every kind
of file read. tests/test_inventory.py reads the commands' parsers, the rules' shell lines and the
package's source, and fails when an input is missing here; the generated tests (Hypothesis) and the
fault matrix take their cases from this table.

A check is named by what does it:
- `file`: the kind of file read (FILE_KINDS: the reader that refuses a damaged one, in one line
  naming the file; every reader first checks with `aiayn.io.readable` that it is a regular file);
- `folder`: a folder read (`aiayn.io.readable` is not for folders: the reader lists it), and no output may
  lie in it; `run folder`: one the command reads and writes in (a run's checkpoints, the results);
- `optional file`: a file read where it exists, by the function named, which refuses one it cannot read;
- `output`, `output folder`, `output appended`: written through `aiayn.io.atomic_paths`, `atomic_dir`,
  or appended (a log; every byte checked); each checked before any work against the invocation's
  inputs (`file`, `folder`, `run folder`, `optional file`, the paths inside its `settings` that the schema
  marks `x-path`), its other outputs, the files its command derives (`DERIVED`) and
  what is at its path (`aiayn.io.guard_outputs`, called by `aiayn.cli.guard` with `aiayn.cli.paths`);
- `settings`, `settings list`: a JSON object (a list of them) checked against the schema's
  definition of that name (several joined by +; workflow/schemas/config.schema.yaml,
  `aiayn.commands.settings`); `experiment settings`: experiment.json's parts, by `aiayn.study.resolve`;
- `number`: an argparse type with bounds (`aiayn.commands.at_least`, `finite_at_least`);
- `choice`: argparse's choices; `flag`: present or not;
- `text`: a string, checked by the function named.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    kind: str  # file, folder, run folder, output, output folder, output appended, settings, number, choice, flag, text
    what: str = ""  # the file kind, the schema definition, or the dotted path of the function that checks it
    reads: str = ""  # a run folder's: the names (a regex) of the files in it the command reads, inputs as any


def file(kind: str) -> Check:
    return Check("file", kind)


def settings(name: str) -> Check:
    return Check("settings", name)


def text(checker: str) -> Check:
    return Check("text", checker)


OUTPUT, OUTPUT_FOLDER, APPENDED = Check("output"), Check("output folder"), Check("output appended")
NUMBER, CHOICE, FLAG = Check("number"), Check("choice"), Check("flag")

# kind of file -> the reader that checks it whole before it is used
FILE_KINDS = {
    "checkpoint": "aiayn.runtime.checkpoint.load",  # CRC-32 of every record, then its keys
    "encoded corpus": "aiayn.data.binary.read",  # header checksum, SHA-256 of the token arrays
    "sentencepiece model": "aiayn.data.vocab.identity",  # sentencepiece loads it
    "metrics": "aiayn.runtime.metrics.read",  # each line against its kind's schema
    "average record": "aiayn.runtime.records.read",
    "train report": "aiayn.runtime.records.read",
    "score": "aiayn.runtime.records.read_score",
    "selected record": "aiayn.runtime.records.read",
    "experiment settings": "aiayn.study.resolve.read",  # the schema
    "text": "aiayn.runtime.lines.read_lines",  # UTF-8 (gzip checked), split on \n only
    "trees": "aiayn.runtime.lines.read_lines",  # lines, then each tree parsed (EVALB's rules)
    "archive": "aiayn.data.prepare.extract_members",  # tarfile's data filter on every member
    "study config": "aiayn.study.config.load",  # YAML without duplicate keys, then the schema
    "export": "aiayn.evaluation.export.verify_export",  # checksums.sha256 of every file
}

# the library function of a command that gives the paths it reads and writes beyond its options' (defaults,
# files derived from an option's path): its parameters are the command's options, by name (aiayn.cli.paths)
DERIVED = {
    "download": "aiayn.data.download.derived_files",
    "translate": "aiayn.evaluation.translate.derived_files",
    "train": "aiayn.training.train.derived_files",
    "vocab": "aiayn.data.vocab.derived_files",
    "tables": "aiayn.report.tables.derived_files",
}

# the files train reads in its folder of checkpoints (aiayn.runtime.checkpoint: step and resume checkpoints)
STEP_FILES = r"(checkpoint|resume)_\d+\.pt"

# the option every command has
COMMON = {"--log-to": APPENDED}

COMMANDS: dict[str, dict[str, Check]] = {
    "resolve": {"--settings": Check("experiment settings", "aiayn.study.resolve.write"), "--out": OUTPUT},
    "download": {
        "--url": text("aiayn.data.download.download"),  # http(s)/file; a failed transfer is one line
        "--sha256": text("aiayn.data.download.check_sha256"),
        "--out": OUTPUT,  # grown as <out>.part, renamed once verified
        "--retries": NUMBER,
        "--wait": NUMBER,
        "--timeout": NUMBER,
        "--size": NUMBER,
    },
    "generate": {"--spec": settings("generate"), "--out": OUTPUT},
    "example-corpus": {"--out": OUTPUT_FOLDER, "--train": NUMBER, "--dev": NUMBER, "--test": NUMBER, "--seed": NUMBER},
    "prepare": {
        "--corpora": Check("settings list", "member_pair"),
        "--archives": settings("archive_paths"),
        "--cleaning": settings("cleaning"),
        "--src": OUTPUT,
        "--tgt": OUTPUT,
        "--report": OUTPUT,
    },
    "prepare-eval": {
        "--spec": settings("eval_set"),
        "--name": text("aiayn.data.prepare.prepare_eval"),  # the set's name, said in messages
        "--archive": file("archive"),
        "--dataset": text("aiayn.data.prepare.prepare_eval"),
        "--src": OUTPUT,
        "--tgt": OUTPUT,
    },
    "prepare-treebank": {
        "--dataset": settings("dataset"),
        "--split": text("aiayn.parsing.prepare_treebank.write_split"),  # one of the dataset's splits
        "--src": OUTPUT,
        "--tgt": OUTPUT,
        "--gold": OUTPUT,
        "--treebank-archive": file("archive"),
    },
    "vocab": {
        "--vocab": settings("vocab"),
        "--train-src": file("text"),
        "--train-tgt": file("text"),
        "--out-src": OUTPUT,
        "--out-tgt": OUTPUT,
        "--threads": NUMBER,
    },
    "vocab-info": {
        "--vocab": settings("vocab"),
        "--spm-src": file("sentencepiece model"),
        "--spm-tgt": file("sentencepiece model"),
        "--train-src": file("text"),
        "--train-tgt": file("text"),
        "--out": OUTPUT,
    },
    "encode": {
        "--src": file("text"),
        "--tgt": file("text"),
        "--spm-src": file("sentencepiece model"),
        "--spm-tgt": file("sentencepiece model"),
        "--out": OUTPUT,
        "--threads": NUMBER,
        "--chunk": NUMBER,
    },
    "check": {
        "--settings": file("experiment settings"),
        "--train": file("encoded corpus"),
        "--out": OUTPUT,
    },
    "train": {
        "--settings": file("experiment settings"),
        "--train": file("encoded corpus"),
        "--dev": file("encoded corpus"),
        "--spm-src": file("sentencepiece model"),
        "--spm-tgt": file("sentencepiece model"),
        "--checkpoints": Check("run folder", "aiayn.runtime.checkpoint.newest_readable", STEP_FILES),
        "--out": OUTPUT,
        "--metrics": APPENDED,
        "--tensorboard": Check("run folder", "aiayn.training.board.Board"),
        "--device": text("aiayn.runtime.device.choose_device"),
        "--max-updates": NUMBER,
        "--stop-margin": NUMBER,
    },
    "average": {
        "--checkpoints": Check("folder", "aiayn.training.average.newest_on_grid"),
        "--last": NUMBER,
        "--interval": NUMBER,
        "--final-step": NUMBER,
        "--out": OUTPUT,
        "--record": OUTPUT,
    },
    "select": {
        "--candidates": Check("settings list", "candidate"),
        "--out-model": OUTPUT,
        "--out-metrics": OUTPUT,
        "--record": OUTPUT,
    },
    "translate": {
        "--model": file("checkpoint"),
        "--input": file("text"),
        "--spm-src": file("sentencepiece model"),
        "--spm-tgt": file("sentencepiece model"),
        "--decode": settings("decode"),
        "--out": OUTPUT,
        "--nbest": NUMBER,
        "--batch-tokens": NUMBER,
        "--device": text("aiayn.runtime.device.choose_device"),
        "--precision": CHOICE,
    },
    "score": {
        "--task": CHOICE,
        "--hyp": file("text"),
        "--ref": file("text"),
        "--scoring": settings("scoring+pair_scoring"),
        "--paper-row": text("aiayn.commands.evaluation_chain"),
        "--expect-lines": NUMBER,
        "--out": OUTPUT,
    },
    "table1": {
        "--settings": settings("table1"),
        "--out-md": OUTPUT,
        "--out-csv": OUTPUT,
        "--out-html": OUTPUT,
        "--figure": OUTPUT,
        "--threads": NUMBER,
    },
    "tables": {
        "--table": CHOICE,
        "--experiments": text("aiayn.report.tables.check_spec"),
        "--config": file("study config"),
        "--results": Check("run folder", "aiayn.report.tables.write_table", r".*\.jsonl?"),  # the runs' records
        "--bootstrap": NUMBER,
        "--baselines": FLAG,
        "--out-md": OUTPUT,
        "--out-csv": OUTPUT,
        "--out-html": OUTPUT,
        "--study": text("aiayn.report.notes.document"),  # printed as it is
    },
    "figures": {
        "--name": text("aiayn.report.figures.write_figures"),  # the figures' title
        "--metrics": file("metrics"),
        "--seed-metrics": file("metrics"),
        "--model": file("checkpoint"),
        "--spm-src": file("sentencepiece model"),
        "--dev-src": file("text"),
        "--curves": OUTPUT,
        "--lr-plot": OUTPUT,
        "--attention": OUTPUT,
        "--spm-tgt": file("sentencepiece model"),
        "--dev-tgt": file("text"),
        "--cross-attention": OUTPUT,
        "--diagonal": OUTPUT,
    },
    "export": {
        "--model": file("checkpoint"),
        "--spm-src": file("sentencepiece model"),
        "--spm-tgt": file("sentencepiece model"),
        "--decode": settings("decode"),
        "--card": settings("model_card"),
        "--out": OUTPUT_FOLDER,
        "--ctranslate2": OUTPUT_FOLDER,
    },
    "evalb": {"gold": file("trees"), "test": file("trees")},
    "params": {"--config": file("study config"), "--experiment": text("aiayn.study.grid.Study.experiment")},
    "plan": {
        "--experiments": Check("experiment settings", "aiayn.report.plan.plan"),  # each checked as resolve's
        "--config": file("study config"),
        "--gpu-model": text("aiayn.report.plan.plan"),  # a GPU of PEAKS, or one line naming them
        "--gpus": NUMBER,
        "--nodes": NUMBER,
        "--requests": text("aiayn.report.plan.plan"),
        "--costs": Check("optional file", "aiayn.report.plan.measured_costs"),  # a missing one: no measurement
        "--benchmark": Check("optional file", "aiayn.report.plan.measured_mfu"),
        "--out": OUTPUT,
    },
}

# a rule's shell line holds `--option {value:q}` pairs of its command's options (checked as the
# option is), these values that carry their option with them (a list: [option, value] or nothing)...
OPTION_LISTS = {
    "params.size": "--size",
    "params.archive": "--archive",
    "params.treebank_archive": "--treebank-archive",
    "params.expect": "--expect-lines",
    "params.baselines": "--baselines",
}
# ...and these, each with its check
SHELL_VALUES = {
    "params.launch": text("aiayn.study.launch.launcher"),  # a command prefix of whole numbers and srun (unquoted)
    "log": APPENDED,  # `>> {log}`, `2>> {log}`
}
UNQUOTED = {"params.launch"}  # the one value a shell line takes as it is: it is a command, built by us

# environment variables the package reads -> what it does with a value it cannot use
ENVIRONMENT = {
    "AIAYN_THREAD_POLICY": text("aiayn.cli.thread_policy"),  # "off" or anything else
    "OMP_WAIT_POLICY": text("aiayn.cli.thread_policy"),  # set when absent; recorded
    "OMP_NUM_THREADS": text("aiayn.cli.thread_policy"),  # divided among local processes when whole numbers
    "LOCAL_WORLD_SIZE": text("aiayn.cli.thread_policy"),
    "WORLD_SIZE": text("aiayn.training.distributed.environment"),  # torchrun's; whole numbers or one line
    "RANK": text("aiayn.training.distributed.environment"),
    "LOCAL_RANK": text("aiayn.training.distributed.environment"),
    "GROUP_WORLD_SIZE": text("aiayn.training.distributed.environment"),
    "SLURM_JOB_ID": text("aiayn.training.distributed.Deadline"),  # asked of squeue; nothing else trusts it
    "AIAYN_COSTS": text("aiayn.cli.record_cost"),  # a file appended to (the rehearsal's); none: nothing recorded
}

# config.yaml, each --configfile and --config: the schema, whose every object refuses unknown keys
CONFIG = Check("settings", "#")


def inputs_of(command: str) -> list[str]:
    """The options of `command` that name files it reads (what an error of memory names)."""
    return [option for option, check in COMMANDS[command].items() if check.kind == "file"]
