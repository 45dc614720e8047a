"""`python -m aiayn train` (or `torchrun ... -m aiayn train`): train one experiment (§5).

Resumes from the newest readable checkpoint in --checkpoints when it is of the same run (see
`aiayn.training.train`). Exits 75 after writing a checkpoint when SIGTERM, SIGUSR1, SIGHUP or
SIGINT (Ctrl-C) arrives or, in a Slurm job, --stop-margin seconds before its time limit (the Slurm
job then requeues itself; elsewhere run it again to resume); 4 when another process of the job was lost (run it again to
resume); 3 on a non-finite loss, 2 on a user error.
"""

from __future__ import annotations

from aiayn.commands import at_least, finite_at_least, library_default
from aiayn.inventory import APPENDED, DEVICE, ENCODED, EXPERIMENT, OUTPUT, SPM, STEP_FILES, Check


def add_arguments(add):
    add("--settings", type=EXPERIMENT, required=True, help="experiment.json written by `aiayn resolve`")
    add("--train", type=ENCODED, required=True, help="encoded training data (.bin)")
    add("--dev", type=ENCODED, help="encoded dev data (.bin): loss and perplexity at every checkpoint")
    add("--spm-src", type=SPM, help="source sentencepiece model (checked against the data)")
    add("--spm-tgt", type=SPM, help="target sentencepiece model (checked against the data)")
    add(
        "--checkpoints",
        type=Check("run folder", "aiayn.runtime.checkpoint.newest_readable", STEP_FILES),
        required=True,
        help="folder of step checkpoints (resumed from)",
    )
    add("--out", type=OUTPUT, required=True, help="final checkpoint, written when training is done")
    add("--metrics", type=APPENDED, help="JSON-lines metrics (default: metrics.jsonl beside --checkpoints)")
    add(
        "--tensorboard",
        type=Check("run folder", "aiayn.training.progress.Board"),
        metavar="FOLDER",
        help="TensorBoard events, where the tensorboard package is installed (default: tensorboard/ beside "
        "--checkpoints; nothing without the package)",
    )
    add(
        "--device",
        type=DEVICE,
        default=library_default("aiayn.training.train.train_job", "device"),
        help="auto (GPU of this rank if any, else CPU), cpu, cuda:N (default %(default)s)",
    )
    add("--max-updates", type=at_least(1), help="stop after this many updates of this run (for tests)")
    add(
        "--stop-margin",
        type=finite_at_least(0),
        default=library_default("aiayn.training.train.train_job", "stop_margin"),
        metavar="SECONDS",
        help="in a Slurm job: checkpoint and requeue the job this long before its time limit, 0: never "
        "(default %(default)s)",
    )


def run(args) -> int:
    from aiayn.training.train import train_job  # torch: not imported for --help

    return train_job(
        args.settings,
        args.train,
        args.checkpoints,
        args.out,
        dev_path=args.dev,
        spm_src=args.spm_src,
        spm_tgt=args.spm_tgt,
        metrics_path=args.metrics,
        device=args.device,
        max_updates=args.max_updates,
        stop_margin=args.stop_margin,
        tensorboard=args.tensorboard,
    )
