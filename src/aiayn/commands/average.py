"""`python -m aiayn average`: average the last K checkpoints of a run (§6.1: 5 base, 20 big), those
on its checkpoint grid only (`aiayn.average`)."""

from __future__ import annotations

from aiayn.io import write_json
from aiayn.training import checkpoint as ckpt
from aiayn.training.average import average, last_checkpoints


def add_arguments(parser):
    parser.add_argument("--checkpoints", required=True, help="folder of step checkpoints of one run")
    parser.add_argument("--last", type=int, required=True, help="how many of the newest grid checkpoints to average")
    parser.add_argument("--interval", type=int, required=True, help="the run's checkpoint_interval (updates)")
    parser.add_argument("--final-step", type=int, required=True, help="the run's last update (training steps)")
    parser.add_argument("--out", required=True, help="averaged model to write")
    parser.add_argument("--record", help="also write the averaged steps here (JSON), for the tables")


def run(args) -> int:
    paths = last_checkpoints(args.checkpoints, args.last, args.interval, args.final_step)
    result = average(paths)
    ckpt.save(result, args.out)
    if args.record:
        write_json(
            args.record,
            {"steps": result["averaged_steps"], "interval": args.interval, "checkpoints": [str(p) for p in paths]},
        )
    print(f"averaged steps {result['averaged_steps']} -> {args.out}")
    return 0
