"""The format of an encoded corpus (`<split>.bin`): one file per split, read through memory maps.

    b"AIAYNENC" | uint32 version | uint64 header length | JSON header | arrays, 64-byte aligned

The header gives the number of pairs, the token dtype, the identity (sha256) of the two
sentencepiece models, and the byte offset of four flat arrays: source tokens, source offsets,
target tokens, target offsets (offsets has n+1 entries). Sentence i of a side is
tokens[offsets[i]:offsets[i+1]], without BOS/EOS (the batcher adds them). Reading never
builds Python objects per sentence, so a 36M-pair corpus costs only its mapped pages.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.errors import UserError
from aiayn.io import atomic_path

MAGIC = b"AIAYNENC"
VERSION = 1
ALIGN = 64
CHUNK = 1 << 22  # elements written at a time
# Special ids of every sentencepiece model of this project (see aiayn.data.vocab).
PAD, UNK, BOS, EOS = 0, 1, 2, 3


class EncodedError(UserError, ValueError):
    """A file that is not a readable encoded corpus; the message names it."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.int32)


def write(path: str | os.PathLike, src: list[np.ndarray] | tuple, tgt, *, dtype, meta: dict | None = None) -> dict:
    """Write pairs given as (tokens, offsets) per side; return the header. Written atomically."""
    path = Path(path)
    arrays = {"src_tokens": src[0], "src_offsets": src[1], "tgt_tokens": tgt[0], "tgt_offsets": tgt[1]}
    n = len(arrays["src_offsets"]) - 1
    if len(arrays["tgt_offsets"]) - 1 != n:
        raise EncodedError(f"{path}: {n} source but {len(arrays['tgt_offsets']) - 1} target sentences")
    dtype = np.dtype(dtype)
    dtypes = {k: dtype if k.endswith("tokens") else np.dtype(np.int64) for k in arrays}
    header = {"pairs": n, "dtype": dtype.str, "meta": meta or {}, "arrays": {}}
    # two passes: the header's own length decides where the arrays start
    for _ in range(2):
        start = _align(len(MAGIC) + 12 + len(json.dumps(header).encode()))
        offset = start
        for name, arr in arrays.items():
            header["arrays"][name] = {"offset": offset, "length": int(len(arr)), "dtype": dtypes[name].str}
            offset = _align(offset + len(arr) * dtypes[name].itemsize)
    blob = json.dumps(header).encode()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<IQ", VERSION, len(blob)) + blob)
        for name, arr in arrays.items():  # in chunks: the arrays may be memory maps larger than RAM
            f.seek(header["arrays"][name]["offset"])
            for i in range(0, len(arr), CHUNK):
                f.write(np.asarray(arr[i : i + CHUNK], dtype=dtypes[name]).tobytes())
        f.truncate(_align(offset))
    return header


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class Corpus:
    """Memory-mapped pairs of an encoded file."""

    path: Path
    header: dict
    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return self.header["pairs"]

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def src(self, i: int) -> np.ndarray:
        return self.src_tokens[self.src_offsets[i] : self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_tokens[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]

    @property
    def vocabularies(self) -> dict:
        """The identities of the sentencepiece models it was encoded with ({"src", "tgt"}; None
        where unknown), as `aiayn.data.vocab.identity` gives them."""
        meta = self.header["meta"]
        return {"src": meta.get("spm_src_sha256"), "tgt": meta.get("spm_tgt_sha256")}


def read(path: str | os.PathLike) -> Corpus:
    path = Path(path)
    if not path.is_file():
        raise EncodedError(f"{path}: encoded corpus not found")
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 12)
        if len(head) < len(MAGIC) + 12 or head[: len(MAGIC)] != MAGIC:
            raise EncodedError(f"{path}: not an encoded corpus (bad magic); rerun the encode step")
        version, size = struct.unpack("<IQ", head[len(MAGIC) :])
        if version != VERSION:
            raise EncodedError(f"{path}: format version {version}, expected {VERSION}; rerun the encode step")
        try:
            header = json.loads(f.read(size))
        except ValueError:
            raise EncodedError(f"{path}: corrupt header; rerun the encode step") from None
    total = path.stat().st_size
    arrays = {}
    for name, spec in header["arrays"].items():
        dtype = np.dtype(spec["dtype"])
        if spec["offset"] + spec["length"] * dtype.itemsize > total:
            raise EncodedError(f"{path}: truncated ({name} runs past the end of the file); rerun the encode step")
        arrays[name] = (
            np.memmap(path, dtype=dtype, mode="r", offset=spec["offset"], shape=(spec["length"],))
            if spec["length"]
            else np.empty(0, dtype)
        )
    return Corpus(path=path, header=header, **arrays)
