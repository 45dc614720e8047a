"""`python -m aiayn example-corpus`: the made-up pair of the demo as the plain aligned text files
that examples/own-pair.yaml reads (data/my-pair/{train,dev}.{en,xx}, test.{en,xx}.gz)."""

from __future__ import annotations

from aiayn.commands import at_least, say
from aiayn.inventory import OUTPUT_FOLDER


def add_arguments(add):
    add(
        "--out", type=OUTPUT_FOLDER, default="data/my-pair", help="folder to write the files in (default: data/my-pair)"
    )
    add("--train", type=at_least(1), default=3000, help="training pairs (default 3000)")
    add("--dev", type=at_least(1), default=100, help="dev pairs (default 100)")
    add("--test", type=at_least(1), default=100, help="test pairs (default 100)")
    add("--seed", type=at_least(0), default=7, help="the made-up language's seed (default 7)")


def run(args) -> None:
    from aiayn.data.generate import write_example_corpus

    write_example_corpus(args.out, args.seed, {"train": args.train, "dev": args.dev, "test": args.test}, log=say)
