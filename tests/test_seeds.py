"""Rows over several seeds (Clark et al. 2011): the statistics against hand computations and
reference implementations, the planned DAG with and without seeds, and the tables' cells and marks
from fabricated runs."""

from __future__ import annotations

import copy
import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from conftest import ROOT, flat, job_counts, planned_jobs, snakemake, squeeze, tiny_demo_config
from sacrebleu.significance import PairedTest

from aiayn.evaluation.replicates import mean_and_spread, strata, stratified_ar_p
from aiayn.report.tables import build, csv_lines, over_seeds, records_of, run_frame, write_table
from aiayn.study import config as cfg
from aiayn.study.config import ConfigError
from aiayn.study.grid import Study

REF = [
    "the cat sat on the mat today",
    "a dog ran in the park at noon",
    "we saw three birds over the river",
    "she reads a long book every night",
    "the train left the station late again",
    "he bought fresh bread and cheese here",
]


# -- the statistics --------------------------------------------------------------------------------
def test_mean_and_sample_spread_by_hand():
    mean, s_sel = mean_and_spread([27.1, 27.5, 26.9])
    # mean 81.5 / 3; deviations -1/15, 1/3, -4/15: squares sum to 0.186667, over n - 1 = 2
    assert mean == pytest.approx(27.166667, abs=1e-6) and s_sel == pytest.approx(0.305505, abs=1e-6)
    assert mean_and_spread([30.0]) == (30.0, None)  # one seed: no spread
    with pytest.raises(ValueError):
        mean_and_spread([])


def noisy(lines: list[str], rng: np.random.Generator, p: float) -> list[str]:
    """Each word replaced by "x" with probability p."""
    return [" ".join("x" if rng.random() < p else w for w in line.split()) for line in lines]


def test_one_seed_each_is_sacrebleus_paired_approximate_randomization():
    """With one replicate per system the stratified test is sacreBLEU's paired AR test (the same
    draws with the same seed): p-values equal to the last digit."""
    rng = np.random.default_rng(0)
    ref = REF * 5
    for p_base, p_sys in ((0.2, 0.35), (0.3, 0.3), (0.1, 0.6)):
        base, system = noisy(ref, rng, p_base), noisy(ref, rng, p_sys)
        test = PairedTest(
            [("base", base), ("system", system)], {"BLEU": sacrebleu.metrics.BLEU()}, [ref], "ar", n_samples=500
        )
        theirs = test()[1]["BLEU"][1].p_value
        assert stratified_ar_p(ref, [base], [system], 500) == pytest.approx(theirs, abs=1e-12)


def sentence_stats(hyps, ref) -> np.ndarray:
    """sacreBLEU's BLEU sufficient statistics of each sentence (its public sentence scores)."""
    metric = sacrebleu.metrics.BLEU()
    rows = []
    for h, r in zip(hyps, ref):
        s = metric.sentence_score(h, [r])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.asarray(rows, dtype=np.int64)


def corpus_bleu(stats) -> float:
    return sacrebleu.metrics.BLEU.compute_bleu(list(stats[2:6]), list(stats[6:10]), stats[0], stats[1]).score


def exact_p(ref, base, system) -> float:
    """The exact stratified permutation test: every one of the 2^(k*n) swaps of a (replicate,
    sentence) pair's two hypotheses, the statistic |BLEU(all of A) - BLEU(all of B)|."""
    a = np.concatenate([sentence_stats(h, ref) for h in base])
    b = np.concatenate([sentence_stats(h, ref) for h in system])
    observed = abs(corpus_bleu(a.sum(0)) - corpus_bleu(b.sum(0)))
    assert observed == pytest.approx(
        abs(
            sacrebleu.corpus_bleu(sum(base, []), [ref * len(base)]).score
            - sacrebleu.corpus_bleu(sum(system, []), [ref * len(system)]).score
        )
    )  # the statistics are sacreBLEU's corpus BLEU
    beyond, total = 0, 0
    for swap in itertools.product((False, True), repeat=len(a)):
        mask = np.array(swap)[:, None]
        x, y = np.where(mask, b, a).sum(0), np.where(mask, a, b).sum(0)
        beyond += abs(corpus_bleu(x) - corpus_bleu(y)) > observed
        total += 1
    return beyond / total


def test_several_seeds_converge_to_the_exact_permutation_test():
    """Two replicates of 5 sentences each: 2^10 assignments, enumerated; the randomized test with
    20,000 shuffles lands within its sampling error (sd < 0.004) of the exact p-value."""
    ref = REF[:5]
    rng = np.random.default_rng(3)
    base = [noisy(ref, rng, 0.2), noisy(ref, rng, 0.25)]
    system = [noisy(ref, rng, 0.45), noisy(ref, rng, 0.4)]
    exact = exact_p(ref, base, system)
    assert 0.01 < exact < 0.9  # a case where the test has something to decide
    assert stratified_ar_p(ref, base, system, 20000) == pytest.approx(exact, abs=0.015)


def test_identical_and_opposite_systems():
    ref = REF * 10
    same = [list(ref), noisy(ref, np.random.default_rng(1), 0.3)]
    assert stratified_ar_p(ref, same, copy.deepcopy(same), 200) == 1.0  # no difference, nothing to test
    wrong = [["x y z"] * len(ref)] * 2
    assert stratified_ar_p(ref, same, wrong, 200) == pytest.approx(1 / 201)
    # replicates as many on each side: paired in order; else every one of one side with every one of the other
    assert strata(["b1", "b2"], ["s1", "s2"]) == (["b1", "b2"], ["s1", "s2"])
    assert strata(["b1", "b2", "b3"], ["s1"]) == (["b1", "b2", "b3"], ["s1", "s1", "s1"])
    assert strata(["b1", "b2"], ["s1", "s2", "s3"]) == (["b1", "b2"] * 3, ["s1", "s1", "s2", "s2", "s3", "s3"])
    assert stratified_ar_p(ref, same, [wrong[0]], 200) == stratified_ar_p(ref, same, [wrong[0]] * 2, 200)


# -- the grid ------------------------------------------------------------------------------------
def demo_config(**changes) -> dict:
    config = tiny_demo_config()
    for name, seeds in changes.items():
        config["experiments"][name]["seeds"] = seeds
    return config


def test_seeds_make_one_run_each_named_after_the_row():
    config = demo_config()
    config["experiments"]["base"]["seeds"] = [1, 2, 3]
    config["experiments"]["big"]["seeds"] = [4, 5]  # its own seed (1) not among them: the first is its
    study = Study(cfg.validate(config))
    assert study.replicates("base") == ["base", "base.seed-2", "base.seed-3"]
    assert study.replicates("big") == ["big", "big.seed-5"] and study.experiment("big")["train"]["seed"] == 4
    assert study.experiment("base.seed-3")["train"]["seed"] == 3 and study.experiment("base.seed-3")["tables"] == []
    assert "base.seed-2" in study.trained and "base.seed-2" not in study.reported
    plan = {(e.experiment, e.testset): e.model for e in study.evaluations()}
    assert plan[("base.seed-2", "test")] == "average" and plan[("base.seed-2", "dev")] == "final"
    spec = {e["name"]: e for e in study.table_spec(3)}
    assert set(spec) == set(study.in_table(3))  # one row per experiment, its seeds inside
    assert spec["base"]["replicates"] == [
        {"seed": 1, "name": "base"},
        {"seed": 2, "name": "base.seed-2"},
        {"seed": 3, "name": "base.seed-3"},
    ]
    assert study.table_scores(3).count("results/base.seed-3/dev.score.json") == 1


def test_study_wide_seeds_and_what_they_cannot_apply_to():
    config = tiny_demo_config()
    config["seeds"] = [1, 2]
    for name in list(config["experiments"]):
        config["experiments"][name].pop("seeds", None)
    study = Study(cfg.validate(config))
    assert study.replicates("t3-D-ls0.0") == ["t3-D-ls0.0", "t3-D-ls0.0.seed-2"]
    assert study.replicates("parse") == ["parse"]  # a tuned experiment keeps one seed per candidate
    config["experiments"]["parse"]["seeds"] = [1, 2]
    with pytest.raises(ConfigError, match="experiments.parse.seeds: a selected experiment"):
        Study(cfg.validate(config))
    config = demo_config(base=[1, 2])
    config["experiments"]["base.seed-2"] = dict(config["experiments"]["big"])
    with pytest.raises(ConfigError, match="would be named base.seed-2, an experiment of its own"):
        Study(cfg.validate(config))
    for bad in ([1, 1], [-1], ["a"]):
        with pytest.raises(ConfigError, match="seeds"):
            cfg.validate(demo_config(base=bad))


def dry_run(tmp_path, config: dict):
    (tmp_path / "study.yaml").write_text(json.dumps(config))
    run = snakemake("-n", "--configfile", "study.yaml", "--replace-workflow-config", cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    return job_counts(planned_jobs(run.stdout + run.stderr))


def test_the_dag_plans_k_trainings_per_row(tmp_path):
    for name in ("Snakefile", "workflow", "profiles"):
        (tmp_path / name).symlink_to(ROOT / name)
    one = tiny_demo_config()
    for exp in one["experiments"].values():
        exp.pop("seeds", None)
    three = demo_config(base=[1, 2, 3], big=[1, 2, 3])
    for exp in ("t3-A-h1",):
        three["experiments"][exp].pop("seeds", None)
    a, b = dry_run(tmp_path, one), dry_run(tmp_path, three)
    assert b["train"] == a["train"] + 4 and b["average"] == a["average"] + 4  # 2 more seeds of 2 rows
    assert b["translate"] == a["translate"] + 8 and b["score"] == a["score"] + 8  # test and dev of each
    assert b["tables"] == a["tables"] and b["figures"] == a["figures"]  # one row, one figure per experiment


# -- the tables ------------------------------------------------------------------------------------
def run_files(results, name, dev_ppl, hyp, *, testset="dev", bleu=None):
    """A finished run as the pipeline leaves it: metrics, the decoded dev set and its score."""
    folder = results / name
    folder.mkdir(parents=True)
    lines = [
        {
            "event": "start",
            "step": 0,
            "world_size": 1,
            "device_name": "cpu",
            "params": 600_000,
            "wall": 0.0,
            "precision": "fp32",
        },
        {
            "step": 200,
            "loss": 1.0,
            "lr": 1e-3,
            "tgt_tokens_per_s": 1.0,
            "tgt_tokens_per_update": 1000,
            "flops_per_update": 1e9,
            "wall": 60.0,
        },
        {"step": 200, "dev_ppl": dev_ppl, "dev_nll": 0.1},
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / f"{testset}.hyp").write_text("".join(h + "\n" for h in hyp))
    (results / "ref.txt").write_text("".join(r + "\n" for r in REF * 8))
    score = {
        "lines": len(hyp),
        "hyp": str(folder / f"{testset}.hyp"),
        "ref": str(results / "ref.txt"),
        "tokenized_bleu": {"score": bleu if bleu is not None else sacrebleu.corpus_bleu(hyp, [REF * 8]).score},
        "sacrebleu": {"score": sacrebleu.corpus_bleu(hyp, [REF * 8]).score, "signature": "nrefs:1"},
    }
    (folder / f"{testset}.score.json").write_text(json.dumps(score))


def table3_spec(name, row, seeds, model=None):
    model = model or {"N": 2, "d_model": 96, "d_ff": 384, "h": 4, "d_k": 24, "d_v": 24, "P_drop": 0.1}
    return {
        "name": name, "row": row, "dataset": "eng-zil", "testset": "dev", "model": {**model, "init": "t2t"},
        "eps_ls": 0.1, "steps": 200, "average": 1, "paper": {}, "scoring": {}, "preset": "base",
        "task": "translation", "pair": ["eng", "zil"], "decode": {"beam": 4},
        "train": {"steps": 200, "tokens_per_update": 1000, "warmup_steps": 100, "eps_ls": 0.1},
        "replicates": [{"seed": s, "name": name if i == 0 else f"{name}.seed-{s}"} for i, s in enumerate(seeds)],
    }  # fmt: skip


@pytest.fixture
def three_rows(tmp_path):
    """base and a much worse row A with 3 seeds each, a row D with one seed as good as base."""
    rng = np.random.default_rng(7)
    ref = REF * 8
    for i, (name, ppl) in enumerate((("base", 1.20), ("base.seed-2", 1.30), ("base.seed-3", 1.25))):
        run_files(tmp_path, name, ppl, noisy(ref, rng, 0.1), bleu=80.0 + i)
    for i, (name, ppl) in enumerate((("A", 1.8), ("A.seed-2", 1.6), ("A.seed-3", 1.7))):
        run_files(tmp_path, name, ppl, noisy(ref, rng, 0.5), bleu=40.0 + 2 * i)
    run_files(tmp_path, "D", 1.21, noisy(ref, rng, 0.1), bleu=80.5)
    specs = [table3_spec("base", "base", [1, 2, 3]), table3_spec("A", "A", [1, 2, 3], {
        "N": 2, "d_model": 96, "d_ff": 384, "h": 1, "d_k": 96, "d_v": 96, "P_drop": 0.1}),
        table3_spec("D", "D", [1])]  # fmt: skip
    return tmp_path, specs


def test_table3_over_seeds_cells_marks_and_csv(three_rows):
    results, specs = three_rows
    rows = write_table(3, experiments=specs, results=results, bootstrap=200, log=lambda *_: None)
    base, a, d = rows
    assert base["seeds"] == 3 and base["dev_bleu"] == pytest.approx(81.0) and base["dev_bleu_s_sel"] == 1.0
    assert base["dev_ppl"] == pytest.approx(1.25) and base["dev_ppl_s_sel"] == pytest.approx(0.05)
    assert a["dev_bleu"] == pytest.approx(42.0) and a["dev_bleu_s_sel"] == pytest.approx(2.0)
    assert a["test"] == (
        "stratified approximate randomization, seeds paired in order: A, A.seed-2, A.seed-3 against base, "
        "base.seed-2, base.seed-3"
    )
    assert a["p_value_vs_base"] == pytest.approx(1 / 201) and a["significant"] == "yes"
    assert d["seeds"] == 1 and d["dev_bleu_s_sel"] is None and d["dev_bleu"] == 80.5
    # one run against base's three: against all three, the runs base's mean (81.0) is over, not its first (80.0)
    assert (
        d["test"]
        == "stratified approximate randomization, every pair of runs: D against base, base.seed-2, base.seed-3"
    )
    assert d["significant"] == "no" and d["dev_bleu_vs_base"] == "worse"
    hyps = {n: (results / n / "dev.hyp").read_text().splitlines() for n in ("base", "base.seed-2", "base.seed-3", "D")}
    bases = [hyps["base"], hyps["base.seed-2"], hyps["base.seed-3"]]
    assert d["p_value_vs_base"] == stratified_ar_p(REF * 8, bases, [hyps["D"]] * 3, 200)
    assert d["p_value_vs_base"] != stratified_ar_p(REF * 8, bases[:1], [hyps["D"]], 200)  # base's first run alone
    md = squeeze((results / "tables/table3.md").read_text())
    assert "| A [2] |  |  |  | 1 | 96 | 96 |  |  |  | 1.70 | 42.00 | 0.60 |" in md  # only what differs from base
    assert "2. A: mean of 3 seeds (PPL s_sel 0.10, BLEU s_sel 2.00);" in flat(md)
    assert "p = 0.0050 against base, significant (stratified approximate randomization, seeds paired in order: A, " \
        "A.seed-2, A.seed-3 against base, base.seed-2, base.seed-3)" in flat(md)  # fmt: skip
    assert "stratified approximate randomization (Clark et al. 2011)" in flat(md)
    table = list(csv.DictReader((results / "tables/table3.csv").open()))
    assert [(r["experiment"], r["seed"], r["replicate_of"]) for r in table] == [
        ("base", "", ""), ("base", "1", "base"), ("base.seed-2", "2", "base"), ("base.seed-3", "3", "base"),
        ("A", "", ""), ("A", "1", "A"), ("A.seed-2", "2", "A"), ("A.seed-3", "3", "A"),
        ("D", "1", ""),
    ]  # fmt: skip
    assert [float(r["dev_bleu"]) for r in table[1:4]] == [80.0, 81.0, 82.0]
    # each row's direction is that of the means over the very runs its test names
    bleu = {r["experiment"]: float(r["dev_bleu"]) for r in table if r["seed"]}
    for row in (a, d):
        ours, theirs = (names.split(", ") for names in row["test"].split(": ", 1)[1].split(" against "))
        mean = lambda names: sum(bleu[n] for n in names) / len(names)  # noqa: E731
        assert row["dev_bleu_vs_base"] == ("better" if mean(ours) > mean(theirs) else "worse"), row["test"]


def test_a_row_that_ignores_its_input_is_tested_and_counted_nowhere(three_rows):
    """D writes one sentence whatever its source: no p-value, no direction, and Table 3's summary line
    leaves it out, naming it; a seed of A that does the same is left out of A's mean and test."""
    results, specs = three_rows
    specs[0]["paper"], specs[1]["paper"], specs[2]["paper"] = (
        {"dev_ppl": 4.92, "dev_bleu": 25.8},
        {"dev_ppl": 5.29, "dev_bleu": 24.9},
        {"dev_ppl": 4.67, "dev_bleu": 25.3},
    )
    for name in ("D", "A.seed-3"):
        score = json.loads((results / name / "dev.score.json").read_text())
        Path(score["hyp"]).write_text("the cat sat on the mat today\n" * len(REF * 8))
    rows = write_table(3, experiments=specs, results=results, bootstrap=200, log=lambda *_: None)
    _, a, d = rows
    assert d["status"] == "ignores its input" and d["p_value_vs_base"] is None and d["as_paper"] is None
    assert d["dev_bleu_vs_base"] is None and d["moves_as_paper"] is None
    assert a["dev_bleu"] == pytest.approx(41.0) and a["test"].endswith(
        ": A, A.seed-2 against base, base.seed-2, base.seed-3"
    )
    assert a["status"] == "2 of 3 seeds done, 1 left out (ignores its input)"
    md = flat((results / "tables/table3.md").read_text())
    assert "1 of 1 variations move as in the paper" in md and "1 of them significantly" in md  # A alone
    assert "left out, no result: D (ignores its input)" in md and "pending or without" not in md


def test_a_row_with_a_seed_still_training_says_so(three_rows):
    results, specs = three_rows
    (results / "A.seed-3/dev.score.json").unlink()
    _, a, _ = build(3, results, specs)
    assert a["status"] == "pending (2 of 3 seeds done)" and a["dev_bleu"] == pytest.approx(41.0)
    assert a["seeds"] == 3 and a["seeds_done"] == 2
    from aiayn.report.compact import note

    assert "mean of 2 of 3 seeds" in note(3, a)  # what the figure is over, not what is planned


def test_the_delta_against_the_paper_is_the_means(monkeypatch):
    """Table 2 and 4's delta is taken of the mean over seeds, for a row of the paper's setting."""
    from aiayn.report import tables

    exp = {"name": "base-en-de", "paper": {"bleu": 27.3}, "replicates": [{"seed": 1, "name": "base-en-de"},
           {"seed": 2, "name": "base-en-de.seed-2"}]}  # fmt: skip
    bleu = {"base-en-de": 27.9, "base-en-de.seed-2": 27.5}

    def one(layout, spec, comparable=True):
        b = bleu[spec["name"]]
        delta = b - 27.3 if comparable else None
        return {
            "experiment": spec["name"],
            "status": "done",
            "bleu": b,
            "delta": delta,
            "sacrebleu": b - 1,
            "bleu_wmt": b,
        }

    monkeypatch.setattr(tables, "row2", one)
    frame = run_frame(2, None, [exp])
    (row,) = records_of(over_seeds(2, frame, [exp]))
    assert row["bleu"] == pytest.approx(27.7) and row["delta"] == pytest.approx(0.4)
    assert row["sacrebleu"] == pytest.approx(26.7) and row["bleu_s_sel"] == pytest.approx(0.2**0.5 * 0.2**0.5 * 2**0.5)
    lines = csv_lines([row], frame, [exp])
    assert [(r["experiment"], r["seed"]) for r in lines] == [
        ("base-en-de", None), ("base-en-de", 1), ("base-en-de.seed-2", 2)
    ]  # fmt: skip
    monkeypatch.setattr(tables, "row2", lambda layout, spec: one(layout, spec, comparable=False))
    frame = run_frame(2, None, [exp])
    assert records_of(over_seeds(2, frame, [exp]))[0]["delta"] is None
