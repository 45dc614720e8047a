"""How often following one training job call by call moves from one aiayn module to another.

    python benchmarks/visits.py [--list]

Method: one tiny `aiayn.training.train.train_job` (the toy reversal task of tests/toy.py: 200 pairs,
a 1-layer model, 4 updates, a checkpoint and a dev pass at step 4, then the final model) runs
under `sys.setprofile` (the main thread only: the prefetch thread's work is not followed). Each
Python call whose caller is in one aiayn module and whose callee is in a different aiayn module
is a visit; each distinct call site (caller file and line, callee module) counts once, so that
loops and repeated updates do not multiply it. Calls within one module, and calls into or out of
other packages (torch calling our model's `forward`, say), are not visits. The visits are listed
in the order of their first call with `--list`; the line printed last gives their number, the
modules they reach, and the distinct module-to-module calls among them (issue 61's measure, at
most 25: benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from aiayn.data import binary  # noqa: E402
from aiayn.training.train import train_job  # noqa: E402

VOCAB = 24
MODEL = {"N": 1, "d_model": 32, "d_ff": 64, "h": 4, "d_k": 8, "d_v": 8, "P_drop": 0.1, "P_drop_attn": 0.0,
         "positional": "sinusoidal", "max_positions": 64, "pre_norm": False}  # fmt: skip
TRAIN = {"steps": 4, "warmup_steps": 50, "lr_scale": 1.0, "adam_beta1": 0.9, "adam_beta2": 0.98, "adam_eps": 1e-9,
         "eps_ls": 0.1, "tokens_per_update": 400, "max_tokens": 400, "checkpoint_interval": 4,
         "keep_checkpoints": 5, "clip_norm": 0.0, "precision": "fp32", "compile": False, "prefetch": 0, "seed": 1,
         "log_interval": 2}  # fmt: skip
VOCABULARY = {"model_type": "bpe", "size": VOCAB, "shared": True, "input_sentence_size": 0}
SETTINGS = {"name": "toy", "preset": "toy", "dataset": "toy", "task": "translation", "model": MODEL, "train": TRAIN,
            "vocab": VOCABULARY}  # fmt: skip


def corpus(path: Path, n: int, seed: int) -> Path:
    """An encoded corpus of `n` random sequences and their reversals."""
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, VOCAB, size=rng.integers(2, 13)) for _ in range(n)]

    def pack(seqs):
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])])
        return np.concatenate(seqs).astype(np.int64), offsets

    meta = {"src_vocab": VOCAB, "tgt_vocab": VOCAB}
    binary.write(path, pack(src), pack([s[::-1] for s in src]), dtype=binary.token_dtype(VOCAB), meta=meta)
    return path


def module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.startswith("aiayn") else None


def visits(folder: Path) -> list[str]:
    """The module-to-module calls of one tiny train_job in `folder`, in the order of their first call."""
    (folder / "experiment.json").write_text(json.dumps(SETTINGS))
    args = (folder / "experiment.json", corpus(folder / "train.bin", 200, 0), folder / "checkpoints")
    seen: dict[tuple, str] = {}

    def profile(frame, event, arg) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = module_of(frame), module_of(frame.f_back)
        if callee and caller and callee != caller:
            site = (frame.f_back.f_code.co_filename, frame.f_back.f_lineno, callee)
            if site not in seen:
                seen[site] = f"{caller}:{frame.f_back.f_lineno} -> {callee}.{frame.f_code.co_name}"

    dev = corpus(folder / "dev.bin", 30, 1)
    sys.setprofile(profile)
    try:
        code = train_job(*args, folder / "last.pt", dev_path=dev, device="cpu", tensorboard=folder / "tb")
    finally:
        sys.setprofile(None)
    if code != 0:
        raise SystemExit(f"the tiny train_job ended with exit code {code}")
    return list(seen.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every visit in the order of its first call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        found = visits(Path(tmp))
    if args.list:
        print("\n".join(found))
    pairs = {(line.split(":")[0], line.split(" -> ")[1].rsplit(".", 1)[0]) for line in found}
    print(f"{len(found)} visits (call sites) across {len({m for pair in pairs for m in pair})} modules, "
          f"{len(pairs)} distinct module-to-module calls")  # fmt: skip


if __name__ == "__main__":
    from aiayn.errors import boundary

    boundary(main, "visits")
