"""`python -m aiayn train` (or `torchrun ... -m aiayn train`): train one experiment (§5).

Resumes from the newest readable checkpoint in --checkpoints when it is of the same run (see
`aiayn.train`). Exits 75 after writing a checkpoint when SIGTERM/SIGUSR1 arrives or, in a Slurm
job, --stop-margin seconds before its time limit (the Slurm job then requeues itself; elsewhere
run it again to resume); 3 on a non-finite loss, 2 on a user error.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiayn.commands import load_json
from aiayn.data import binary as encoded
from aiayn.errors import UserError
from aiayn.io import file_sha256
from aiayn.training.distributed import Deadline, StopFlag, setup
from aiayn.training.trainer import RunFiles, Trainer
from aiayn.training.trainer import run as train_run


def add_arguments(parser):
    parser.add_argument("--settings", required=True, help="experiment.json written by `aiayn resolve`")
    parser.add_argument("--train", required=True, help="encoded training data (.bin)")
    parser.add_argument("--dev", help="encoded dev data (.bin): loss and perplexity at every checkpoint")
    parser.add_argument("--spm-src", help="source sentencepiece model (checked against the data)")
    parser.add_argument("--spm-tgt", help="target sentencepiece model (checked against the data)")
    parser.add_argument("--checkpoints", required=True, help="folder of step checkpoints (resumed from)")
    parser.add_argument("--out", required=True, help="final checkpoint, written when training is done")
    parser.add_argument("--metrics", help="JSON-lines metrics (default: metrics.jsonl beside --checkpoints)")
    parser.add_argument("--device", default="auto", help="auto (GPU of this rank if any, else CPU), cpu, cuda:N")
    parser.add_argument("--max-updates", type=int, help="stop after this many updates of this run (for tests)")
    parser.add_argument(
        "--stop-margin",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="in a Slurm job: checkpoint and requeue the job this long before its time limit (0: never)",
    )


def check_vocabulary(corpus, side: str, spm_path: str | None) -> None:
    if spm_path is None:
        return
    want = corpus.header["meta"].get(f"spm_{side}_sha256")
    if want and file_sha256(spm_path) != want:
        raise UserError(
            f"{spm_path} is not the {side} vocabulary {corpus.path} was encoded with; rerun `snakemake data`"
        )


def check_same_vocabularies(train, dev) -> None:
    """A dev set encoded with other vocabularies gives a meaningless perplexity: refuse it."""
    for side in ("src", "tgt"):
        want, got = (c.header["meta"].get(f"spm_{side}_sha256") for c in (train, dev))
        if want and got and want != got:
            raise UserError(
                f"{dev.path} was encoded with another {side} vocabulary than {train.path}; "
                "encode both with the same sentencepiece models (rerun `snakemake data`)"
            )


def run(args) -> int:
    try:
        text = Path(args.settings).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{args.settings}: cannot read the experiment settings ({exc})") from None
    settings = load_json(text, args.settings, expect=dict)
    missing = [
        k for k in ("name", "model", "train", "vocab") if not isinstance(settings.get(k), dict if k != "name" else str)
    ]
    if missing:
        raise UserError(
            f"{args.settings}: the settings lack {', '.join(missing)}; write them with `python -m aiayn resolve` "
            "(the resolve_experiment rule)"
        )
    train = encoded.read(args.train)
    dev = encoded.read(args.dev) if args.dev else None
    check_vocabulary(train, "src", args.spm_src)
    check_vocabulary(train, "tgt", args.spm_tgt)
    if dev is not None:
        check_same_vocabularies(train, dev)
    env = setup(args.device)
    checkpoints = Path(args.checkpoints)
    files = RunFiles(
        checkpoints, Path(args.out), Path(args.metrics) if args.metrics else checkpoints.parent / "metrics.jsonl"
    )

    def log(message: str) -> None:
        if env.main:
            print(message, flush=True)

    job = os.environ.get("SLURM_JOB_ID")
    stop = StopFlag(Deadline(job, args.stop_margin) if job and args.stop_margin > 0 and env.main else None)
    stop.install()
    return train_run(Trainer(settings, train, dev, files, env, log), stop, max_updates=args.max_updates)
