"""The paper's Tables 2, 3 and 4 with our numbers beside the paper's, from whatever has finished,
built as pandas data frames.

A table is a join of records: one line per run of each of its rows (the row's seeds), the cells
of that run read from its records (score file, metrics.jsonl, average.json, selected.json, its
dataset's train.report.json; `run_frame`), then one line per row (`over_seeds`: its own run's
cells, the mean and the spread s_sel of its figures over its finished runs by group), written as
CSV (every column, each run's line under its row) and as Markdown and HTML (`aiayn.report.notes`:
the paper's table with our rows in it, `aiayn.report.compact`, and the words around the numbers).
A run whose score file is missing shows as pending, with its progress (step / total) if its
metrics exist. Every file is named by `Layout`; the table's spec is `Study.table_spec` (the
experiments and the paper's numbers from the config). Tables read and join; what they score is
scored elsewhere (baselines: `aiayn.evaluation.baselines`, p-values: `aiayn.evaluation.score`'s
paired bootstrap and `aiayn.evaluation.replicates`' stratified test).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiayn.errors import UserError
from aiayn.evaluation import baselines, dependence
from aiayn.evaluation.replicates import SIGNIFICANCE, mean_and_spread, stratified_ar_p
from aiayn.evaluation.score import paired_bootstrap_p, reference_cells
from aiayn.io import atomic_paths, readable
from aiayn.report.compact import IGNORES_INPUT, no_result
from aiayn.report.format import html_of, markdown_of, to_csv
from aiayn.report.notes import cleaning_note, document
from aiayn.runtime import metrics, records
from aiayn.runtime.hardware import peak_flops
from aiayn.runtime.lines import read_lines
from aiayn.study import config as cfg
from aiayn.study import paper
from aiayn.study.grid import TABLE_SPEC_KEYS, Study
from aiayn.study.layout import Layout

# the base model's columns of Table 3, the fallback when a table has no base row
BASE_MODEL = {k: paper.MODEL["base"][k] for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "init")}


def paper_cost(hours: float, gpus: int, gpu: str) -> float | None:
    """Footnote 5: training time × number of GPUs × sustained single-precision FLOP/s of the GPU."""
    capacity = peak_flops(gpu, "fp32")
    return hours * 3600 * gpus * capacity if capacity else None


def averaged_steps(layout: Layout, experiment: str) -> str | None:
    """The steps average.pt averaged (from average.json), e.g. "5: 96000..100000 every 1000"."""
    path = Path(layout.average_record(experiment))
    if not path.exists():
        return None
    steps = records.read(path, "average")["steps"]
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    if len(steps) > 2 and len(gaps) == 1:
        return f"{len(steps)}: {steps[0]}..{steps[-1]} every {gaps.pop()}"
    return f"{len(steps)}: " + ", ".join(map(str, steps))


def selected_candidate(layout: Layout, experiment: str) -> str | None:
    """What the dev-set selection (§6.3) took, from selected.json: "P_drop 0.2, lr_scale 0.5 (dev f1
    88.10, best of 6)"."""
    path = Path(layout.selected(experiment))
    if not path.exists():
        return None
    record = records.read(path, "selected")
    setting = ", ".join(f"{k} {v:g}" for k, v in record["setting"].items())
    return f"{setting} (dev {record['metric']} {record['value']:.2f}, best of {len(record['candidates'])})"


def train_pairs(layout: Layout, exp: dict) -> int | None:
    """Training pairs (sentences for parsing) the run's dataset kept, or None before it is prepared."""
    report = Path(layout.train_report(exp["dataset"]))
    if report.exists():
        return records.read(report, "train report")["kept"]
    text = Path(layout.text(exp["dataset"], "train", "src"))
    if exp.get("task") == "parsing" and text.exists():
        with open(readable(text, "the training text"), "rb") as f:
            return sum(1 for _ in f)
    return None


def what_was_run(table: int, exp: dict, m: dict, score: dict | None, *, layout: Layout, figure: str) -> dict:
    """The cells that say what a row's run was, and whether it is the paper's setting (`comparable`)."""
    lines = score.get("lines", score.get("all", {}).get("sentences")) if score else None
    comparable, text = paper.setting(
        table, exp, figure, updates=m["step"], lines=lines, train_pairs=train_pairs(layout, exp)
    )
    hardware = None
    if m["device"]:
        hardware = "CPU" if m["device"] == "cpu" else f"{m['gpus']} x {m['device']}"
    return {
        "setting": text,
        "comparable": comparable,
        "preset": exp["preset"],
        "updates": f"{m['step']:,} of {exp['train']['steps']:,}",
        "tgt_tokens_per_update": m["tgt_tokens"] / m["step"] if m["step"] else None,
        "hardware": hardware,
    }


def read_score(layout: Layout, experiment: str, testset: str, task: str = "translation") -> dict | None:
    """The score file of `experiment` on `testset`, checked as a score of `task`, or None before it exists."""
    path = Path(layout.score(experiment, testset))
    if not path.exists() and not path.is_symlink():
        return None
    kind, record = records.read_score(path)
    if kind != f"{task} score":
        raise UserError(f"{path}: a {kind}, where the {task} score of {experiment} is meant; rerun its score step")
    return record


def read_run(layout: Layout, exp: dict, task: str = "translation") -> tuple[dict, dict | None, dict | None, str]:
    """(metrics summary, score or None, what the score says of the output's dependence on the input,
    status) of one run of a row."""
    m = metrics.summary(layout.metrics(exp["name"]))
    s = read_score(layout, exp["name"], exp["testset"], task)
    inputs = dependence.of_score(s, task)
    if s and inputs and inputs.get("ignores_input"):
        status = IGNORES_INPUT  # not a result: never "done", no delta (aiayn.evaluation.dependence)
    else:
        status = "done" if s else f"pending (step {m['step']}/{exp['steps']})" if m["step"] else "pending"
    return m, s, inputs, status


# the figures of a row that are averaged over its seeds (each with its spread, `<key>_s_sel`)
SEED_METRICS = {2: ("bleu", "bleu_wmt", "sacrebleu"), 3: ("dev_ppl", "dev_bleu"), 4: ("f1", "precision", "recall")}
# the figure a row's delta against the paper is taken of
DELTA_OF = {2: ("bleu", "bleu"), 4: ("f1", "f1")}


def runs(exp: dict) -> list[tuple[int | None, dict]]:
    """(seed, spec) of each run of a row: its `replicates` (Study.table_spec), the row's own spec
    renamed for each; a spec without replicates is one run."""
    replicates = exp.get("replicates") or [{"seed": None, "name": exp["name"]}]
    return [(r["seed"], {**exp, "name": r["name"]}) for r in replicates]


def run_frame(number: int, layout: Layout, experiments: list[dict], base: dict | None = None) -> pd.DataFrame:
    """One line per run of each row of Table `number` (each row's seeds, in order): the cells of
    that run (row2, row3 or row4: Table 3's against `base`, the table's base row), and `_row` (the
    row's index), `_seed`, `_own` (the row's own run). Cells are Python objects (dtype object): None
    stays None, an int an int."""
    one = {2: row2, 3: lambda layout, spec: row3(layout, spec, base), 4: row4}[number]
    lines = [
        {**one(layout, spec), "_row": i, "_seed": seed, "_own": spec["name"] == exp["name"]}
        for i, exp in enumerate(experiments)
        for seed, spec in runs(exp)
    ]
    return pd.DataFrame(lines, dtype=object)


def over_seeds(number: int, frame: pd.DataFrame, experiments: list[dict]) -> pd.DataFrame:
    """The rows of Table `number` from its `run_frame`: each row's own run's cells, where the row has
    several runs each figure of SEED_METRICS the mean over its finished runs and `<figure>_s_sel`
    (beside it) their sample standard deviation (None for one run); `status` says how many seeds are
    done while some are not; `delta` is taken of the mean; `seeds` counts the runs, `seed` is the one
    run's seed."""
    if frame.empty:  # a table none of whose experiments is shown
        return frame
    groups = frame.groupby("_row", sort=True)
    seeds, done = groups.size(), frame[frame["status"] == "done"].groupby("_row").size()
    rows = frame[frame["_own"]].set_index("_row").sort_index()
    several = seeds > 1
    for key in SEED_METRICS[number]:
        finished = frame[(frame["status"] == "done") & frame[key].notna()]
        stats = finished.groupby("_row")[key].agg(lambda values: mean_and_spread(list(values)))
        stats = stats[several.reindex(stats.index)]
        at = rows.columns.get_loc(key) + 1
        rows.insert(at, f"{key}_s_sel", pd.Series([None] * len(rows), index=rows.index, dtype=object))
        for i, (mean, spread) in stats.items():
            rows.at[i, key], rows.at[i, f"{key}_s_sel"] = mean, spread
    ignoring = frame[frame["status"] == IGNORES_INPUT].groupby("_row").size()
    for i in rows.index[several]:
        n, k, left_out = seeds[i], done.get(i, 0), ignoring.get(i, 0)
        if left_out == n:
            rows.at[i, "status"] = f"{IGNORES_INPUT} (all {n} seeds)"
            continue
        if k == 0:  # no run counts yet: no figure (not one of a run that ignores its input)
            for key in SEED_METRICS[number]:
                rows.at[i, key] = None
        if k + left_out < n:
            rows.at[i, "status"] = f"pending ({k} of {n} seeds done)"
        elif left_out:
            rows.at[i, "status"] = f"{k} of {n} seeds done, {left_out} left out ({IGNORES_INPUT})"
    if number in DELTA_OF:
        key, figure = DELTA_OF[number]
        for i in rows.index[rows["delta"].notna()]:
            rows.at[i, "delta"] = rows.at[i, key] - experiments[i]["paper"][figure]
    rows["seeds"] = seeds.astype(object)
    rows["seeds_done"] = pd.Series([done.get(i, 0) if seeds[i] > 1 else None for i in rows.index], index=rows.index,
                                   dtype=object)  # fmt: skip
    own_seed = [frame.loc[frame["_row"] == i, "_seed"].iloc[0] if seeds[i] == 1 else None for i in rows.index]
    rows["seed"] = pd.Series(own_seed, index=rows.index, dtype=object)
    rows["replicate_of"] = None
    return rows.drop(columns=["_seed", "_own"])


def csv_lines(rows: list[dict], frame: pd.DataFrame, experiments: list[dict]) -> list[dict]:
    """The CSV's lines: each row (`rows`, the table's: its experiments' rows, then any others), followed
    by a line of each of its runs where it has several (that run's cells, `seed` and `replicate_of`:
    the row's experiment)."""
    several = [] if frame.empty else records_of(frame[frame.groupby("_row")["_row"].transform("size") > 1])
    lines = []
    for i, row in enumerate(rows):
        lines.append(row)
        lines += [
            {**{k: v for k, v in run.items() if not k.startswith("_")}, "seeds": 1, "seeds_done": None,
             "seed": run["_seed"], "replicate_of": experiments[i]["name"]}
            for run in several if run["_row"] == i
        ]  # fmt: skip
    return lines


def records_of(table: pd.DataFrame) -> list[dict]:
    """The lines of a table frame as dicts, None where a cell is empty."""
    return [{k: (None if v is None or (isinstance(v, float) and v != v) else v) for k, v in r.items()}
            for r in table.to_dict("records")]  # fmt: skip


def row2(layout: Layout, exp: dict) -> dict:
    m, s, inputs, status = read_run(layout, exp)
    ours = s["tokenized_bleu"]["score"] if s else None
    theirs = exp["paper"].get("bleu")
    flops = m["flops"]
    peak = peak_flops(m["device"], m["precision"]) if m["device"] else None  # the run's own arithmetic
    cells = reference_cells(s)
    if s:  # the reference the score was scored against, whatever the config says now
        exp = {**exp, "scoring": {**exp["scoring"], "reference": cells["bleu_reference"]}}
    run = what_was_run(2, exp, m, s, layout=layout, figure="bleu")
    return {
        "experiment": exp["name"],
        "dataset": exp["dataset"],
        "testset": exp["testset"],
        "status": status,
        "paper_bleu": theirs,
        "bleu": ours,
        **cells,
        "delta": ours - theirs if ours is not None and run["comparable"] and status == "done" else None,
        **run,
        "sacrebleu": s["sacrebleu"]["score"] if s else None,
        "lines": s["lines"] if s else None,
        "averaged": exp["average"],
        "averaged_steps": averaged_steps(layout, exp["name"]) if exp["average"] > 1 else None,
        "gpu": m["device"],
        "gpus": m["gpus"],
        "device_hours": m["hours"] * (m["gpus"] or 0),
        "cost_flops_paper_formula": paper_cost(m["hours"], m["gpus"], m["device"]) if m["gpus"] else None,
        "model_flops": flops,
        "mfu": flops / (m["hours"] * 3600 * m["gpus"] * peak) if flops and peak and m["hours"] else None,
        "sacrebleu_signature": s["sacrebleu"]["signature"] if s else None,
        "distinct_outputs": dependence.cell(inputs),
    }


def row3(layout: Layout, exp: dict, base: dict | None) -> dict:
    m, s, inputs, status = read_run(layout, exp)
    model = exp["model"]
    changed = {
        k: v for k, v in model.items() if k in BASE_MODEL and v != (base or {"model": BASE_MODEL})["model"].get(k)
    }
    if exp["eps_ls"] != (base or {}).get("eps_ls", paper.TRAINING["eps_ls"]):
        changed["eps_ls"] = exp["eps_ls"]
    if model.get("positional") == "learned":
        changed["positional"] = "learned"
    return {
        "row": exp.get("row"),
        "experiment": exp["name"],
        "status": status,
        **what_was_run(3, exp, m, s, layout=layout, figure="dev_bleu"),
        "changes": ", ".join(f"{k}={v}" for k, v in changed.items()) if exp.get("row") != "base" else "(base)",
        **{k: model[k] for k in ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop")},
        "eps_ls": exp["eps_ls"],
        "steps": exp["steps"],
        "dev_ppl": m["dev_ppl"],
        "paper_dev_ppl": exp["paper"].get("dev_ppl"),
        "dev_bleu": s["tokenized_bleu"]["score"] if s else None,
        "paper_dev_bleu": exp["paper"].get("dev_bleu"),
        "params_M": m["params"] / 1e6 if m["params"] else None,
        "paper_params_M": exp["paper"].get("params_m"),
        "p_value_vs_base": None,
        "test": None,
        "significant": None,
        "as_paper": None,
        "distinct_outputs": dependence.cell(inputs),
    }


# Table 3's figures compared with base: the figure, and whether lower is better
DIRECTIONS = (("dev_ppl", "ppl", True), ("dev_bleu", "BLEU", False))


def direction(value: float | None, base: float | None, lower_is_better: bool) -> str | None:
    """ "better", "worse" or "same" of `value` against `base` (None when either is missing)."""
    if value is None or base is None:
        return None
    if abs(value - base) < 1e-9:
        return "same"
    return "better" if (value < base) == lower_is_better else "worse"


def add_directions(rows: list[dict], experiments: list[dict]) -> None:
    """Table 3's `as_paper`: for each variation, whether it moved dev perplexity and dev BLEU against
    the base row the way the paper's row moved against the paper's base (worse or better), and
    whether the test finds its BLEU difference significant. "yes" when every figure the paper moved
    moved the same way here, "no" when none did, "partly" otherwise; the CSV has each direction
    (`<figure>_vs_base`, `paper_<figure>_vs_base`). Each figure is the mean over the runs its test
    compares (`add_p_values`). A row that ignores its input, or a base that does, judges nothing."""
    pairs = list(zip(experiments, rows))
    base = next(((e, r) for e, r in pairs if e.get("row") == "base"), None)
    for exp, row in pairs:
        for key, _, lower in DIRECTIONS:
            row[f"{key}_vs_base"] = row[f"paper_{key}_vs_base"] = None
        row["moves_as_paper"] = None
        if base is None or exp is base[0]:
            row["as_paper"] = "(base)" if base is not None else None
            continue
        if no_result(row) or no_result(base[1]):
            row["as_paper"] = None
            continue
        said, agree, compared = [], 0, 0
        for key, label, lower in DIRECTIONS:
            ours = direction(row[key], base[1][key], lower)
            theirs = direction(exp["paper"].get(key), base[0]["paper"].get(key), lower)
            row[f"{key}_vs_base"], row[f"paper_{key}_vs_base"] = ours, theirs
            if ours is None or theirs is None:
                continue
            if theirs == "same":
                said.append(f"{label} {ours} (paper: no change)")
                continue
            compared += 1
            agree += ours == theirs
            said.append(f"{label} {ours}" + (" as paper" if ours == theirs else f" (paper {theirs})"))
        if not compared:
            row["as_paper"] = None
            continue
        verdict = "yes" if agree == compared else "no" if agree == 0 else "partly"
        row["moves_as_paper"] = verdict
        significance = {"yes": "; BLEU significant", "no": "; BLEU not significant"}.get(row.get("significant"), "")
        row["as_paper"] = f"{verdict}: {', '.join(said)}{significance}"


def row4(layout: Layout, exp: dict) -> dict:
    m, s, inputs, status = read_run(layout, exp, "parsing")
    run = what_was_run(4, exp, m, s, layout=layout, figure="f1")
    f1 = s["all"]["f1"] if s else None
    return {
        "row": exp.get("row"),
        "experiment": exp["name"],
        "status": status,
        "paper_f1": exp["paper"].get("f1"),
        "f1": f1,
        "delta": f1 - exp["paper"]["f1"] if f1 is not None and run["comparable"] and status == "done" else None,
        "testset": exp["testset"],
        "lines": s["all"]["sentences"] if s else None,
        "selected_on_dev": selected_candidate(layout, exp["name"]),
        **run,
        "precision": s["all"]["precision"] if s else None,
        "recall": s["all"]["recall"] if s else None,
        "error_sentences": s["all"]["error_sentences"] if s else None,
        "distinct_outputs": dependence.cell(inputs),
    }


OUTSIDE_RUN = " (outside run:)"  # the mark of a finished row of an experiment the study's `run:` left out


def shown(number: int, layout: Layout, experiments: list[dict]) -> tuple[list[dict], pd.DataFrame, pd.DataFrame]:
    """(experiments, rows, runs) of Table `number`: a row per experiment, in order, but of an
    experiment outside the study's `run:` only when one of its runs is scored, its status marked so;
    `runs` is their `run_frame`."""
    base = next((e for e in experiments if e.get("row") == "base"), None)
    experiments = [e for e in experiments if not e.get("outside_run") or scored_runs(layout, e)]
    frame = run_frame(number, layout, experiments, base)
    rows = over_seeds(number, frame, experiments)
    for i, exp in enumerate(experiments):
        if exp.get("outside_run"):
            rows.at[i, "status"] += OUTSIDE_RUN
    return experiments, rows, frame


def build(number: int, results: str | Path, experiments: list[dict]) -> list[dict]:
    """The rows of Table `number` for `experiments` (one row each, in order; of one outside `run:`
    only when finished) from the study's outputs under `results`."""
    experiments, rows, _ = shown(number, Layout(str(results)), experiments)
    rows = records_of(rows)
    if number == 3:
        add_directions(rows, experiments)
    return rows


def with_extra_rows(rows: list[dict], extra: list[dict]) -> list[dict]:
    """`rows` followed by `extra` (e.g. baselines), every row with the same columns."""
    columns = list(rows[0]) if rows else []
    return rows + [{**{k: None for k in columns}, **r} for r in extra]


def scored_runs(layout: Layout, exp: dict) -> list[dict]:
    """The score records of a row's runs that are scored, in seed order."""
    task = exp.get("task", "translation")
    return [sc for _, spec in runs(exp) if (sc := read_score(layout, spec["name"], spec["testset"], task))]


def counted_runs(frame: pd.DataFrame, row: int) -> list[str]:
    """The runs of row `row` of a Table 3 `run_frame` that its figures are the mean of: those done
    (scored, and not of a model that ignores its input), in seed order."""
    done = frame[(frame["_row"] == row) & (frame["status"] == "done") & frame["dev_bleu"].notna()]
    return list(done["experiment"])


def add_p_values(
    rows: list[dict], layout: Layout, experiments: list[dict], frame: pd.DataFrame, *, samples: int
) -> None:
    """Table 3's p_value_vs_base, `test` and `significant`: each row against the base row over the
    runs the two rows' figures (and so their directions, `add_directions`) are the means of
    (`counted_runs`): one run each, sacreBLEU's paired bootstrap; else the stratified test
    (aiayn.evaluation.replicates: seeds paired in order, or every pair of runs where the two rows
    have not as many). `test` names the runs compared."""
    b = next((i for i, e in enumerate(experiments) if e.get("row") == "base"), None)
    base_runs = counted_runs(frame, b) if b is not None else []
    if not base_runs:
        return
    testset = experiments[b]["testset"]
    hyps = lambda names: [list(read_lines(read_score(layout, n, testset)["hyp"])) for n in names]  # noqa: E731
    ref = list(read_lines(read_score(layout, base_runs[0], testset)["ref"]))
    base_hyps = hyps(base_runs)
    for i, row in enumerate(rows):
        ours = counted_runs(frame, i) if i != b else []
        if not ours:
            continue
        if len(ours) == len(base_runs) == 1:
            row["p_value_vs_base"] = paired_bootstrap_p(ref, base_hyps[0], hyps(ours)[0], samples)
            method = "paired bootstrap, one run each (test-set noise only)"
        else:
            row["p_value_vs_base"] = stratified_ar_p(ref, base_hyps, hyps(ours), samples)
            pairs = "seeds paired in order" if len(ours) == len(base_runs) else "every pair of runs"
            method = f"stratified approximate randomization, {pairs}"
        row["test"] = f"{method}: {', '.join(ours)} against {', '.join(base_runs)}"
        row["significant"] = "yes" if row["p_value_vs_base"] < SIGNIFICANCE else "no"


def check_spec(experiments: list) -> None:
    """--experiments is what `Study.table_spec` writes; name what a hand-made one lacks."""
    for i, exp in enumerate(experiments):
        missing = [k for k in TABLE_SPEC_KEYS if not isinstance(exp, dict) or k not in exp]
        if missing:
            name = exp.get("name", f"#{i + 1}") if isinstance(exp, dict) else f"#{i + 1}"
            raise UserError(
                f"--experiments: experiment {name} lacks {', '.join(missing)}; "
                "use --config (or what `snakemake table<n>` passes)"
            )


def table_files(number: int, results, config, *, out_md=None, out_csv=None, out_html=None) -> tuple[Path, Path, Path]:
    """Where table `number` is written: `out_md` or the results' tables folder (`results`, else the
    study `config`'s), the CSV and the HTML beside the Markdown where not given (beside a device, the
    command's guard refuses them: aiayn.io.guard_outputs)."""
    if out_md is None:
        out_md = Layout(str(results or (cfg.load(config)["results"] if config else "results"))).table(number, "md")
    md = Path(out_md)
    return md, Path(out_csv or md.with_suffix(".csv")), Path(out_html or md.with_suffix(".html"))


def derived_files(table: int, *, results, config, out_md, out_csv, out_html) -> tuple[list, list]:
    """The files `tables` writes where no option names them (aiayn.cli.paths): `table_files`' defaults.
    A config it cannot read, or a device to derive from, is said by write_table itself, in its log."""
    try:
        files = table_files(table, results, config, out_md=out_md, out_csv=out_csv, out_html=out_html)
    except UserError:
        return [], []
    given = {"--out-md": out_md, "--out-csv": out_csv, "--out-html": out_html}
    return [(f"{option} (default)", str(path), "file") for (option, v), path in zip(given.items(), files) if not v], []


def write_table(
    number: int,
    *,
    experiments: list | None = None,
    config=None,
    results=None,
    bootstrap: int = 0,
    with_baselines: bool = False,
    study: str | None = None,
    out_md=None,
    out_csv=None,
    out_html=None,
    log=print,
) -> list[dict]:
    """Table `number` as Markdown, CSV and HTML (default: the study's tables folder; the HTML beside
    the Markdown, what Snakemake's report shows) for `experiments`
    (`Study.table_spec`'s, under `results`), or for the study `config` (its results, its
    baselines setting), from whatever has finished. Table 3 gets paired-bootstrap p-values with
    `bootstrap` samples; Tables 2 and 4 the trivial baselines with `with_baselines`."""
    if experiments is not None:
        check_spec(experiments)
        layout = Layout(str(results or "results"))
    elif config is not None:
        loaded = cfg.load(config)
        experiments = Study(loaded).table_spec(number)
        layout = Layout(str(results or loaded["results"]))
        with_baselines = with_baselines or loaded["baselines"]
    else:
        raise UserError("give --experiments (JSON) or --config (the study config)")
    if results is not None and not Path(results).is_dir():  # given: a typo would make a table of nothing
        raise UserError(f"--results {results}: not found; give the study's results folder")
    experiments, rows, frame = shown(number, layout, experiments)
    rows = records_of(rows)
    if number == 3 and bootstrap:
        add_p_values(rows, layout, experiments, frame, samples=bootstrap)
    if number == 3:
        add_directions(rows, experiments)
    if with_baselines and number in (2, 4):
        rows = with_extra_rows(rows, baselines.table_rows(number, layout, experiments))
    md, csv_path, html_path = table_files(
        number, layout.results, None, out_md=out_md, out_csv=out_csv, out_html=out_html
    )
    with atomic_paths(md, csv_path, html_path) as (tmp_md, tmp_csv, tmp_html):
        notes = cleaning_note(layout, experiments) if number == 2 else ""
        parts = document(number, rows, study=study, notes=notes, experiments=experiments)  # one document, written twice
        tmp_md.write_text(markdown_of(parts), encoding="utf-8")
        tmp_csv.write_text(to_csv(csv_lines(rows, frame, experiments)), encoding="utf-8")
        tmp_html.write_text(html_of(parts), encoding="utf-8")
    ours = [r for e, r in zip(experiments, rows) if not e.get("outside_run")]
    outside = len(experiments) - len(ours)
    more = f", and {outside} finished outside run:" if outside else ""
    done = sum(r["status"] == "done" for r in ours)
    log(f"table {number}: {done}/{len(ours)} experiments done{more} -> {md}, {csv_path}, {html_path}")
    return rows
