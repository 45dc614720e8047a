"""How a training job starts its processes: one process, torchrun in one task, or srun + torchrun.

The Snakemake rule declares the job's GPUs (`gpu`, total), `nodes` and Slurm `tasks` as resources,
so the Slurm executor turns them into sbatch flags; this module turns the same numbers into the
launcher that precedes `-m aiayn train`. The tokens per update do not depend on it: the trainer
derives its gradient accumulation from the world size (`aiayn.training.batching.micro_batch_budget`).

- tasks = 1: the job step runs one `python` (gpu <= 1) or one `torchrun --standalone` with one
  process per GPU. Snakemake's Slurm jobstep wraps it in `srun -n1`.
- tasks > 1: the job step runs `srun -n <tasks>` itself (the rule needs the `mpi` resource, whose
  value is the srun command, so that the jobstep does not wrap it a second time). Every task starts
  a torchrun agent with gpu/tasks processes; the agents meet in a c10d rendezvous on the job's
  first node, at a port derived from the job id so that two jobs sharing a node do not collide.
  The usual cluster layout is one task per node (tasks = nodes); several tasks per node work too
  (each task then gets its own GPUs through `--gpus-per-task`).
"""

from __future__ import annotations

import re

SRUN = re.compile(r"(/[A-Za-z0-9._+-]+)*/?srun")  # the `mpi` resource: srun, or an absolute path to one
RDZV_PORT = 29500
RDZV_PORTS = 2000  # the rendezvous port is RDZV_PORT + job id mod RDZV_PORTS


class LaunchError(ValueError):
    """A resource combination that cannot start a training job; the message says what to set."""


def launcher(gpus: int, nodes: int = 1, tasks: int = 1, mpi: str | None = None) -> str:
    """Shell prefix for `<prefix> -m aiayn train ...` given the job's GPUs (total), nodes and tasks."""
    for name, value in (("gpu", gpus), ("nodes", nodes), ("tasks", tasks)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "gpu" else 1):
            raise LaunchError(
                f"resource train:{name} must be a whole number >= {0 if name == 'gpu' else 1}, got {value!r}"
            )
    if tasks == 1:
        if nodes > 1:
            raise LaunchError(
                f"a training job on {nodes} nodes needs one Slurm task per node: "
                f"set train:tasks={nodes} and train:mpi=srun (see profiles/slurm/config.yaml)"
            )
        if gpus <= 1:
            return "python"
        return f"torchrun --standalone --nnodes 1 --nproc-per-node {gpus}"
    if mpi and not SRUN.fullmatch(str(mpi)):
        raise LaunchError(
            f"resource train:mpi must be srun (or the path of an srun), got {mpi!r}: it starts the job's tasks"
        )
    if not mpi:
        raise LaunchError(
            f"train:tasks={tasks} starts the tasks with srun inside the job: also set train:mpi=srun "
            "(so that Snakemake's Slurm jobstep does not wrap the training in a one-task srun)"
        )
    if tasks % nodes:
        raise LaunchError(f"train:tasks={tasks} does not divide evenly over train:nodes={nodes}")
    if gpus and gpus % tasks:
        raise LaunchError(f"train:gpu={gpus} GPUs do not divide evenly over train:tasks={tasks}")
    per_task = max(1, gpus // tasks)
    gpu_binding = f" --gpus-per-task {per_task}" if gpus else ""
    # jobstep clears SLURM_* except SLURM_JOB_ID, hence squeue for the node list
    head = '$(scontrol show hostnames "$(squeue -h -j $SLURM_JOB_ID -o %N)" | head -n 1)'
    port = f"$(({RDZV_PORT} + SLURM_JOB_ID % {RDZV_PORTS}))"
    return (
        f"{mpi} -n {tasks} --ntasks-per-node {tasks // nodes}{gpu_binding} torchrun --nnodes {tasks} "
        f"--nproc-per-node {per_task} --rdzv-backend c10d --rdzv-id $SLURM_JOB_ID --rdzv-endpoint {head}:{port}"
    )
