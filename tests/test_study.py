"""The experiment grid: resolution of presets and diffs, and which model decodes which set."""

from __future__ import annotations

import pytest
from conftest import with_treebank

from aiayn.study import config as cfg
from aiayn.study.config import ConfigError
from aiayn.study.grid import Study
from aiayn.study.launch import LaunchError, launcher


@pytest.fixture(scope="module")
def study(paper_config):
    return Study(cfg.validate(with_treebank(paper_config)))


def test_table_membership(study):
    assert study.in_table(2) == ["base-en-de", "big-en-de", "base-en-fr", "big-en-fr"]
    assert len(study.in_table(3)) == 21  # base, A x4, B x2, C x7, D x4, E, big; init (ours)
    assert study.in_table(4) == ["parse-wsj"]  # parse-semi: left out until extra corpora are configured
    # Table 3's base and big rows are Table 2's EN-DE trainings, not new ones
    assert set(study.in_table(2)) & set(study.in_table(3)) == {"base-en-de", "big-en-de"}


def test_resolution_diff_over_preset(study):
    big_fr = study.experiment("big-en-fr")
    assert big_fr["model"]["P_drop"] == 0.1  # §6.1, overriding big's 0.3
    assert big_fr["model"]["d_model"] == 1024 and big_fr["train"]["steps"] == 300000
    assert study.experiment("big-en-de")["model"]["P_drop"] == 0.3
    b = study.experiment("t3-B-dk16")["model"]
    assert (b["d_k"], b["d_v"], b["h"]) == (16, 64, 8)  # row B changes d_k only
    ls = study.experiment("t3-D-ls0.2")
    assert ls["train"]["eps_ls"] == 0.2 and ls["model"] == study.experiment("base-en-de")["model"]
    assert study.experiment("t3-E-learned")["model"]["positional"] == "learned"
    base = study.experiment("base-en-de")
    assert base["train"]["warmup_steps"] == 4000 and base["train"]["adam_beta2"] == 0.98
    assert base["decode"] == {"beam": 4, "alpha": 0.6, "max_len_a": 1.0, "max_len_b": 50}
    assert study.experiment("parse-wsj")["decode"] == {"beam": 21, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 300}
    assert (base["average"], study.experiment("big-en-de")["average"]) == (5, 20)


def test_training_settings_leave_out_decoding(study):
    s = study.training_settings("base-en-de")
    assert "decode" not in s and "average" not in s and s["model"]["N"] == 6


def test_evaluation_plan(study):
    plan = {(e.experiment, e.testset): e.model for e in study.evaluations()}
    assert plan[("base-en-de", "newstest2014")] == "average"  # Table 2: averaged, test
    assert plan[("base-en-de", "newstest2013")] == "final"  # Table 3: final checkpoint, dev
    assert plan[("t3-C-N8", "newstest2013")] == "final"
    assert ("t3-C-N8", "newstest2014") not in plan
    assert plan[("parse-wsj", "wsj23")] == "final"
    assert len(plan) == 4 + 21 + 1 + 6  # + the 6 candidates of parse-wsj on wsj22
    averaged = sorted({e.experiment for e in study.evaluations() if e.model == "average"})
    assert averaged == ["base-en-de", "base-en-fr", "big-en-de", "big-en-fr"]


def test_archives(study):
    assert study.archives_for("wmt14-en-de", "train") == ["europarl-v7", "commoncrawl", "news-commentary-v9"]
    assert set(study.archives()) == {"europarl-v7", "commoncrawl", "news-commentary-v9", "un", "giga-fren", "dev"}


def test_average_needs_kept_checkpoints(paper_config):
    config = with_treebank(paper_config)
    config["training"]["keep_checkpoints"] = 10
    with pytest.raises(ConfigError, match="experiments.big-en-de: averages 20 checkpoints but keeps only 10"):
        Study(cfg.validate(config))


def test_launcher():
    assert launcher(0) == "python" and launcher(1) == "python"
    assert launcher(8) == "torchrun --standalone --nnodes 1 --nproc-per-node 8"
    multi = launcher(16, nodes=2, tasks=2, mpi="srun")
    assert multi.startswith("srun -n 2 --ntasks-per-node 1 --gpus-per-task 8 torchrun --nnodes 2 --nproc-per-node 8")
    assert "--rdzv-backend c10d --rdzv-id $SLURM_JOB_ID" in multi
    assert ":$((29500 + SLURM_JOB_ID % 2000))" in multi  # two jobs on one node do not share a port
    # two tasks on one node (the CI's Slurm), one GPU each; CPU-only: no GPU binding
    assert launcher(2, tasks=2, mpi="srun").startswith(
        "srun -n 2 --ntasks-per-node 2 --gpus-per-task 1 torchrun --nnodes 2 --nproc-per-node 1"
    )
    assert launcher(0, tasks=2, mpi="srun").startswith(
        "srun -n 2 --ntasks-per-node 2 torchrun --nnodes 2 --nproc-per-node 1"
    )
    with pytest.raises(LaunchError, match="train:tasks=2 and train:mpi=srun"):
        launcher(16, nodes=2)
    with pytest.raises(LaunchError, match="also set train:mpi=srun"):
        launcher(16, nodes=2, tasks=2)
    with pytest.raises(LaunchError, match="do not divide evenly"):
        launcher(12, nodes=5, tasks=5, mpi="srun")
    with pytest.raises(LaunchError, match="does not divide evenly over train:nodes=2"):
        launcher(12, nodes=2, tasks=3, mpi="srun")
    with pytest.raises(LaunchError, match="train:gpu must be a whole number"):
        launcher("8")


def test_semi_supervised_parser_without_extra_corpora_is_left_out(paper_config):
    study = Study(cfg.validate(with_treebank(paper_config)))
    assert "parse-semi" not in study.experiments
    assert "datasets.wsj-semi is semi-supervised (§6.3) but its extra_corpora is empty" in study.skipped["parse-semi"]
    with pytest.raises(ConfigError, match="experiments.parse-semi is left out: datasets.wsj-semi"):
        study.experiment("parse-semi")
    config = with_treebank(paper_config)
    config["datasets"]["wsj-semi"]["extra_corpora"] = ["/data/berkeley-parsed.mrg"]
    study = Study(cfg.validate(config))
    assert study.in_table(4) == ["parse-wsj", "parse-semi"] and study.skipped == {}


def test_a_tuning_grid_becomes_candidate_experiments(study):
    """parse-wsj's §6.3 grid: one candidate per combination, the grid's values over the parser preset,
    trained and scored on the dev set only; parse-wsj itself trains nothing."""
    parent = study.experiment("parse-wsj")
    assert parent["tune"] == {"P_drop": [0.1, 0.2, 0.3], "lr_scale": [0.5, 1.0]}
    assert len(parent["candidates"]) == 6 and "parse-wsj" in study.selected and "parse-wsj" not in study.trained
    c = study.experiment("parse-wsj.tune-P_drop0.3-lr_scale1")
    assert (
        c["model"]["P_drop"] == 0.3 and c["train"]["lr_scale"] == 1.0 and c["tuned"] == {"P_drop": 0.3, "lr_scale": 1.0}
    )
    assert c["model"]["d_model"] == 1024 and c["train"]["warmup_steps"] == 16000 and c["tables"] == []
    assert parent["model"]["P_drop"] == 0.2 and parent["train"]["lr_scale"] == 0.5  # the preset (t2t parsing_base)
    plan = {(e.experiment, e.testset): e.model for e in study.evaluations()}
    assert plan[("parse-wsj.tune-P_drop0.3-lr_scale1", "wsj22")] == "final"
    assert [e["name"] for e in study.table_spec(4)] == ["parse-wsj"]
    assert set(study.reported) == set(study.in_table(2) + study.in_table(3) + study.in_table(4))


def test_a_tuned_experiment_must_decode_its_final_checkpoint(paper_config):
    config = with_treebank(paper_config)
    config["experiments"]["base-en-de"]["tune"] = {"P_drop": [0.1, 0.2]}
    with pytest.raises(ConfigError, match="experiments.base-en-de.tune: .* set average: 1"):
        Study(cfg.validate(config))


def test_downloads_are_named_by_archive_not_by_url(paper_config):
    """Two archives whose URLs end alike (two years' dev.tgz) are two downloads; a URL that ends in
    no file name still gives one (the archive's name)."""
    config = with_treebank(paper_config)
    config["archives"]["dev-2019"] = {**config["archives"]["dev"], "url": "http://data.statmt.org/wmt19/dev.tgz"}
    config["archives"]["dev"]["url"] = "http://data.statmt.org/wmt14/dev.tgz"
    config["archives"]["plain"] = {"url": "http://host/ok/", "sha256": "0" * 64}
    study = Study(cfg.validate(config))
    assert study.archive_file("dev") == "dev.tgz" and study.archive_file("dev-2019") == "dev-2019.tgz"
    assert study.archive_file("plain") == "plain"
    assert study.archive_file("europarl-v7") == "europarl-v7.tgz"
