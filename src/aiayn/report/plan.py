"""The plan a user reads before launching the study: per training and in total, the model FLOPs of
its planned updates, the GPU hours and wall time they take at an MFU, the disk its checkpoints take
at their peak, the host memory it was measured to need, and the Slurm resources its jobs request;
and every experiment's parameter count beside the paper's (`print_parameters`: Table 3's "params").

- FLOPs: the project's own count of an update (`aiayn.runtime.hardware.training_flops`) over
  `tokens_per_update` source and as many target tokens in sentences of the dataset's mean length
  (`MEAN_LENGTH`, the WMT news slice's), times the planned updates.
- MFU, applied only at the GPU and arithmetic it was measured at (`Measured`): the paper's own at
  fp32 on P100 (our FLOPs count of its 100,000 base and 300,000 big updates over its 12 hours and
  3.5 days on 8 P100s at their single-precision peak, footnote 5), and what `benchmarks/gpu.json`
  (benchmarks/gpu.py) measured on the GPU planned for at its precision. A training planned at
  another precision on a measured GPU is assumed no faster than the figure measured there (its MFU
  of the lower of the two peaks); on an unmeasured GPU, the paper's MFU of that GPU's peak at the
  planned precision. Each assumption is named in the plan's header, each row says which it took.
- Disk: what a run keeps (`aiayn.runtime.checkpoint`): `keep_checkpoints` step checkpoints of the
  weights (4 bytes a parameter), RESUMABLE resume checkpoints (the weights and Adam's two moments:
  12 bytes a parameter) and the final model's weights; a few KB of settings aside.
- Host memory and requests: the rehearsal's measured peak RSS of each job (results/rehearsal/cost.csv,
  benchmarks/rehearsal.py; a failed job's row never stands for its good one), times the trainer
  processes a node runs (one a GPU), against the memory the rule requests per node (the profile's
  set-resources), both in GiB: the record counts MiB, and `mem_mb` goes to Slurm's `--mem`, which
  counts MiB a node too; a job that needs more than it asks for is named.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import UserError
from aiayn.io import atomic_write_text, parse_json, readable
from aiayn.model.hparams import ModelConfig
from aiayn.report.format import to_markdown
from aiayn.runtime.checkpoint import RESUMABLE
from aiayn.runtime.hardware import PEAKS, gpu_model, training_flops
from aiayn.study import paper

MEAN_LENGTH = 30  # pieces per sentence and side where no encoded data says: the WMT news slice's, ~1.3 per word
WEIGHT_BYTES = 4  # fp32
RESUME_BYTES = 12  # fp32 weights and Adam's exp_avg and exp_avg_sq


def parameters(model: dict, vocab: int, shared: bool) -> int:
    """The parameter count of a model of these settings (built on torch's meta device: shapes only, no
    training and no data; the vocabulary sizes of its dataset as configured, §5.1: 37k shared EN-DE)."""
    from aiayn.model.transformer import build, count_parameters

    cfg = ModelConfig.from_settings(model, src_vocab=vocab, tgt_vocab=vocab, shared_vocab=shared)
    return count_parameters(build(cfg, device="meta"))


def update_flops(model: dict, vocab: int, tokens: int, length: float) -> float:
    """The FLOPs of one update of `tokens` source and target tokens in sentences of `length`."""
    sentences = max(1, round(tokens / length))
    size = max(1, round(length))
    return training_flops({**model, "tgt_vocab": vocab}, [size] * sentences, [size] * sentences)


@dataclass(frozen=True)
class Measured:
    """The MFU of base and big measured on one GPU at one arithmetic, and where it was measured."""

    name: str  # what a row of the plan calls it: "paper", "measured"
    gpu: str  # a PEAKS entry
    precision: str
    mfu: dict  # {"base": fraction of that precision's peak, "big": ...}
    where: str  # the sentence the plan's header says of it


def paper_mfu() -> dict[str, float]:
    """The paper's MFU of base and big: our FLOPs count of its updates over its GPU time at FP32 peak."""
    out = {}
    for name, run in paper.RUNS.items():  # Table 3's base and big, on EN-DE's vocabulary (§5.1)
        train = paper.TRAIN[name]
        flops = train["steps"] * update_flops(
            paper.MODEL[name], paper.VOCAB_EN_DE, train["tokens_per_update"], MEAN_LENGTH
        )
        out[name] = flops / (run["hours"] * 3600 * run["gpus"] * PEAKS[run["gpu"]]["fp32"])
    return out


def papers() -> Measured:
    """The paper's own figure: fp32 (footnote 5's peak) on its 8 P100s."""
    mfu = paper_mfu()
    return Measured(
        "paper",
        "P100",
        "fp32",
        mfu,
        f"the paper's own: {mfu['base']:.1%} (base) and {mfu['big']:.1%} (big) of the P100's fp32 peak: our FLOPs "
        "count of its 100,000 and 300,000 updates over its 12 hours and 3.5 days on 8 P100s (§5.2) at "
        f"{PEAKS['P100']['fp32'] / 1e12:g} TFLOP/s each (footnote 5)",
    )


def measured_mfu(benchmark: Path | None, gpu: str) -> list[Measured]:
    """What benchmarks/gpu.py measured on `gpu`, one `Measured` per precision with both base and big
    (its uncompiled trainer's updates; none where there is no such file; another GPU's, not used for `gpu`);
    a file that is not such a result is refused naming it."""
    if benchmark is not None and benchmark.is_dir():
        raise UserError(f"--benchmark {benchmark}: a folder, not benchmarks/gpu.py's JSON result; give that file")
    if benchmark is None or not benchmark.is_file():  # none measured yet (write_plan says so)
        return []
    try:
        report = parse_json(readable(benchmark, "a GPU benchmark result").read_text(encoding="utf-8"), finite=False)
        device, date = str(report["device"]), str(report.get("date", "undated"))
        runs: dict[str, dict[str, float]] = {}
        for run in report["training"]:
            if run.get("mfu") is not None and not run.get("compile"):
                runs.setdefault(str(run["precision"]), {})[str(run["preset"])] = float(run["mfu"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise UserError(f"{benchmark}: not a result of benchmarks/gpu.py ({type(exc).__name__}: {exc}); run "
                        "benchmarks/gpu.py again on the GPU, or leave --benchmark out") from None  # fmt: skip
    if not all(0 < v <= 1 for mfu in runs.values() for v in mfu.values()):
        raise UserError(f"{benchmark}: an MFU outside (0, 1]; run benchmarks/gpu.py again")
    return [  # another GPU's too: the plan names it as not used (`throughput`)
        Measured(
            "measured",
            gpu_model(device) or device,
            precision,
            mfu,
            f"measured by benchmarks/gpu.py on {device} ({date}, {benchmark})",
        )
        for precision, mfu in sorted(runs.items())
        if {"base", "big"} <= set(mfu)
    ]


def throughput(figures: list[Measured], gpu: str, precision: str) -> tuple[Measured, float, str, str]:
    """(figure, peak FLOP/s its MFU is taken of, the row's name for it, the header's sentence) for a
    training at `precision` on `gpu` (module docstring): the figure measured there at that arithmetic;
    else one measured on that GPU, of the lower of the two peaks; else the paper's, of `gpu`'s peak."""
    peaks = PEAKS[gpu]
    peak = peaks.get(precision) or peaks["fp32"]
    for fig in figures:
        if (fig.gpu, fig.precision) == (gpu, precision):
            return fig, peak, fig.name, f"{precision} on {gpu}, {fig.where}"
    measure = f"`python benchmarks/gpu.py --precision {precision} --json benchmarks/gpu.json` on {gpu} measures it"
    for fig in figures:
        if fig.gpu == gpu:
            lower = min(peak, peaks[fig.precision])
            return (
                fig,
                lower,
                f"{fig.name}, at {fig.precision}'s rate",
                f"{precision} on {gpu}, at which no MFU was measured: assumed no faster than {fig.precision}, its MFU "
                f"taken of the lower of the two peaks ({lower / 1e12:g} TFLOP/s); the {fig.precision} figure, "
                f"{fig.where}; {measure}",
            )
    fig = figures[-1]  # the paper's: any other was measured on another GPU, which the sentence names
    for other in {f.where: f for f in figures[:-1]}.values():
        measure += f"; not used: the MFU {other.where}, not on {gpu}"
    return (
        fig,
        peak,
        f"{fig.name}, of {gpu}'s peak",
        f"{precision} on {gpu}, where no MFU was measured: assumed the paper's {fig.precision} MFU of the {gpu}'s "
        f"{precision} peak ({peak / 1e12:g} TFLOP/s), optimistic where tensor cores make that peak; "
        f"{fig.where}; {measure}",
    )


def checkpoint_bytes(params: int, keep: int) -> int:
    """What a run's folder of checkpoints holds at its peak (module docstring)."""
    return params * (WEIGHT_BYTES * (keep + 1) + RESUME_BYTES * RESUMABLE)


def measured_costs(path: Path | None) -> dict[tuple[str, str], float]:
    """(rule, job) -> peak RSS in MiB of its runs that ended well, from the rehearsal's cost.csv (empty
    where there is none; its column max_rss_mib, or max_rss_mb, as earlier ones named the same MiB);
    a file that is not such a table (a folder, the Markdown table, an empty file) is refused naming it."""
    if path is None or not os.path.lexists(path):  # none measured yet: the plan's blanks say so
        return {}
    rows: dict = {}
    try:
        with open(readable(path, "the rehearsal's cost table (cost.csv)"), encoding="utf-8") as f:
            table = csv.DictReader(f)
            lacks = [c for c in ("rule", "job") if c not in (table.fieldnames or [])]
            if lacks or not {"max_rss_mib", "max_rss_mb"} & set(table.fieldnames or []):
                raise ValueError(f"its header {table.fieldnames} lacks rule, job or max_rss_mib")
            for r in table:
                rss = float(r.get("max_rss_mib") or r.get("max_rss_mb") or "nan")
                if not math.isfinite(rss) or not 0 <= rss <= 2**24:  # 16 TiB: no process's, in MiB
                    raise ValueError(f"the {r['rule']} job {r['job']}'s peak memory {rss} MiB is not in [0, 2^24]")
                if r.get("exit", "0") in ("0", "0.0"):  # a failed start's row never stands for its good one
                    rows[(r["rule"], r["job"])] = max(rss, rows.get((r["rule"], r["job"]), 0.0))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{path}: not the rehearsal's cost table ({exc}); give results/rehearsal/cost.csv") from None
    return rows


def checked_requests(requests: dict) -> dict:
    """--requests: {rule: {resource: value}}, each value a whole number >= 0 (mem_mb in MiB, gpu, nodes...)."""
    import importlib.util

    for rule, res in requests.items():
        if importlib.util.find_spec(f"aiayn.commands.{rule.replace('-', '_')}") is None:  # a rule is its command
            raise UserError(f"--requests: {rule!r} is no rule of the workflow (a rule is named as its command)")
        if not isinstance(res, dict) or not all(isinstance(v, int) and v >= 0 for v in res.values()):
            raise UserError(f"--requests: {rule}: {json.dumps(res)} is not {{resource: whole number}} (mem_mb in MiB)")
    return requests


def plan(
    experiments: list[dict],
    *,
    gpu: str,
    gpus: int,
    nodes: int = 1,
    requests: dict | None = None,
    benchmark: Path | None = None,
    costs: Path | None = None,
) -> tuple[list[dict], dict]:
    """(rows, totals) of the plan of `experiments` (`Study.plan_spec`) on `gpus` GPUs `gpu` over `nodes`,
    each training at its `precision` as the trainer takes it on that GPU (auto: bf16 where the GPU has
    it, else fp16)."""
    model_name = gpu_model(gpu)
    if model_name is None:
        raise UserError(f"--gpu-model {gpu!r}: no peak FLOP/s known for it; one of {', '.join(PEAKS)}")
    figures = [*measured_mfu(benchmark, gpu), papers()]
    rss = measured_costs(costs)
    train_request = checked_requests(requests or {}).get("train", {})
    per_node = math.ceil(gpus / nodes)  # trainer processes on a node, each its own peak RSS
    rows, sources = [], {}
    for exp in experiments:
        need = rss.get(("train", exp["name"]))
        need = need * per_node if need is not None else None  # a node's: each process's, times the processes
        row, source, said = _row(exp, figures, model_name, gpus)
        sources[source] = said
        asked = train_request.get("mem_mb")
        row["host_memory_GiB"] = need / 1024 if need else None  # both in MiB, as Slurm's --mem counts
        row["requested_GiB"] = (asked or 0) / 1024 or None
        row["short"] = None if need is None or asked is None else "yes" if need > asked else "no"
        rows.append(row)
    totals = {"gpu": model_name, "gpus": gpus, "nodes": nodes, "mfu_sources": sources, "costs": costs}
    for key in ("model_flops", "gpu_hours", "wall_hours", "checkpoints_GB"):
        totals[key] = sum(r[key] for r in rows)
    totals["short"] = [r["experiment"] for r in rows if r["short"] == "yes"]
    return rows, totals


def _row(exp: dict, figures: list[Measured], gpu: str, gpus: int) -> tuple[dict, str, str]:
    """(the plan's row of one training but its memory columns, the name of its MFU's source, what
    the header says of that source)."""
    vocab, shared = exp["vocab"]["size"], exp["vocab"]["shared"]
    params = parameters(exp["model"], vocab, shared)
    tr = exp["train"]
    precision = tr["precision"] if tr["precision"] != "auto" else "bf16" if "bf16" in PEAKS[gpu] else "fp16"
    flops = tr["steps"] * update_flops(exp["model"], vocab, tr["tokens_per_update"], MEAN_LENGTH)
    fig, of_peak, source, said = throughput(figures, gpu, precision)
    flop_s = fig.mfu["big" if exp["model"]["d_model"] >= paper.MODEL["big"]["d_model"] else "base"] * of_peak
    gpu_hours = flops / (flop_s * 3600)
    row = {
        "experiment": exp["name"],
        "params_M": params / 1e6,
        "updates": tr["steps"],
        "precision": precision,
        "model_flops": flops,
        "mfu": flop_s / (PEAKS[gpu].get(precision) or PEAKS[gpu]["fp32"]),
        "mfu_from": source,
        "gpu_hours": gpu_hours,
        "wall_hours": gpu_hours / gpus,
        "checkpoints_GB": checkpoint_bytes(params, tr["keep_checkpoints"] or 0) / 1e9,
    }
    return row, source, said


# the columns a plan may leave blank: why, and what fills them (`blanks`)
BLANK = {
    "host_memory_GiB": "no rehearsal record of the training's peak RSS (in {costs}): `python benchmarks/rehearsal.py` "
    "measures it there",
    "short": "whether the training needs more memory than it requests is unknown without its peak RSS (the "
    "rehearsal's record) and the train rule's mem_mb (set-resources train:mem_mb)",
    "requested_GiB": "the train rule requests no mem_mb: set-resources train:mem_mb sets it",
}


def blanks(rows: list[dict], costs) -> tuple[list[str], list[str]]:
    """(the columns to print, a sentence per column of BLANK with a blank cell): a column blank in every
    row is left out, the sentence saying so."""
    columns, said = list(rows[0]) if rows else [], []
    for column, why in BLANK.items():
        empty = [r["experiment"] for r in rows if r[column] is None]
        if not empty:
            continue
        if len(empty) == len(rows):
            columns.remove(column)
            said.append(f"No column {column}: {why.format(costs=costs or 'none given')}.")
        else:
            said.append(f"{column} blank for {', '.join(empty)}: {why.format(costs=costs or 'none given')}.")
    return columns, said


def document(rows: list[dict], totals: dict, requests: dict | None = None) -> str:
    """The plan as Markdown: where its GPUs and MFUs come from, and what every blank means."""
    gpus, nodes = totals["gpus"], totals["nodes"]
    lines = [
        "# The study's plan, before launch\n",
        f"\nPlanned for {gpus} x {totals['gpu']} on {nodes} node(s) a training (the plan rule's resources gpu, "
        "nodes and gpu_model).",
    ]
    train = (requests or {}).get("train", {})
    if requests and (train.get("gpu", 1), train.get("nodes", 1)) != (gpus, nodes):
        asked = train.get("gpu", 1)
        lines.append(
            f" The train jobs request {asked} GPU(s) on {train.get('nodes', 1)} node(s) each, not these: at "
            f"{asked} GPU(s) the trainings take {totals['gpu_hours'] / asked:,.1f} hours one after another. "
            f"--set-resources plan:gpu={asked} plans for what they request; train:gpu={gpus} (as profiles/slurm "
            "sets it) makes them request what is planned."
        )
    lines.append(
        "\n\nMFU, and where each row's comes from (column mfu_from; mfu is of the row's precision's peak):\n\n"
    )
    lines += [f"- {name}: {where}.\n" for name, where in totals["mfu_sources"].items()]
    lines.append(
        f"\nIn total: {totals['model_flops']:.2e} model FLOPs, {totals['gpu_hours']:,.0f} GPU hours, "
        f"{totals['wall_hours']:,.1f} hours of wall time one training after another, "
        f"{totals['checkpoints_GB']:,.1f} GB of checkpoints at their peak (every run's kept).\n\n"
    )
    columns, said = blanks(rows, totals["costs"])
    lines.append(to_markdown(rows, columns))
    lines += [f"\n{sentence}\n" for sentence in said]
    if totals["short"]:
        lines.append(
            f"\nAsk for more memory: {', '.join(totals['short'])} needed more than the train rule requests "
            "(the rehearsal's peak RSS; set-resources train:mem_mb).\n"
        )
    if requests:
        asked = "; ".join(
            f"{rule}: " + (", ".join(f"{k} {v}" for k, v in sorted(res.items())) or "none set (the executor's default)")
            for rule, res in requests.items()
        )
        lines.append(f"\nWhat the jobs request (the rules' resources after the profile's set-resources): {asked}.\n")
    return "".join(lines)


def checked(experiments: list, where: str = "--experiments") -> list[dict]:
    """Each training's settings checked as experiment.json's are (aiayn.study.resolve), one line naming a wrong one."""
    from aiayn.study import resolve

    out = []
    for i, exp in enumerate(experiments):
        lacking = resolve.missing(exp) if isinstance(exp, dict) else list(resolve.KEYS)
        if lacking:
            raise UserError(f"{where}[{i}]: lacks {', '.join(lacking)}; pass what `snakemake plan` passes")
        out.append(resolve.checked(exp, f"{where}[{i}]"))
    return out


def write_plan(
    experiments: list[dict] | None,
    out,
    *,
    config=None,
    gpu: str,
    gpus: int,
    nodes: int = 1,
    requests: dict | None = None,
    benchmark: Path | None = None,
    costs: Path | None = None,
    log=print,
) -> tuple[list[dict], dict]:
    """`plan` of `experiments` (or of the study the config files `config` make, merged in order as
    Snakemake merges them) written to `out` (Markdown) and printed; returns (rows, totals)."""
    if experiments is None:
        if not config:
            raise UserError("give --experiments (JSON) or --config (the study's config files)")
        from aiayn.study import config as cfg
        from aiayn.study.grid import Study

        with cfg.naming_sources(config):
            experiments = Study(cfg.validate(cfg.merged(config), files=config)).plan_spec()
    rows, totals = plan(
        checked(experiments), gpu=gpu, gpus=gpus, nodes=nodes, requests=requests, benchmark=benchmark, costs=costs
    )
    text = document(rows, totals, requests)
    if benchmark is not None and not benchmark.exists():
        log(f"--benchmark {benchmark}: no such file yet, the plan takes the paper's MFU (benchmarks/gpu.py writes it)")
    atomic_write_text(out, text)
    log(text)
    return rows, totals


SHAPE = ("N", "d_model", "d_ff", "h", "d_k", "d_v")
PARAM_COLUMNS = ("experiment", "tables", "row", *SHAPE, "vocab", "params_M", "paper_M")


def parameter_rows(study, names: list[str] | None = None) -> list[dict]:
    """A row per experiment of `study` (or of `names`), as configured: left-out ones too, no candidates."""
    rows = []
    for name in names or list(study.config["experiments"]):
        exp = study.configured(name)
        counted = parameters(exp["model"], exp["vocab"]["size"], exp["vocab"]["shared"])
        row = {"experiment": name, "tables": ",".join(map(str, exp["tables"])), "row": exp["row"] or ""}
        row.update({k: exp["model"][k] for k in SHAPE})
        row.update(vocab=exp["vocab"]["size"], params_M=counted / 1e6, paper_M=exp["paper"].get("params_m"))
        rows.append({**row, "params": counted})
    return rows


def parameter_table(rows: list[dict]) -> str:
    """The rows as aligned text columns, the figures aligned right."""
    cells = [list(PARAM_COLUMNS)]
    for r in rows:
        cells.append([f"{r[c]:.1f}" if c == "params_M" else "" if r[c] is None else str(r[c]) for c in PARAM_COLUMNS])
    widths = [max(len(r[i]) for r in cells) for i in range(len(PARAM_COLUMNS))]
    lines = ["  ".join(c.rjust(w) if i > 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def print_parameters(config_path, names: list[str] | None = None, log=print) -> list[dict]:
    """The parameter table of the study `config_path` (or of its experiments `names`), logged."""
    from aiayn.study import config as cfg
    from aiayn.study.grid import Study

    study = Study(cfg.load(config_path))
    unknown = [n for n in names or [] if n not in study.config["experiments"]]
    if unknown:
        raise UserError(
            f"--experiment {unknown[0]!r} is not in {config_path}; known: {', '.join(study.config['experiments'])}"
        )
    rows = parameter_rows(study, names)
    log(parameter_table(rows))
    log(
        "\nparams_M: parameters of the model as built (tied matrices counted once); "
        "paper_M: Table 3 of the paper, where it gives one."
    )
    return rows
