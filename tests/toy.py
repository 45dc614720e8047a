"""A toy task for training tests: reverse a random sequence of tokens (needs attention to learn),
and how the tests train it: in-process (`make_trainer`, `train_in_process`) or as the command
(`train_command`, in a subprocess environment of its own)."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from conftest import ROOT

from aiayn.data import binary
from aiayn.runtime import checkpoint
from aiayn.training.distributed import Env
from aiayn.training.train import RunFiles, Trainer, run

VOCAB = 24  # ids 0-3 are PAD, UNK, BOS, EOS

SETTINGS = {
    "name": "toy",
    "preset": "toy",
    "dataset": "toy",
    "task": "translation",
    "model": {
        "N": 1,
        "d_model": 32,
        "d_ff": 64,
        "h": 4,
        "d_k": 8,
        "d_v": 8,
        "P_drop": 0.1,
        "P_drop_attn": 0.0,
        "positional": "sinusoidal",
        "max_positions": 64,
        "pre_norm": False,
    },
    "train": {
        "steps": 12,
        "warmup_steps": 50,
        "lr_scale": 1.0,
        "adam_beta1": 0.9,
        "adam_beta2": 0.98,
        "adam_eps": 1e-9,
        "eps_ls": 0.1,
        "tokens_per_update": 400,
        "max_tokens": 400,
        "checkpoint_interval": 4,
        "keep_checkpoints": 5,
        "clip_norm": 0.0,
        "precision": "fp32",
        "compile": False,
        "prefetch": 2,
        "seed": 1,
        "log_interval": 2,
    },
    "vocab": {"model_type": "bpe", "size": VOCAB, "shared": True, "input_sentence_size": 0},
}


def settings(**train) -> dict:
    s = copy.deepcopy(SETTINGS)
    s["train"].update(train)
    return s


def from_sequences(src_seqs, tgt_seqs):
    """(tokens, offsets) per side from lists of id sequences, as `binary.write` takes them."""

    def pack(seqs):
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        tokens = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs]) if len(seqs) else np.empty(0, np.int64)
        return tokens, offsets

    return pack(src_seqs), pack(tgt_seqs)


def corpus(path, n=200, seed=0, min_len=2, max_len=12):
    """Write an encoded reversal corpus of n pairs to `path`; return its path."""
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, VOCAB, size=rng.integers(min_len, max_len + 1)) for _ in range(n)]
    tgt = [s[::-1] for s in src]
    src_arrays, tgt_arrays = from_sequences(src, tgt)
    meta = {"src_vocab": VOCAB, "tgt_vocab": VOCAB}
    binary.write(path, src_arrays, tgt_arrays, dtype=binary.token_dtype(VOCAB), meta=meta)
    return path


def make_trainer(tmp_path: Path, settings: dict, env: Env | None = None, log=lambda m: None) -> Trainer:
    train = (
        binary.read(corpus(tmp_path / "train.bin", n=200, seed=0))
        if not (tmp_path / "train.bin").exists()
        else binary.read(tmp_path / "train.bin")
    )
    dev = (
        binary.read(corpus(tmp_path / "dev.bin", n=30, seed=1))
        if not (tmp_path / "dev.bin").exists()
        else binary.read(tmp_path / "dev.bin")
    )
    files = RunFiles(tmp_path / "checkpoints", tmp_path / "checkpoints" / "last.pt", tmp_path / "metrics.jsonl")
    return Trainer(settings, train, dev, files, env=env or Env(), log=log)


def train_in_process(folder: Path, settings: dict, *, max_updates=None, stop=False) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    return run(make_trainer(folder, settings), stop, max_updates=max_updates)


def final_weights(folder: Path) -> dict:
    return checkpoint.load(folder / "checkpoints" / "last.pt")["model"]


def assert_same_weights(a: dict, b: dict, exact=True):
    assert a.keys() == b.keys()
    for k in a:
        if exact:
            assert torch.equal(a[k], b[k]), k
        else:
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)


def train_command(tmp_path: Path, settings: dict, *extra: str) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "experiment.json").write_text(json.dumps(settings))
    corpus(tmp_path / "train.bin", n=200, seed=0)
    corpus(tmp_path / "dev.bin", n=30, seed=1)
    return [
        "-m",
        "aiayn",
        "train",
        "--settings",
        str(tmp_path / "experiment.json"),
        "--train",
        str(tmp_path / "train.bin"),
        "--dev",
        str(tmp_path / "dev.bin"),
        "--checkpoints",
        str(tmp_path / "checkpoints"),
        "--out",
        str(tmp_path / "checkpoints" / "last.pt"),
        *extra,
    ]


def env_for_subprocess() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_ranks(script: Path, args: list[str], logs: Path, env: dict, timeout: float = 240) -> tuple[list[int], str]:
    """`python script args` as ranks 0 and 1 of one job on this machine, started with the environment
    torchrun gives its workers but without its agent (which ends the other worker with SIGTERM once one
    has exited: on a loaded machine that can come before that worker's own exit). Returns each rank's
    own exit status and both ranks' output (rank 0's first); a rank that waits on for a lost peer
    runs into `timeout`."""
    port = str(free_port())
    ranks, files = [], []
    for rank in (0, 1):
        rank_env = {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
        rank_env |= {"RANK": str(rank), "LOCAL_RANK": str(rank)}
        files.append((logs / f"rank{rank}.log").open("w"))  # files, not pipes: no rank blocks on a full pipe
        cmd = [sys.executable, str(script), *args]
        ranks.append(subprocess.Popen(cmd, env=rank_env, stdout=files[-1], stderr=files[-1]))
    try:
        for rank in ranks:
            rank.wait(timeout=timeout)
    finally:
        for rank, file in zip(ranks, files):
            rank.kill()
            rank.wait()
            file.close()
    return [rank.returncode for rank in ranks], "".join((logs / f"rank{r}.log").read_text() for r in (0, 1))
