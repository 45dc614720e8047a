# Thin glue between config.yaml and the aiayn package: everything here calls into src/aiayn.
import json
import re
import shlex
import os
import sys

sys.path.insert(0, os.path.join(workflow.basedir, "src"))
# Jobs run `python -m aiayn`, also from a clone (or a conda env) without the package installed.
# (The prefix goes through Snakemake's formatting too, hence the doubled braces.)
shell.prefix(
    "set -euo pipefail; export PYTHONPATH="
    + shlex.quote(os.path.join(workflow.basedir, "src"))
    + "${{PYTHONPATH:+:$PYTHONPATH}}; "
)

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from aiayn.study.config import ConfigError, validate
from aiayn.study.launch import LaunchError, launcher
from aiayn.study.layout import Layout, mirrored
from aiayn.study.grid import Study, sources_line

try:
    config.update(validate(config))
    STUDY = Study(config)
except ConfigError as exc:
    raise WorkflowError(f"config: {exc}") from None

for _reason in STUDY.skipped.values():
    logger.warning(f"config: {_reason}")

LAYOUT = Layout(config["results"])
# which config files define this study, for the tables' first line
STUDY_SOURCES = sources_line(
    [str(f) for f in workflow.overwrite_configfiles or []],
    bool(workflow.config_settings.replace_workflow_config),
)
TABLES = sorted({t for e in STUDY.experiments.values() for t in e["tables"]})
ARCHIVE_FILES = {STUDY.archive_file(a): a for a in STUDY.archives()}
GENERATED = {
    f for f, a in ARCHIVE_FILES.items() if config["archives"][a].get("generate")
}


def _alternatives(names):
    return (
        "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!)"
    )


def _eval_sets(task):
    return {s for d in STUDY.datasets(task) for s in STUDY.dataset(d)["eval_sets"]}


wildcard_constraints:
    experiment=_alternatives(STUDY.experiments),
    dataset=_alternatives(STUDY.datasets()),


def get_archive(wildcards):
    return config["archives"][ARCHIVE_FILES[wildcards.archive_file]]


def get_archive_map(dataset, part):
    """{archive name: downloaded file} of what `part` ("train" or an eval set) of `dataset` needs."""
    return {
        a: LAYOUT.download(STUDY.archive_file(a))
        for a in STUDY.archives_for(dataset, part)
    }


def get_archive_files(dataset, part):
    return list(get_archive_map(dataset, part).values())


def get_data_targets():
    out = []
    for ds in STUDY.datasets():
        dev = STUDY.dataset(ds)["dev"]
        out += [LAYOUT.encoded(ds, split) for split in ("train", dev)]
        out.append(LAYOUT.vocab_info(ds))
        out += [
            LAYOUT.text(ds, s, side)
            for s in STUDY.dataset(ds)["eval_sets"]
            for side in ("src", "tgt")
        ]
    return out


def get_vocab_targets():
    return [
        LAYOUT.spm(ds, side) for ds in STUDY.datasets() for side in ("src", "tgt")
    ] + [LAYOUT.vocab_info(ds) for ds in STUDY.datasets()]


def get_dataset(wildcards):
    return STUDY.experiment(wildcards.experiment)["dataset"]


def target_lang(experiment):
    ds = STUDY.dataset(STUDY.experiment(experiment)["dataset"])
    return ds["tgt"] if ds["task"] == "translation" else "trees"


def get_expected_lines(experiment, testset):
    lines = STUDY.dataset(STUDY.experiment(experiment)["dataset"])["eval_sets"][
        testset
    ].get("lines")
    return f"--expect-lines {lines}" if lines else ""


def get_reference_side(experiment):
    """Translations are scored against the target text, parses against the gold trees."""
    return "tgt" if STUDY.experiment(experiment)["task"] == "translation" else "gold"


def treebank_settings(dataset):
    """What preparing a parsing dataset depends on (its vocabulary is not part of it)."""
    keys = (
        "treebank",
        "treebank_archive",
        "train_sections",
        "eval_sets",
        "extra_corpora",
        "pos_tags",
    )
    return {k: STUDY.dataset(dataset).get(k) for k in keys}


def get_treebank_archive(wildcards):
    name = STUDY.dataset(wildcards.dataset).get("treebank_archive")
    return [LAYOUT.download(STUDY.archive_file(name))] if name else []


def get_table_scores(table):
    """The scores a table reads; a table none of whose experiments runs stops with the reason."""
    reason = STUDY.why_no_table(table)
    if reason:
        raise WorkflowError(reason)
    return [LAYOUT.score(e.experiment, e.testset) for e in STUDY.evaluations(table)]


def get_test_set(experiment):
    return STUDY.dataset(STUDY.experiment(experiment)["dataset"])["test"]


def get_model_card(experiment, input):
    """What the exported model's card says of its run (aiayn.commands.export.model_card)."""
    exp = STUDY.experiment(experiment)
    ds = STUDY.dataset(exp["dataset"])
    return {
        "name": experiment,
        "dataset": exp["dataset"],
        "pair": [ds.get("src"), ds.get("tgt")],
        "testset": ds["test"],
        "paper_bleu": exp["paper"].get("bleu"),
        "score": input.score,
        "metrics": LAYOUT.metrics(
            experiment
        ),  # written by the training, beside its checkpoints
    }


def get_candidates(experiment):
    """The select command's --candidates: each candidate's setting, dev score, model and metrics."""
    dev = STUDY.dataset(STUDY.experiment(experiment)["dataset"])["dev"]
    return json.dumps(
        [
            {
                "name": c,
                "setting": STUDY.experiment(c)["tuned"],
                "score": LAYOUT.score(c, dev),
                "model": LAYOUT.last_checkpoint(c),
                "metrics": LAYOUT.metrics(c),
            }
            for c in STUDY.experiment(experiment)["candidates"]
        ]
    )


def train_launcher(resources):
    """`python`, `torchrun ...` or `srun ... torchrun ...` for a training job's resources."""
    try:
        return launcher(
            resources.gpu, resources.nodes, resources.tasks, resources.get("mpi")
        )
    except LaunchError as exc:
        raise WorkflowError(str(exc)) from None
