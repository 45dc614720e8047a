"""From verified archives to aligned, cleaned text: extraction, SGML test sets, assembly, cleaning (§5.1).

- Members are taken out of an archive in one streaming pass; every member goes through tarfile's
  `data` filter first, so an archive with a member escaping the target folder (`../x`, an
  absolute path, a link outside) is refused whole.
- Lines are split on "\\n" only: some WMT files hold U+0085 (NEL) inside a line, which
  `str.splitlines()` would split on, breaking the alignment. NEL, U+2028 and U+2029 inside a line
  become spaces (counted in the report).
- Invalid UTF-8 and sides of different length stop with the file and line named.
- Cleaning as the WMT recipes do (clean-corpus-n): empty sides, too long, too unequal in length.
"""

from __future__ import annotations

import bz2
import gzip
import html
import lzma
import os
import re
import struct
import tarfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TextIO

from aiayn.errors import UserError
from aiayn.io import atomic_paths, readable, scratch_dir, together
from aiayn.runtime import records
from aiayn.runtime.lines import read_lines

SEPARATORS = re.compile("[\u0085\u2028\u2029\0]")  # line separators a line may hold, and NUL
SEG = re.compile(r"<seg[^>]*>(.*?)</seg>", re.IGNORECASE | re.DOTALL)
SEG_TAG = re.compile(r"<(/?)seg\b[^>]*>", re.IGNORECASE)
# what reading a damaged archive raises; TypeError, struct.error: tarfile's own reading of a stream cut
# short (ord() of b"" in its gzip header)
ARCHIVE_ERRORS = (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError, OSError, TypeError,
                  struct.error)  # fmt: skip


# -- archives -----------------------------------------------------------------------------------
@contextmanager
def _decompressed(archive) -> Iterator:
    """The tar stream inside `archive`, decompressed by Python's gzip, bz2 or lzma module (chosen by
    the file's first bytes), which verifies the compressed stream's own checksum (CRC-32, CRC-64 or
    SHA-256) when read to its end: a bit flipped on disk after the download's SHA-256 was checked is
    refused, not extracted as other text (tarfile's own gzip reader checks no CRC). A plain tar has
    no checksum of its data: the download's SHA-256 is its check."""
    with open(archive, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        if magic.startswith(b"\x1f\x8b"):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")
        elif magic.startswith(b"BZh"):
            stream = bz2.BZ2File(raw, mode="rb")
        elif magic.startswith(b"\xfd7zXZ\x00"):
            stream = lzma.LZMAFile(raw, mode="rb")
        else:
            yield raw
            return
        with stream:
            yield stream


def extract_members(
    archive: str | os.PathLike, names: set[str] | Callable[[str], bool], dest: str | os.PathLike
) -> dict[str, Path]:
    """Extract the members `names` of a tar archive into `dest` (or every file member whose name
    `names(name)` accepts); return name -> extracted path. A named member that is missing, every
    member that is unsafe, and a wanted member that is a link are refused naming the member.

    Every member is checked by tarfile's `data` filter, whether wanted or not."""
    dest = Path(dest)
    readable(archive, "an archive")
    wanted = names if callable(names) else names.__contains__
    found: dict[str, Path] = {}
    try:
        with _decompressed(archive) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                try:
                    checked = tarfile.data_filter(member, str(dest))
                except tarfile.FilterError as exc:
                    raise UserError(
                        f"{archive}: refusing the archive, member {member.name!r} is unsafe ({exc})"
                    ) from None
                if wanted(member.name) and checked is not None and (checked.issym() or checked.islnk()):
                    raise UserError(
                        f"{archive}: member {member.name} is a link; links are refused, give the file itself"
                    )
                if wanted(member.name) and checked is not None and checked.isfile():
                    tar.extract(checked, dest, filter="data")
                    found[member.name] = dest / checked.name
            while stream.read(1 << 20):  # to its end: the compressor's checksum of all of it is verified there
                pass
    except ARCHIVE_ERRORS as exc:
        if isinstance(exc, UserError):
            raise
        if isinstance(exc, OSError) and not isinstance(exc, gzip.BadGzipFile) and exc.errno is not None:
            raise  # the file system's (a full disk while extracting, a permission): not the archive's fault
        raise UserError(f"{archive}: not a readable archive ({exc}); delete it and download again") from None
    missing = [] if callable(names) else sorted(names - found.keys())
    if missing:
        raise UserError(f"{archive}: has no member {', '.join(missing)}; check the member paths in config.yaml")
    return found


# -- reading ------------------------------------------------------------------------------------------
def sgml_segments(path: str | os.PathLike, label: str | None = None) -> list[str]:
    """The <seg> texts of a WMT SGML file in document order, entities decoded, runs of spaces collapsed.
    Every <seg> must close before the next opens: a missing </seg> names the segment."""
    text = "\n".join(read_lines(path, label))
    check_segments(text, label or str(path))
    return [re.sub(" +", " ", html.unescape(seg).strip()) for seg in SEG.findall(text)]


def check_segments(text: str, label: str) -> None:
    number, open_tag = 0, None
    for tag in SEG_TAG.finditer(text):
        closing = tag.group(1) == "/"
        if closing and open_tag is None:
            raise UserError(f"{label}: a </seg> without its <seg> after segment {number}; repair or replace the file")
        if not closing and open_tag is not None:
            break  # a <seg> inside the one still open
        number, open_tag = (number, None) if closing else (number + 1, tag.group(0))
    if open_tag is not None:
        raise UserError(f"{label}: segment {number} ({open_tag}) has no </seg>; repair or replace the file")


def read_side(path: str | os.PathLike, label: str) -> Iterator[str]:
    if str(label).endswith(".sgm") or str(label).endswith(".sgm.gz"):
        yield from sgml_segments(path, label)
    else:
        yield from read_lines(path, label, nul=True)  # a NUL byte: made a space by `normalize`, counted


def aligned(src: Path, tgt: Path, src_label: str, tgt_label: str) -> Iterator[tuple[str, str]]:
    """Pairs of lines; stops with a clear error if one side ends first."""
    a_iter, b_iter = read_side(src, src_label), read_side(tgt, tgt_label)
    number = 0
    for number, a in enumerate(a_iter, start=1):
        b = next(b_iter, None)
        if b is None:
            raise UserError(f"{tgt_label} ends at line {number - 1} but {src_label} goes on: the sides are misaligned")
        yield a, b
    if next(b_iter, None) is not None:
        raise UserError(f"{src_label} ends at line {number} but {tgt_label} goes on: the sides are misaligned")


# -- cleaning ---------------------------------------------------------------------------------------
def keep_reason(src: str, tgt: str, *, min_len: int, max_len: int, max_ratio: float, max_chars: int) -> str | None:
    """Why a pair is dropped (None: kept), as clean-corpus-n.perl decides, on whitespace tokens, and
    by characters per side (which the word counts let through in a degenerate 'word')."""
    if len(src) > max_chars or len(tgt) > max_chars:
        return "too_many_chars"
    ls, lt = len(src.split()), len(tgt.split())
    if ls == 0 or lt == 0:
        return "empty"
    if ls < min_len or lt < min_len:
        return "too_short"
    if ls > max_len or lt > max_len:
        return "too_long"
    if max(ls, lt) / min(ls, lt) > max_ratio:
        return "ratio"
    return None


def normalize(line: str) -> tuple[str, int]:
    """The line with NEL / LS / PS (and NUL) made spaces and outer whitespace stripped, and how many there were."""
    fixed, count = SEPARATORS.subn(" ", line)
    return fixed.strip(), count


@contextmanager
def atomic_pair(src: str | os.PathLike, tgt: str | os.PathLike) -> Iterator[tuple[TextIO, TextIO]]:
    """Two text files written together: renamed into place only when both are complete."""
    with (
        atomic_paths(src, tgt) as (a, b),
        open(a, "w", encoding="utf-8", newline="\n") as fa,
        open(b, "w", encoding="utf-8", newline="\n") as fb,
    ):
        yield fa, fb


def refuse_settings(corpora: list[dict], archives: dict[str, str], cleaning: dict) -> None:
    """Settings no corpus could be prepared from, said before any archive is read."""
    if not corpora:
        raise UserError("--corpora: no training corpus given (an empty list)")
    if cleaning.get("min_len", 0) > cleaning.get("max_len", float("inf")):
        low, high = cleaning["min_len"], cleaning["max_len"]
        raise UserError(f"--cleaning: min_len {low} is above max_len {high}: no pair could be kept")
    for member in corpora:
        if member.get("archive") and member["archive"] not in archives:
            raise UserError(
                f"--corpora names archive {member.get('archive')!r}, which --archives lacks ({', '.join(archives)})"
            )


def prepare_train(
    corpora: list[dict], archives: dict[str, str], cleaning: dict, *, out_src, out_tgt, report_path, log=print
) -> dict:
    """Concatenate training corpora (archive + member per side), aligned and cleaned; write the report; return it."""
    refuse_settings(corpora, archives, cleaning)
    report = {
        "corpora": [],
        "kept": 0,
        "removed": {"empty": 0, "too_short": 0, "too_long": 0, "ratio": 0, "too_many_chars": 0},
        "separators_replaced": 0,
    }
    with (
        together(),  # the corpus and its report: all three in place, or none
        atomic_pair(out_src, out_tgt) as (fs, ft),
        scratch_dir(out_src) as tmp,
    ):
        for member in corpora:
            extracted = bool(member.get("archive"))
            if extracted:
                files = extract_members(
                    archives[member["archive"]], {member["src"], member["tgt"]}, Path(tmp) / member["archive"]
                )
                labels = [f"{archives[member['archive']]}:{member[s]}" for s in ("src", "tgt")]
            else:  # your own corpus: files on disk, yours, read and left as they are
                files, labels = local_pair(member), [member["src"], member["tgt"]]
            stats = dict(archive=member.get("archive"), src=member["src"], tgt=member["tgt"], pairs=0, kept=0)
            for a, b in aligned(files[member["src"]], files[member["tgt"]], *labels):
                stats["pairs"] += 1
                (a, fixed_a), (b, fixed_b) = normalize(a), normalize(b)
                report["separators_replaced"] += fixed_a + fixed_b
                reason = keep_reason(a, b, **cleaning)
                if reason:
                    report["removed"][reason] += 1
                    continue
                fs.write(a + "\n")
                ft.write(b + "\n")
                stats["kept"] += 1
            if extracted:  # scratch copies out of the archive, gone before the next corpus is extracted
                for path in files.values():
                    path.unlink()
            report["corpora"].append(stats)
            report["kept"] += stats["kept"]
        if report["kept"] == 0:  # before the files are renamed into place: nothing is left under their names
            named = ", ".join(m.get("archive") or m["src"] for m in corpora)
            raise UserError(f"no training pair of {named} survived cleaning; check the corpora and `cleaning:`")
        records.write(report_path, "train report", report)
    removed = ", ".join(f"{k} {v:,}" for k, v in report["removed"].items())
    log(f"{report['kept']:,} pairs kept; removed: {removed}; line separators replaced: {report['separators_replaced']}")
    return report


def local_pair(member: dict) -> dict[str, Path]:
    """A source/target pair of files on disk (no archive), each checked to exist."""
    for side in ("src", "tgt"):
        if not Path(member[side]).is_file():
            raise UserError(f"{member[side]}: not found (a {side} file of your corpus, named in config.yaml)")
    return {member["src"]: Path(member["src"]), member["tgt"]: Path(member["tgt"])}


def prepare_eval(
    spec: dict, name: str, archive: str | None, *, out_src, out_tgt, dataset: str | None = None, log=print
) -> int:
    """Write one dev/test set (members `spec["src"]`, `spec["tgt"]` of `archive`, or files on disk
    without one) as aligned text; check its number of lines against `spec["lines"]` (a mistake
    names the key datasets.<dataset>.eval_sets.<name>.lines when `dataset` is given); with
    `spec["first"]`, only the first segments are written."""
    key = f"datasets.{dataset}.eval_sets.{name}" if dataset else "the eval set"
    with scratch_dir(out_src) as tmp:
        if archive:
            files = extract_members(archive, {spec["src"], spec["tgt"]}, tmp)
            labels = (f"{archive}:{spec['src']}", f"{archive}:{spec['tgt']}")
        else:
            files, labels = local_pair(spec), (spec["src"], spec["tgt"])
        pairs = list(aligned(files[spec["src"]], files[spec["tgt"]], *labels))
    if not pairs:
        raise UserError(f"{labels[0]}: no segments; {name} must have some ({key}: check its src, tgt and archive)")
    if spec.get("lines") and len(pairs) != spec["lines"]:
        raise UserError(
            f"{labels[0]} has {len(pairs)} segments, {name} is expected to have {spec['lines']}: "
            f"set {key}.lines to its size (or check that it is the right version of the set)"
        )
    if spec.get("first"):
        pairs = pairs[: spec["first"]]
    with atomic_pair(out_src, out_tgt) as (fs, ft):
        for a, b in pairs:
            fs.write(normalize(a)[0] + "\n")
            ft.write(normalize(b)[0] + "\n")
    log(
        f"{name}: {len(pairs)} segments -> {out_src}, {out_tgt}"
        + (f" (its first {spec['first']})" if spec.get("first") else "")
    )
    return len(pairs)
