# "Attention Is All You Need" (Vaswani et al. 2017), the whole study as one DAG. Logic lives in src/aiayn.
# Read top to bottom: a stage per file of workflow/rules/, included in this order, and its rules:
# study (resolve) -> data (download, generate, prepare, prepare_eval, vocab, vocab_info, encode)
# -> parsing (prepare_treebank) -> check (check) -> training (train, average)
# -> evaluation (translate, score, select, export) -> report (table1, tables, plan, figures).
# The parsing stage (§6.3) is a branch beside data's; tests/test_maps.py holds these lines to the rules.
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

# This clone's package, before any installed aiayn: the workflow plans with the code its jobs run
# (common.smk puts the same src/ first on the jobs' PYTHONPATH).
sys.path.insert(0, os.path.join(workflow.basedir, "src"))
from aiayn.study.config import ConfigError, read_yaml

min_version("9.16.3")  # pyproject.toml's floor, the oldest CI tests

try:  # Snakemake's own reading names neither the line nor the column, and keeps a duplicated key's last value
    _files = ["config.yaml"] if os.path.isfile("config.yaml") else []
    for _file in _files + list(workflow.overwrite_configfiles or []):
        read_yaml(_file)
except ConfigError as exc:
    raise WorkflowError(f"config: {exc}") from None


configfile: "config.yaml"


# common.smk validates config against workflow/schemas/config.schema.yaml (unknown keys and wrong
# types fail naming the key) and builds the experiment grid (aiayn.study.grid.Study).
include: "workflow/rules/common.smk"
include: "workflow/rules/study.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/parsing.smk"
include: "workflow/rules/check.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/evaluation.smk"
include: "workflow/rules/report.smk"


report: "workflow/report/workflow.rst"


rule all:
    default_target: True
    input:
        [LAYOUT.table(n, ext) for n in TABLES for ext in ("md", "csv", "html")],
        [LAYOUT.table(1, ext) for ext in ("md", "csv", "html", "png")],
        [LAYOUT.figure(e, "learning_curves.png") for e in STUDY.reported],
        # named too, so that a study begun before they existed gets them (Snakemake reruns a job
        # for its missing outputs only when they are asked for)
        [LAYOUT.figure(e, "diagonal.json") for e in STUDY.reported],
        [LAYOUT.check(e) for e in STUDY.trained],
        [LAYOUT.vocab_info(ds) for ds in STUDY.datasets()],


rule data:
    input:
        get_data_targets(),


rule vocabularies:
    input:
        get_vocab_targets(),


rule checks:
    input:
        [LAYOUT.check(e) for e in STUDY.trained],


rule models:
    input:
        [LAYOUT.final_checkpoint(e) for e in STUDY.experiments],


rule table2:
    input:
        [LAYOUT.table(2, ext) for ext in ("md", "csv", "html")],


rule table3:
    input:
        [LAYOUT.table(3, ext) for ext in ("md", "csv", "html")],


rule exports:
    input:
        [LAYOUT.export(e) for e in STUDY.in_table(2)],


rule table4:
    input:
        [LAYOUT.table(4, ext) for ext in ("md", "csv", "html")],
