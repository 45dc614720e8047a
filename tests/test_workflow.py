"""The DAG of the paper study as Snakemake plans it: dry-runs, lint, format, profiles."""

from __future__ import annotations

import ast
import copy
import importlib.util
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import (
    N_CANDIDATES,
    N_EXPERIMENTS,
    N_TRAINED,
    N_TRAINED_AS_TYPED,
    ROOT,
    WITH_TREEBANK,
    job_counts,
    planned_jobs,
    snakemake,
)

from aiayn.cli import COMMANDS


@pytest.fixture(scope="module")
def planned():
    """The paper study with a treebank, as `snakemake -n -p` prints it: asked every question below."""
    run = snakemake("-n", "-p", "--cores", "8", "--config", WITH_TREEBANK)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def plan(planned):
    return planned_jobs(planned.stdout + planned.stderr)


def test_job_count_per_rule(plan):
    counts = job_counts(plan)
    assert counts == {
        "download": 6,  # europarl, commoncrawl, news-commentary, un, giga-fren, dev: each once
        "prepare": 2,
        "prepare_eval": 4,  # newstest2013 + newstest2014 for EN-DE and EN-FR
        "prepare_treebank": 3,  # train, 22, 23 for WSJ-only (semi-supervised: no extra corpora configured)
        "vocab": 3,  # EN-DE, EN-FR, WSJ
        "vocab_info": 3,  # vocab.json of each: pieces made against the size asked
        "encode": 6,  # train + dev per dataset
        "resolve": N_TRAINED,
        "check": N_TRAINED,  # the model's checks before each training (aiayn.check)
        "train": N_TRAINED,
        "select": 1,
        "average": 4,  # one per Table 2 experiment
        "translate": 26 + N_CANDIDATES,  # Table 2: 4 on newstest2014, Table 3: 21 on newstest2013, Table 4: 1, wsj22
        "score": 26 + N_CANDIDATES,
        "tables": 3,
        "table1": 1,  # Table 1 (§4), measured
        "figures": N_EXPERIMENTS,  # learning curves, learning rate, attention maps per reported model
        "all": 1,
    }


def test_one_training_per_distinct_experiment(plan, paper_config):
    trained = sorted(j["wildcards"].split("=")[1] for j in plan if j["rule"] == "train")
    candidates = [f"parse-wsj.tune-P_drop{p}-lr_scale{s}" for p in (0.1, 0.2, 0.3) for s in (0.5, 1)]
    # parse-semi waits for its extra corpora; parse-wsj is its best candidate, not a training of its own
    assert trained == sorted(set(paper_config["experiments"]) - {"parse-semi", "parse-wsj"} | set(candidates))


def test_training_jobs_request_gpus(plan):
    for job in (j for j in plan if j["rule"] == "train"):
        assert int(job["resources"]["gpu"]) >= 1
        assert "-m aiayn train" in job["shell"]


def test_which_model_decodes_which_set(plan):
    translate = {j["output"]: j["input"] for j in plan if j["rule"] == "translate"}
    assert translate["results/base-en-de/newstest2014.de"].startswith("results/base-en-de/average.pt")
    assert translate["results/base-en-de/newstest2013.de"].startswith("results/base-en-de/checkpoints/last.pt")
    assert translate["results/big-en-fr/newstest2014.fr"].startswith("results/big-en-fr/average.pt")
    assert translate["results/t3-A-h16/newstest2013.de"].startswith("results/t3-A-h16/checkpoints/last.pt")
    assert "results/parse-wsj/wsj23.trees" in translate
    averages = {j["output"] for j in plan if j["rule"] == "average"}
    names = ("base-en-de", "big-en-de", "base-en-fr", "big-en-fr")
    assert averages == {f"results/{e}/average.pt, results/{e}/average.json" for e in names}


def test_average_takes_last_5_or_20_on_the_checkpoint_grid(plan):
    shells = {j["output"].split(", ")[0]: j["shell"] for j in plan if j["rule"] == "average"}
    assert "--last 5 --interval 1500 --final-step 100000 " in shells["results/base-en-de/average.pt"]
    assert "--last 20 --interval 600 --final-step 300000 " in shells["results/big-en-fr/average.pt"]


@pytest.mark.parametrize(  # `data`: tests/test_readme.py, `snakemake --cores 8 data`
    "target, rules", [("vocabularies", {"vocab"}), ("table3", {"train", "translate"})]
)
def test_partial_targets(target, rules):
    run = snakemake("-n", "-p", "--cores", "1", target)
    assert run.returncode == 0, run.stderr[-2000:]
    counts = job_counts(planned_jobs(run.stdout + run.stderr))
    assert rules <= set(counts)
    if target == "table3":
        assert counts["train"] == 21 and "average" not in counts  # Table 3 decodes without averaging
    else:
        assert "train" not in counts


def test_semi_supervised_parser_waits_for_its_corpora(planned, tmp_path):
    """Without extra corpora parse-semi is left out with a notice naming the key (the study's plan,
    table4 among its targets); once corpora are listed it is planned."""
    assert "config: experiments.parse-semi is left out: datasets.wsj-semi" in planned.stdout + planned.stderr
    assert "parse-semi" not in planned.stdout.replace("experiments.parse-semi is left out", "")
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["datasets"]["wsj-semi"]["extra_corpora"] = [str(tmp_path / "parsed.mrg")]
    config["datasets"]["wsj"]["treebank"] = config["datasets"]["wsj-semi"]["treebank"] = str(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = snakemake("-n", "-p", "--cores", "1", "table4", "--configfile", str(tmp_path / "config.yaml"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert any(j["output"] == "results/parse-semi/checkpoints/last.pt" for j in planned_jobs(run.stdout + run.stderr))


def test_parser_is_selected_on_wsj22_then_decoded_on_wsj23(plan):
    """§6.3: the tuning grid's candidates are decoded and scored on the dev set (WSJ 22); `select`
    takes them all and gives parse-wsj its model, which alone is decoded on WSJ 23."""
    (select,) = [j for j in plan if j["rule"] == "select"]
    assert select["output"].split(", ")[0] == "results/parse-wsj/checkpoints/last.pt"
    assert select["input"].count("/wsj22.score.json") == N_CANDIDATES
    translated = {j["output"] for j in plan if j["rule"] == "translate"}
    assert {o for o in translated if "parse-wsj" in o} == {
        "results/parse-wsj/wsj23.trees",
        *(f"results/parse-wsj.tune-P_drop{p}-lr_scale{s}/wsj22.trees" for p in (0.1, 0.2, 0.3) for s in (0.5, 1)),
    }
    assert "results/parse-wsj/checkpoints/last.pt" not in {j["output"] for j in plan if j["rule"] == "train"}


def test_the_slurm_profile_submits_to_slurm():
    """Its dry-run as typed, from the root: tests/test_readme.py (`snakemake --cores 8 --profile slurm`)."""
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["jobs"] > 0


def test_multi_node_training_through_the_slurm_profile():
    """Two nodes of 8 GPUs: one srun task per node, each a torchrun agent; a half-set request fails by name."""
    run = snakemake(
        "-n",
        "-p",
        "--cores",
        "8",
        "--profile",
        "slurm",
        "--set-resources",
        "train:gpu=16",
        "train:nodes=2",
        "train:tasks=2",
        "train:mpi=srun",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    train = [j for j in planned_jobs(run.stdout + run.stderr) if j["rule"] == "train"]
    assert len(train) == N_TRAINED_AS_TYPED
    assert all(
        "srun -n 2 --ntasks-per-node 1 --gpus-per-task 8 torchrun --nnodes 2 --nproc-per-node 8" in j["shell"]
        for j in train
    )
    half = snakemake("-n", "--cores", "8", "--profile", "slurm", "--set-resources", "train:gpu=16", "train:nodes=2")
    assert half.returncode != 0
    assert "set train:tasks=2 and train:mpi=srun" in half.stdout + half.stderr


def test_the_demos_torch_jobs_run_on_one_thread_whatever_the_cores(tmp_path):
    """The thread count moves the demo's figures (docs/demo.md): every job of the demo's whole DAG
    runs on one thread, also when a user's --cores gives more, but sentencepiece's (vocab: the same
    model at 1, 2 and 8 threads; encode: each line's ids, returned in order) and Table 1's, whose
    times are the machine's."""
    run = snakemake("-n", "-p", "--profile", "profiles/demo", "--cores", "8", "-d", str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = planned_jobs(run.stdout + run.stderr)
    assert {"check", "train", "translate", "average", "figures"} <= {j["rule"] for j in jobs}
    assert {j["rule"]: j["threads"] for j in jobs if j["threads"] > 1} == {"vocab": 8, "encode": 8, "table1": 2}


def test_no_default_profile():
    assert not (ROOT / "profiles" / "default").exists()  # Snakemake would apply it silently


def test_lint():
    run = snakemake("--lint")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_snakefmt_clean():
    exe = shutil.which("snakefmt")
    if exe is None:
        pytest.skip("snakefmt is not installed (pip install -e '.[test]')")
    run = subprocess.run([exe, "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "training:\n  warmup_step: 4000\n",
            "training: unknown key 'warmup_step' (in {extra}); known: steps, warmup_steps,",
        ),
        ("training:\n  steps: many\n", "training.steps (in {extra}): 'many' is not of type 'integer'"),
        ("experiments:\n  base-en-de: {preset: bse}\n", "experiments.base-en-de.preset (in {extra}): unknown preset"),
        (
            "experiments:\n  base-en-de: {average: 500}\n",
            "experiments.base-en-de.train.checkpoint_interval (experiments.base-en-de in {extra}): 100,000 updates",
        ),
    ],
)
def test_bad_config_fails_dry_run_naming_the_key(tmp_path, override, message):
    """A wrong key or value names its key, and the config file that set it."""
    extra = tmp_path / "override.yaml"
    extra.write_text(override)
    run = snakemake("-n", "--configfile", str(extra))
    assert run.returncode != 0
    assert message.format(extra=extra) in run.stderr + run.stdout
    assert "Traceback" not in run.stderr


def test_mirror_replaces_url_prefix(tmp_path):
    extra = tmp_path / "mirror.yaml"
    extra.write_text("mirror: http://127.0.0.1:8000/wmt/\n")
    run = snakemake("data", "-n", "-p", "--configfile", str(extra))
    assert run.returncode == 0, run.stderr[-2000:]
    downloads = [j["shell"] for j in planned_jobs(run.stdout + run.stderr) if j["rule"] == "download"]
    assert downloads and all("--url http://127.0.0.1:8000/wmt/" in s for s in downloads)
    assert any("wmt13/training-parallel-europarl-v7.tgz" in s for s in downloads)


@pytest.mark.parametrize("check", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_clean(check):
    """ruff lint and format (line length 120, pyproject.toml) over the package, tests and benchmarks."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    run = subprocess.run([sys.executable, "-m", "ruff", *check, "."], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


# -- one name per step: rule = command = module, rule files named after the stage they call ------------
def rules_and_commands() -> list[tuple[str, str, str]]:
    """(rule file stem, rule, command) of every rule whose shell line runs `-m aiayn <command>`."""
    found = []
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule \w+:)", smk.read_text()):
            rule = re.match(r"rule (\w+):", block)
            shell = re.search(r"shell:\s*\n(.*?)(?:\n\n|\Z)", block, re.S)
            command = re.search(r"-m aiayn ([\w-]+)", shell.group(1)) if shell else None
            if rule and command:
                found.append((smk.stem, rule.group(1), command.group(1)))
    return found


def library_module(command: str) -> str:
    """The library module a command's run() calls into: `aiayn.<stage>.<module>` (imported in run(),
    else at the top: the helpers add_arguments may import for its help come second)."""
    tree = ast.parse((ROOT / "src" / (COMMANDS[command][0].replace(".", "/") + ".py")).read_text())
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    for node in [*ast.walk(run), *ast.walk(tree)]:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.count(".") == 2:
            if node.module.split(".")[1] != "commands":
                return node.module
        if isinstance(node, ast.ImportFrom) and node.module and node.module.count(".") == 1:
            if node.module.split(".")[1] not in ("commands", "errors", "io", "inventory"):
                return f"{node.module}.{node.names[0].name}"
    raise AssertionError(f"{command} calls no library module")


def test_every_rule_is_named_as_the_command_it_runs():
    """What Snakemake prints ("rule vocab:") is what a user greps: `python -m aiayn vocab`,
    `aiayn/data/vocab.py`. Snakemake's names cannot hold "-": `prepare_eval` runs `prepare-eval`."""
    rules = rules_and_commands()
    assert len(rules) >= 18
    assert [(rule, command) for _, rule, command in rules if rule != command.replace("-", "_")] == []


def test_every_rule_runs_the_module_of_its_name_from_the_rule_file_of_its_stage():
    """A rule's command calls the library module of its name (`vocab-info` the vocabulary's module
    `vocab`), in the stage folder the rule file is named after."""
    wrong = []
    for stem, rule, command in rules_and_commands():
        _, stage, module = library_module(command).split(".")
        if stage != stem or not (module == command.replace("-", "_") or command.startswith(module + "-")):
            wrong.append(f"{stem}.smk: rule {rule} -> {command} -> aiayn.{stage}.{module}")
    assert wrong == []


def plan_of_a_config_file(path, config: dict) -> list[dict]:
    """The jobs `snakemake -n -p --configfile PATH --replace-workflow-config` plans for `config` written
    to PATH (its keys in their order), PATH written <config> in their command lines."""
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    run = snakemake("-n", "-p", "--configfile", str(path), "--replace-workflow-config")
    assert run.returncode == 0, run.stderr[-2000:]
    return [{**j, "shell": j["shell"].replace(str(path), "<config>")} for j in planned_jobs(run.stdout + run.stderr)]


@pytest.fixture(scope="module")
def paper_study_from_a_file(tmp_path_factory, paper_config):
    """config.yaml's study given as a --configfile, as written: what the tests below change is set against it."""
    return plan_of_a_config_file(tmp_path_factory.mktemp("as-written") / "study.yaml", paper_config)


def test_the_score_jobs_do_not_depend_on_the_bootstrap_sample_count(tmp_path, paper_config, paper_study_from_a_file):
    """bootstrap_resamples is Table 3's (the tables step): the score jobs' command lines, which
    Snakemake's params trigger compares, are the same for any count, the tables job's is not."""
    config = copy.deepcopy(paper_config)
    assert config["scoring"]["bootstrap_resamples"] != 77
    config["scoring"]["bootstrap_resamples"] = 77
    changed = plan_of_a_config_file(tmp_path / "77.yaml", config)
    shells = [
        {rule: sorted(j["shell"] for j in jobs if j["rule"] == rule) for rule in ("score", "tables")}
        for jobs in (paper_study_from_a_file, changed)
    ]
    assert shells[0]["score"] == shells[1]["score"] and len(shells[1]["score"]) > 10
    assert shells[0]["tables"] != shells[1]["tables"]
    table3 = [s for s in shells[1]["tables"] if "--table 3" in s]
    assert table3 and [s for s in shells[1]["tables"] if "--bootstrap 77" in s] == table3


def test_the_rules_name_files_only_through_the_layout():
    """Every file a rule names comes from a named Layout method (aiayn.study.layout): no path put
    together in a rule file, from an output's folder (os.path.dirname) or as Layout.data(<a file
    name>), which would be a second home for a file name."""
    found = []
    for path in sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#")[0]
            if re.search(r"os\.path\.(dirname|basename)|LAYOUT\.(data|_p)\(|[\"']results/", code):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert found == []


def test_the_order_of_a_configs_keys_changes_no_job(tmp_path, paper_config, paper_study_from_a_file):
    """A config whose keys come in another order (a YAML tool rewrote it, sorted) plans every job with
    the same command line, so a study edited that way reruns nothing (it reran the whole DAG: the
    rules' JSON parameters kept the file's key order)."""

    def reversed_keys(value, keep_order=False):
        if isinstance(value, dict):
            keys = list(value) if keep_order else list(reversed(list(value)))
            return {k: reversed_keys(value[k]) for k in keys}
        return [reversed_keys(v) for v in value] if isinstance(value, list) else value

    reordered = reversed_keys(paper_config)
    reordered["experiments"] = reversed_keys(paper_config["experiments"], keep_order=True)  # the tables' row order
    reversed_jobs = plan_of_a_config_file(tmp_path / "study.yaml", reordered)
    shells = [sorted(j["shell"] for j in jobs) for jobs in (paper_study_from_a_file, reversed_jobs)]
    assert shells[0] == shells[1] and len(shells[0]) > 100
