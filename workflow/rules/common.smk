# Thin glue between config.yaml and the aiayn package: the experiment grid is aiayn.study.grid.Study,
# file names are aiayn.study.layout.Layout; the get_* input functions below only hand wildcards to them.
import json
import re
import shlex
import os
import sys

# The Snakefile put this clone's src/ first on sys.path (before any installed aiayn).
# Jobs run `python -m aiayn`, also from a clone (or a conda env) without the package installed.
# (The prefix goes through Snakemake's formatting too, hence the doubled braces.)
shell.prefix(
    "set -euo pipefail; export PYTHONPATH="
    + shlex.quote(os.path.join(workflow.basedir, "src"))
    + "${{PYTHONPATH:+:$PYTHONPATH}}; "
)

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from aiayn.study.code import check_is_ancient, checked_code, stale_checks
from aiayn.study.config import ConfigError, from_command_line, naming_sources, validate
from aiayn.study.grid import Study, sources_line
from aiayn.study.launch import LaunchError, launcher
from aiayn.study.layout import mirrored

try:  # a mistake names the file (or --config) that set the key
    _given = workflow.config_settings.config or {}
    _merged = [] if workflow.config_settings.replace_workflow_config else list(_files)
    _merged += workflow.overwrite_configfiles or []
    config.update(
        validate(from_command_line(config, _given), files=_merged, given=_given)
    )
    with naming_sources(_merged, _given):
        STUDY = Study(config)
except ConfigError as exc:
    raise WorkflowError(f"config: {exc}") from None

for _reason in STUDY.skipped.values():
    logger.warning(f"config: {_reason}")

LAYOUT = STUDY.layout
CHECKED_CODE = checked_code()
_stale = stale_checks([LAYOUT.check(e) for e in STUDY.trained], CHECKED_CODE)
if _stale:
    logger.warning(f"warning: {_stale}")
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


def as_param(value):
    """A rule's JSON parameter, its keys sorted: the order a config file lists its keys in (a YAML tool
    that rewrote it, an edit) changes no job's parameters, so Snakemake reruns nothing for it.
    """
    return json.dumps(value, sort_keys=True)


def _alternatives(names):
    return (
        "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!)"
    )


def _eval_sets(task):
    return {s for d in STUDY.datasets(task) for s in STUDY.dataset(d)["eval_sets"]}


wildcard_constraints:
    experiment=_alternatives(STUDY.experiments),
    dataset=_alternatives(STUDY.datasets()),


# -- archives -----------------------------------------------------------------------------------
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


def get_treebank_archive(wildcards):
    name = STUDY.dataset(wildcards.dataset).get("treebank_archive")
    return [LAYOUT.download(STUDY.archive_file(name))] if name else []


# -- partial targets ----------------------------------------------------------------------------
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


# -- one experiment's inputs (wildcards.experiment) ---------------------------------------------
def get_dataset(wildcards):
    return STUDY.experiment(wildcards.experiment)["dataset"]


def get_checkpoints(wildcards):
    return LAYOUT.checkpoints(wildcards.experiment)


def get_spm_src(wildcards):
    return LAYOUT.spm(get_dataset(wildcards), "src")


def get_spm_tgt(wildcards):
    return LAYOUT.spm(get_dataset(wildcards), "tgt")


def get_check(wildcards):
    """train's check.json: ancient once the run has trained (aiayn.study.code.check_is_ancient)."""
    check = LAYOUT.check(wildcards.experiment)
    dag = workflow.dag_settings  # None where no DAG is built (e.g. --lint)
    forced = (
        set(dag.forcerun) | (set(dag.targets) if dag.forcetargets else set())
        if dag
        else set()
    )
    final = LAYOUT.final_checkpoint(wildcards.experiment)
    return ancient(check) if check_is_ancient(final, forced) else check


def get_train_encoded(wildcards):
    return LAYOUT.encoded(get_dataset(wildcards), "train")


def get_dev_encoded(wildcards):
    return LAYOUT.encoded(get_dataset(wildcards), STUDY.dev_set(wildcards.experiment))


def get_dev_src(wildcards):
    return LAYOUT.text(
        get_dataset(wildcards), STUDY.dev_set(wildcards.experiment), "src"
    )


def get_dev_tgt(wildcards):
    return LAYOUT.text(
        get_dataset(wildcards), STUDY.dev_set(wildcards.experiment), "tgt"
    )


def get_decoded_model(wildcards):
    """The model `wildcards.experiment` decodes `wildcards.testset` with: averaged or final."""
    which = STUDY.model_for(wildcards.experiment, wildcards.testset)
    return LAYOUT.model(wildcards.experiment, which)


def get_test_model(wildcards):
    """The model `wildcards.experiment` decodes its test set with (what Table 2 reports)."""
    which = STUDY.model_for(wildcards.experiment, STUDY.test_set(wildcards.experiment))
    return LAYOUT.model(wildcards.experiment, which)


def get_test_score(wildcards):
    return LAYOUT.score(wildcards.experiment, STUDY.test_set(wildcards.experiment))


def get_decode(wildcards):
    return as_param(STUDY.experiment(wildcards.experiment)["decode"])


def get_url(wildcards):
    return mirrored(get_archive(wildcards)["url"], config["mirror"])


def get_size_flag(wildcards):
    size = get_archive(wildcards).get("size")
    return ["--size", str(size)] if size else []


def get_vocab_settings(wildcards):
    return as_param(STUDY.dataset(wildcards.dataset)["vocab"])


def get_candidates(wildcards):
    return STUDY.candidates(wildcards.experiment)


def get_other_seeds(wildcards):
    return [
        r for r in STUDY.replicates(wildcards.experiment) if r != wildcards.experiment
    ]


def get_seed_models(wildcards):
    return [LAYOUT.final_checkpoint(r) for r in get_other_seeds(wildcards)]


def get_seed_metrics(wildcards):
    return [LAYOUT.metrics(r) for r in get_other_seeds(wildcards)]


def get_source(wildcards):
    return LAYOUT.text(get_dataset(wildcards), wildcards.testset, "src")


def get_hypotheses(wildcards):
    lang = STUDY.target_lang(wildcards.experiment)
    return LAYOUT.translation(wildcards.experiment, wildcards.testset, lang)


def get_reference(wildcards):
    side = STUDY.reference_side(wildcards.experiment)
    return LAYOUT.text(get_dataset(wildcards), wildcards.testset, side)


def get_expect_lines(wildcards):
    lines = STUDY.expected_lines(wildcards.experiment, wildcards.testset)
    return ["--expect-lines", str(lines)] if lines else []


def get_table_scores(table):
    """The scores a table reads; a table none of whose experiments runs stops with the reason."""
    try:
        return STUDY.table_scores(table)
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None


def rule_requests(*rules):
    """{rule: {resource: number}}: what the jobs of `rules` request, after the profile's and the command
    line's --set-resources (the plan reports it); a resource computed per job (a function, a string)
    is left out."""
    out = {}
    for name in rules:
        out[name] = {}
        for key, res in workflow.get_rule(name).resources.items():
            try:
                value = getattr(res, "value", res)
            except (
                ValueError
            ):  # Snakemake: "must be evaluated within the context of a rule"
                continue
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and not key.startswith("_")
            ):
                out[name][key] = value
    return out


def train_launcher(resources):
    """`python`, `torchrun ...` or `srun ... torchrun ...` for a training job's resources."""
    try:
        return launcher(
            resources.gpu, resources.nodes, resources.tasks, resources.get("mpi")
        )
    except LaunchError as exc:
        raise WorkflowError(str(exc)) from None
