"""How a training job starts its processes: one process, torchrun on one node, or srun + torchrun.

The Snakemake rule declares the GPUs (`gpu`, total) and `nodes` of the job as resources, so the
Slurm executor turns them into sbatch flags; this module turns the same two numbers into the
launcher that precedes `-m aiayn train`. The tokens per update do not depend on it: the trainer
derives its gradient accumulation from the world size (`study.gradient_accumulation`).
"""

from __future__ import annotations

RDZV_PORT = 29500


def launcher(gpus: int, nodes: int = 1) -> str:
    """Shell prefix for `<prefix> -m aiayn train ...` given the job's GPUs (total) and nodes."""
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    if gpus <= 1 and nodes == 1:
        return "python"
    if gpus % nodes:
        raise ValueError(f"{gpus} GPUs do not divide evenly over {nodes} nodes")
    per_node = max(1, gpus // nodes)
    if nodes == 1:
        return f"torchrun --standalone --nnodes 1 --nproc-per-node {per_node}"
    # One srun task per node; each starts torchrun, which rendezvouses on the job's first node.
    head = '$(scontrol show hostnames "$(squeue -h -j $SLURM_JOB_ID -o %N)" | head -n 1)'
    return (
        f"srun --ntasks {nodes} --ntasks-per-node 1 torchrun --nnodes {nodes} --nproc-per-node {per_node} "
        f"--rdzv-backend c10d --rdzv-id $SLURM_JOB_ID --rdzv-endpoint {head}:{RDZV_PORT}"
    )
