"""A toy task for training tests: reverse a random sequence of tokens (needs attention to learn)."""

from __future__ import annotations

import copy

import numpy as np

from aiayn.data import binary as encoded

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
        "seed": 1,
        "log_interval": 2,
    },
    "vocab": {"model_type": "bpe", "size": VOCAB, "shared": True, "input_sentence_size": 0},
}


def settings(**train) -> dict:
    s = copy.deepcopy(SETTINGS)
    s["train"].update(train)
    return s


def corpus(path, n=200, seed=0, min_len=2, max_len=12):
    """Write an encoded reversal corpus of n pairs to `path`; return its path."""
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, VOCAB, size=rng.integers(min_len, max_len + 1)) for _ in range(n)]
    tgt = [s[::-1] for s in src]
    src_arrays, tgt_arrays = encoded.from_sequences(src, tgt)
    meta = {"src_vocab": VOCAB, "tgt_vocab": VOCAB}
    encoded.write(path, src_arrays, tgt_arrays, dtype=encoded.token_dtype(VOCAB), meta=meta)
    return path
