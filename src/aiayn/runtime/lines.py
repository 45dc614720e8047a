"""The one reader of text files: UTF-8, gzipped or not, split on "\\n" only (some WMT files hold
U+0085 inside a line, which `str.splitlines()` would split on), invalid UTF-8 and a corrupt gzip
file named with the line."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import Iterator

from aiayn.errors import UserError
from aiayn.io import readable


def open_text(path: str | os.PathLike, what: str = "a text file") -> io.BufferedReader:
    path = str(readable(path, what))
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _lines(f, label: str) -> Iterator[bytes]:
    try:
        yield from f
    except gzip.BadGzipFile:
        raise UserError(f"{label}: not a gzip file, though its name ends in .gz; replace the file") from None
    except (EOFError, zlib.error) as exc:
        raise UserError(f"{label}: a corrupt gzip file ({exc}); replace the file") from None


def read_lines(
    path: str | os.PathLike, label: str | None = None, *, keep_bom: bool = False, what: str = "a text file", nul=False
) -> Iterator[str]:
    """Lines of a (possibly gzipped) UTF-8 file, split on "\\n" only, without the line end or (unless
    `keep_bom`) a leading byte-order mark; a NUL byte, which no text holds (a binary or damaged file), refused
    unless `nul` (a corpus whose cleaning replaces it)."""
    label = label or str(path)
    with open_text(path, what) as f:
        for number, raw in enumerate(_lines(f, label), start=1):  # binary iteration splits on b"\n" only
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{label}, line {number}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
            if "\0" in line and not nul:
                raise UserError(f"{label}, line {number}: holds a NUL byte, which text does not (a binary or damaged "
                                "file?); give the text file")  # fmt: skip
            if number == 1 and not keep_bom:
                line = line.removeprefix("\ufeff")  # a byte-order mark is not text (an editor's, Windows')
            yield line.rstrip("\n").rstrip("\r")
