"""`python -m aiayn plan`: the study's cost before launch (`aiayn.report.plan`): per training and in
total the model FLOPs of its updates, GPU hours and wall time at an MFU (the paper's own at fp32 on
P100, one benchmarks/gpu.py measured, or an assumption the plan names), its checkpoints' disk at
their peak, its measured host memory against what its job requests."""

from __future__ import annotations

from pathlib import Path

from aiayn.commands import at_least, library_default, load_json, say
from aiayn.inventory import OUTPUT, Check, file, text


def add_arguments(add):
    add(
        "--experiments",
        type=Check("experiment settings", "aiayn.report.plan.plan"),
        help="JSON: the trainings' settings (what `snakemake plan` passes, aiayn.study.grid.Study.plan_spec)",
    )
    add(
        "--config",
        type=file("study config"),
        nargs="+",
        help="the study's config files instead (config.yaml, overlays)",
    )
    add(
        "--gpu-model",
        type=text("aiayn.report.plan.plan"),
        required=True,
        help="the GPU planned for: P100, V100, A100, H100, ...",
    )
    add("--gpus", type=at_least(1), required=True, help="GPUs per training job")
    add(
        "--nodes",
        type=at_least(1),
        default=library_default("aiayn.report.plan.write_plan", "nodes"),
        help="nodes per training job (default %(default)s)",
    )
    add(
        "--requests",
        type=text("aiayn.report.plan.plan"),
        default="{}",
        help="JSON: {rule: {resource: value}} the jobs request",
    )
    add(
        "--costs",
        type=Check("optional file", "aiayn.report.plan.measured_costs"),
        help="the rehearsal's cost.csv: the jobs' measured peak memory",
    )
    add(
        "--benchmark",
        type=Check("optional file", "aiayn.report.plan.measured_mfu"),
        help="benchmarks/gpu.py's JSON result: the MFU measured on a GPU at a precision",
    )
    add("--out", type=OUTPUT, required=True, help="the plan as Markdown")


def run(args) -> None:
    from aiayn.report.plan import write_plan  # torch (parameter counts): imported when the command runs

    write_plan(
        load_json(args.experiments, "--experiments", expect=list) if args.experiments else None,
        args.out,
        config=args.config,
        gpu=args.gpu_model,
        gpus=args.gpus,
        nodes=args.nodes,
        requests=load_json(args.requests, "--requests", expect=dict),
        costs=Path(args.costs) if args.costs else None,
        benchmark=Path(args.benchmark) if args.benchmark else None,
        log=say,
    )
