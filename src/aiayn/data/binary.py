"""The format of an encoded corpus (`<split>.bin`): one file per split, read through memory maps.

    b"AIAYNENC" | uint32 version | uint64 header length | JSON header | arrays, 64-byte aligned

The header gives the number of pairs, the token dtype, the identity of the two sentencepiece
models (`aiayn.data.vocab.identity`), the byte offset of four flat arrays: source tokens, source
offsets, target tokens, target offsets (offsets has n+1 entries), and the SHA-256 of those
arrays' bytes (`digest`), which is the corpus's identity, and the SHA-256 of the header itself
(`check`); both are checked each time it is read: a damaged file is refused, not trained on.
Sentence i of a side is tokens[offsets[i]:offsets[i+1]], without BOS/EOS (the batcher adds
them). Reading never builds Python objects per sentence, so a 36M-pair corpus costs only its
mapped pages (and one pass to check its digest).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.errors import UserError
from aiayn.io import atomic_path, parse_json, readable

MAGIC = b"AIAYNENC"
VERSION = 1
ALIGN = 64
CHUNK = 1 << 22  # elements written at a time
ARRAYS = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets")
DIGEST = "tokens-sha256:"  # the scheme of a corpus's identity (an older file has none: `read` refuses it)
TOKEN_DTYPES = ("<u2", "<i4")
# Special ids of every sentencepiece model of this project (see aiayn.data.vocab).
PAD, UNK, BOS, EOS = 0, 1, 2, 3


class EncodedError(UserError, ValueError):
    """A file that is not a readable encoded corpus; the message names it."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 65536 else np.int32)


def write(path: str | os.PathLike, src: list[np.ndarray] | tuple, tgt, *, dtype, meta: dict | None = None) -> dict:
    """Write pairs given as (tokens, offsets) per side; return the header. Written atomically."""
    path = Path(path)
    arrays = dict(zip(ARRAYS, (src[0], src[1], tgt[0], tgt[1])))
    n = len(arrays["src_offsets"]) - 1
    if len(arrays["tgt_offsets"]) - 1 != n:
        raise EncodedError(f"{path}: {n} source but {len(arrays['tgt_offsets']) - 1} target sentences")
    dtype = np.dtype(dtype)
    dtypes = {k: dtype if k.endswith("tokens") else np.dtype(np.int64) for k in arrays}
    header = {"pairs": n, "dtype": dtype.str, "meta": meta or {}, "arrays": {}, "digest": DIGEST + "0" * 64,
              "check": "0" * 64}  # fmt: skip
    # two passes: the header's own length decides where the arrays start (the digest, unknown until
    # the arrays are written, has a fixed length)
    for _ in range(2):
        start = _align(len(MAGIC) + 12 + len(json.dumps(header).encode()))
        offset = start
        for name, arr in arrays.items():
            header["arrays"][name] = {"offset": offset, "length": int(len(arr)), "dtype": dtypes[name].str}
            offset = _align(offset + len(arr) * dtypes[name].itemsize)
    digest = hashlib.sha256()
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.seek(start)
        for name, arr in arrays.items():  # in chunks: the arrays may be memory maps larger than RAM
            f.seek(header["arrays"][name]["offset"])
            for i in range(0, len(arr), CHUNK):
                chunk = np.asarray(arr[i : i + CHUNK], dtype=dtypes[name]).tobytes()
                digest.update(chunk)
                f.write(chunk)
        f.truncate(_align(offset))
        header["digest"] = DIGEST + digest.hexdigest()
        header["check"] = _check(header)
        blob = json.dumps(header).encode()
        f.seek(0)
        f.write(MAGIC + struct.pack("<IQ", VERSION, len(blob)) + blob)
    return header


def _check(header: dict) -> str:
    """The SHA-256 of a header without its own check: a bit flipped anywhere in the header is seen."""
    return hashlib.sha256(
        json.dumps({k: v for k, v in header.items() if k != "check"}, sort_keys=True).encode()
    ).hexdigest()


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
    stamp: tuple | None = None  # (device, inode, size, mtime) of the file when it was read

    def __len__(self) -> int:
        return self.header["pairs"]

    def unchanged(self) -> None:
        """Raise EncodedError naming the file if it was written over in place since it was read: its
        memory maps would then read another corpus, or past its new end, where the process dies of
        SIGBUS without a word. Called before each batch is read (aiayn.training.batching.collate).
        A file replaced whole (renamed over, as encode writes) or removed is no harm: the maps keep
        the file that was read."""
        if self.stamp is None:
            return
        try:
            now = os.stat(self.path)
        except OSError:
            return
        if (now.st_dev, now.st_ino) == self.stamp[:2] and (now.st_size, now.st_mtime_ns) != self.stamp[2:]:
            raise EncodedError(
                f"{self.path}: written over in place while this process reads it (now {now.st_size:,} bytes, "
                f"{self.stamp[2]:,} when read): its memory maps would read another corpus or past its end; let encode "
                "write corpora (it replaces a file whole), then run again (a training resumes from its checkpoint)"
            )

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

    @property
    def identity(self) -> str:
        """What the corpus is: the digest of its token arrays, whatever its header says of where it came from."""
        return self.header["digest"]

    def subset(self, indices) -> "Corpus":
        """The pairs `indices` as a corpus of their own, in memory, with this one's header (vocabularies)."""
        arrays = {}
        for side in ("src", "tgt"):
            pieces = [np.asarray(getattr(self, side)(int(i))) for i in indices]
            arrays[f"{side}_tokens"] = np.concatenate(pieces)
            arrays[f"{side}_offsets"] = np.concatenate([[0], np.cumsum([len(p) for p in pieces])]).astype(np.int64)
        return Corpus(path=self.path, header={**copy.deepcopy(self.header), "pairs": len(indices)}, **arrays)


def _damaged(path: Path, what: str) -> EncodedError:
    return EncodedError(f"{path}: not a readable encoded corpus ({what}); rerun the encode step")


def _header(path: Path) -> dict:
    with open(path, "rb") as f:
        head = f.read(len(MAGIC) + 12)
        if len(head) < len(MAGIC) + 12 or head[: len(MAGIC)] != MAGIC:
            raise EncodedError(f"{path}: not an encoded corpus (bad magic); rerun the encode step")
        version, size = struct.unpack("<IQ", head[len(MAGIC) :])
        if version != VERSION:
            raise EncodedError(f"{path}: format version {version}, expected {VERSION}; rerun the encode step")
        if size > path.stat().st_size:
            raise _damaged(path, "its header runs past the end of the file")
        try:
            header = parse_json(f.read(size), finite=False)
        except ValueError:  # (a UnicodeDecodeError is one)
            raise EncodedError(f"{path}: corrupt header; rerun the encode step") from None
    if (
        not isinstance(header, dict)
        or not isinstance(header.get("pairs"), int)
        or not isinstance(header.get("arrays"), dict)
    ):
        raise _damaged(path, "its header lacks pairs or arrays")
    if sorted(header["arrays"]) != sorted(ARRAYS):
        raise _damaged(path, f"arrays {sorted(header['arrays'])}, expected {list(ARRAYS)}")
    if "check" not in header or not header.get("digest"):
        raise EncodedError(
            f"{path}: an encoded corpus of an older aiayn, without the checksums every read verifies; rerun the "
            "encode step"
        )
    if header["check"] != _check(header):
        raise _damaged(path, "its header does not match its checksum: the file is damaged")
    return header


def _check_layout(path: Path, header: dict) -> None:
    """Every array where the header says, of the size and type it says, inside the file."""
    total, n = path.stat().st_size, header["pairs"]
    for name in ARRAYS:
        spec = header["arrays"][name]
        if not all(isinstance(spec.get(k), int) and spec[k] >= 0 for k in ("offset", "length")):
            raise _damaged(path, f"{name} has no valid offset and length")
        allowed = TOKEN_DTYPES if name.endswith("tokens") else ("<i8",)
        if spec.get("dtype") not in allowed:
            raise _damaged(path, f"{name} of type {spec.get('dtype')!r}")
        if spec["offset"] + spec["length"] * np.dtype(spec["dtype"]).itemsize > total:
            raise EncodedError(f"{path}: truncated ({name} runs past the end of the file); rerun the encode step")
        if name.endswith("offsets") and spec["length"] != n + 1:
            raise _damaged(path, f"{name} has {spec['length']} entries for {n} pairs")


def _digest(path: Path, header: dict) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for name in ARRAYS:
            spec = header["arrays"][name]
            f.seek(spec["offset"])
            left = spec["length"] * np.dtype(spec["dtype"]).itemsize
            while left:
                block = f.read(min(left, 1 << 24))
                if not block:
                    raise _damaged(path, f"{name} ends early")
                digest.update(block)
                left -= len(block)
    return DIGEST + digest.hexdigest()


def read(path: str | os.PathLike) -> Corpus:
    """The corpus of `path`, its layout checked and (when its header records one) its digest
    verified: a damaged or foreign file raises EncodedError naming it."""
    path = readable(path, "an encoded corpus")
    before = _stamp(path)
    header = _header(path)
    _check_layout(path, header)
    if _digest(path, header) != header["digest"]:
        raise _damaged(path, "its token arrays do not match their digest: the file is damaged")
    arrays = {}
    for name in ARRAYS:
        spec = header["arrays"][name]
        arrays[name] = (
            np.memmap(path, dtype=np.dtype(spec["dtype"]), mode="r", offset=spec["offset"], shape=(spec["length"],))
            if spec["length"]
            else np.empty(0, spec["dtype"])
        )
    for side in ("src", "tgt"):
        offsets, tokens = arrays[f"{side}_offsets"], arrays[f"{side}_tokens"]
        if offsets[0] != 0 or offsets[-1] != len(tokens):
            raise _damaged(path, f"{side} offsets run from {offsets[0]} to {offsets[-1]} over {len(tokens)} tokens")
    corpus = Corpus(path=path, header=header, **arrays, stamp=before)
    corpus.unchanged()  # not written over while its digest was computed
    return corpus


def _stamp(path: Path) -> tuple:
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
