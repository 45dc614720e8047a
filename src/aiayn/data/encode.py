"""Encoding aligned text into an encoded corpus (the format of aiayn.data.binary), streaming and bounded in memory.

Lines are read in chunks, encoded by sentencepiece on several threads, and appended to raw files
on disk; the final file is assembled from those with chunked copies, so memory stays at a few
chunks whatever the corpus size (EN-FR: 36M pairs).
"""

from __future__ import annotations

import contextlib
import os
from itertools import zip_longest
from pathlib import Path

import numpy as np

from aiayn.data import binary, vocab
from aiayn.errors import UserError
from aiayn.io import ensure_space, readable, scratch_dir, writable, write_failure


def read_pairs(src: str, tgt: str, chunk: int):
    """Chunks of aligned (source, target) lines; split on "\\n" only (U+0085 stays inside a line)."""
    with open(readable(src, "a text file"), "rb") as fs, open(readable(tgt, "a text file"), "rb") as ft:
        batch_s, batch_t = [], []
        for number, (a, b) in enumerate(zip_longest(fs, ft), start=1):
            if a is None or b is None:
                short = src if a is None else tgt
                raise UserError(
                    f"{short} ends at line {number - 1} but its other side goes on; the two must align line by line"
                )
            batch_s.append(_text(a, src, number))
            batch_t.append(_text(b, tgt, number))
            if len(batch_s) == chunk:
                yield batch_s, batch_t
                batch_s, batch_t = [], []
        if batch_s:
            yield batch_s, batch_t


def _text(raw: bytes, path: str, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}, line {number}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def encode_corpus(
    src: str, tgt: str, spm_src: str, spm_tgt: str, *, out: str, threads: int = 1, chunk: int = 100_000, log=print
) -> dict:
    """Encode aligned files `src`/`tgt` into `out`; return the header's statistics."""
    writable(out)
    sp = {"src": vocab.load(spm_src), "tgt": vocab.load(spm_tgt)}
    sizes = {side: p.GetPieceSize() for side, p in sp.items()}
    dtype = binary.token_dtype(max(sizes.values()))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with scratch_dir(out) as tmp:
        pairs, longest, tokens = _encode_raw(src, tgt, sp, tmp=tmp, out=out, dtype=dtype, threads=threads, chunk=chunk)
        if pairs == 0:
            raise UserError(f"{src}: no lines to encode")
        arrays = {side: _side_arrays(tmp, side, pairs, tokens[side], dtype=dtype) for side in ("src", "tgt")}
        meta = {
            "src_vocab": sizes["src"],
            "tgt_vocab": sizes["tgt"],
            "spm_src_sha256": vocab.identity(spm_src),
            "spm_tgt_sha256": vocab.identity(spm_tgt),
            "src_tokens": tokens["src"],
            "tgt_tokens": tokens["tgt"],
            "longest_src": longest["src"],
            "longest_tgt": longest["tgt"],
            "source_files": [str(src), str(tgt)],
        }
        binary.write(out, arrays["src"], arrays["tgt"], dtype=dtype, meta=meta)
    log(
        f"{out}: {pairs:,} pairs, {tokens['src']:,} + {tokens['tgt']:,} tokens, "
        f"longest {longest['src']} / {longest['tgt']}"
    )
    return {"pairs": pairs, **meta}


def _encode_raw(src: str, tgt: str, sp: dict, *, tmp: str, out: Path, dtype, threads: int, chunk: int) -> tuple:
    """Each side's token ids and lengths appended to raw files in `tmp`, a chunk of lines at a time;
    returns (pairs, longest sentence per side, tokens per side)."""
    raw = {name: open(os.path.join(tmp, name), "wb") for name in ("src_tok", "src_len", "tgt_tok", "tgt_len")}
    pairs, longest, tokens = 0, {"src": 0, "tgt": 0}, {"src": 0, "tgt": 0}
    try:
        for lines_s, lines_t in read_pairs(src, tgt, chunk):
            for side, lines in (("src", lines_s), ("tgt", lines_t)):
                ids = sp[side].Encode(lines, num_threads=threads)
                lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
                np.fromiter((t for x in ids for t in x), dtype=dtype, count=int(lengths.sum())).tofile(
                    raw[f"{side}_tok"]
                )
                lengths.tofile(raw[f"{side}_len"])
                longest[side] = max(longest[side], int(lengths.max()))
                tokens[side] += int(lengths.sum())
            pairs += len(lines_s)
    except OSError as exc:  # numpy's "n requested and 0 written": the disk, said as such
        raise (write_failure(out, exc) if exc.errno is None else exc) from None
    finally:
        for f in raw.values():
            with contextlib.suppress(OSError):  # a full disk: the write above said so
                f.close()
    return pairs, longest, tokens


def _side_arrays(tmp: str, side: str, pairs: int, tokens: int, *, dtype) -> tuple:
    """(tokens, offsets) of one side, memory-mapped from the raw files of `_encode_raw`; the offsets
    are summed from the lengths in chunks."""
    off_path = os.path.join(tmp, f"{side}_off")
    open(off_path, "wb").close()
    ensure_space(off_path, (pairs + 1) * 8)  # a full disk is an error now, not a SIGBUS in the map
    offsets = np.memmap(off_path, dtype=np.int64, mode="r+", shape=(pairs + 1,))
    lengths = np.memmap(os.path.join(tmp, f"{side}_len"), dtype=np.int64, mode="r", shape=(pairs,))
    offsets[0], carry = 0, 0
    for i in range(0, pairs, binary.CHUNK):
        part = np.cumsum(lengths[i : i + binary.CHUNK]) + carry
        offsets[i + 1 : i + 1 + len(part)] = part
        carry = int(part[-1])
    toks = (
        np.memmap(os.path.join(tmp, f"{side}_tok"), dtype=dtype, mode="r", shape=(tokens,))
        if tokens
        else np.empty(0, dtype)
    )
    return toks, offsets
