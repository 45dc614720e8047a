"""Every input of aiayn, each bound to the one check it goes through: the options of every command,
the values a rule puts on a shell line, the environment variables read, the config, and every kind
of file read. An option's check is declared where argparse declares the option, as its `type` (a
`Check`, which passes the value on as it is), or read off it (a number's bounds, its choices, a
flag): `aiayn.cli.options` reads them off the commands' parsers. tests/test_inventory.py reads the parsers, the
rules' shell lines and the package's source, and fails when an input is missing here; the generated
tests (Hypothesis) and the fault matrix take their cases from this table.

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

    def __call__(self, text: str) -> str:
        """As an option's argparse `type`: its value as it is (the check named does the checking)."""
        return text


def file(kind: str) -> Check:
    return Check("file", kind)


def schema(name: str) -> Check:
    return Check("settings", name)


def text(checker: str) -> Check:
    return Check("text", checker)


OUTPUT, OUTPUT_FOLDER, APPENDED = Check("output"), Check("output folder"), Check("output appended")
NUMBER, CHOICE, FLAG = Check("number"), Check("choice"), Check("flag")
TEXT, SPM, CHECKPOINT = file("text"), file("sentencepiece model"), file("checkpoint")
EXPERIMENT, ENCODED = file("experiment settings"), file("encoded corpus")
DEVICE = text("aiayn.runtime.device.choose_device")

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
    "average": "aiayn.training.average.derived_files",
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
    "AIAYN_COSTS": text("aiayn.cli.costs_file"),  # a new file or one of cost records, appended to; none: nothing
}


def check_of(action) -> Check | None:
    """The check of one argparse argument: its `type` where that is a Check, a number's bounds
    (`aiayn.commands.at_least`), its choices, or a flag's; None where it has none."""
    if isinstance(action.type, Check):
        return action.type
    if getattr(action.type, "bound", None):
        return NUMBER
    if action.choices:
        return CHOICE
    return FLAG if action.nargs == 0 and action.dest != "help" else None
