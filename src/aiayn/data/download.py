"""Downloads that can be trusted: resumed after interruptions, retried, checksum-verified before use.

The file grows under `<out>.part` (a later attempt resumes it with an HTTP Range request) and is
renamed to `<out>` only once its sha256 matches the configured one; a mismatch removes it. (The
one writer that does not use `aiayn.io.atomic_paths`: its temporary file keeps its name across
attempts so that a later one resumes it; Snakemake never runs two jobs for one output.)
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from aiayn.errors import WRITING, UserError
from aiayn.io import file_sha256, output_target, readable

BLOCK = 1 << 20


class Incomplete(IOError):
    """The server sent fewer bytes than it announced."""


def local_source(url: str) -> str | None:
    """The file a file: URL (or a bare path) names; None for a URL of the network."""
    if url.startswith("file://"):
        return urllib.request.url2pathname(url[len("file://") :])
    return None if "://" in url else url


def part_of(out) -> Path:
    """Where `out` grows until it is verified."""
    return Path(out).with_name(Path(out).name + ".part")


def derived_files(url: str, out) -> tuple[list, list]:
    """What `download` reads and writes beyond its options (aiayn.cli.paths): `<out>.part`, and the
    file a file: URL names."""
    source = local_source(url)
    return [("--out's .part", str(part_of(out)), "appended")], [("--url", source, "file")] if source else []


def fetch(url: str, part: Path, timeout: float, *, size: int | None = None, on_block=None) -> None:
    """Append the rest of `url` to `part` (all of it if the server ignores the range), never past
    `size` bytes in all: a server that sends more is refused (and the file removed) as it sends.
    (`on_block`: called after each block written, for tests.)"""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to fetch: the part file is complete
            return
        raise
    with response:
        status = getattr(response, "status", 200)
        resumed = have and status == 206
        expected = response.headers.get("Content-Length")
        got, start = 0, have if resumed else 0
        with open(part, "ab" if resumed else "wb") as f:
            for block in iter(lambda: response.read(BLOCK), b""):
                if size is not None and start + got + len(block) > size:
                    f.close()
                    part.unlink(missing_ok=True)
                    raise UserError(
                        f"{url}: the server sends more than the {size:,} bytes config.yaml expects; the download "
                        "was removed (a changed file, or the wrong mirror)"
                    )
                try:
                    f.write(block)
                except OSError as exc:
                    exc.filename = exc.filename or str(part)
                    raise
                got += len(block)
                if on_block:
                    f.flush()
                    on_block()
        if expected is not None and got < int(expected):
            raise Incomplete(f"got {got} of {expected} bytes")


def check_sha256(sha256: str) -> None:
    """An archive's SHA-256 as config.yaml gives it: 64 lowercase hex digits."""
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise UserError(f"--sha256 {sha256!r}: not a SHA-256 (64 lowercase hex digits); check the archive's sha256")


def download(
    url: str,
    out: str | os.PathLike,
    sha256: str,
    *,
    retries: int = 5,
    wait: float = 10.0,
    timeout: float = 60.0,
    size: int | None = None,
    log=print,
) -> None:
    """Fetch `url` to `out`, resuming and retrying; verify `sha256` before renaming into place.

    `size` (bytes, from config.yaml) tells a transfer cut short from a finished one when the server
    sends no Content-Length: a shorter file is resumed, not checked and thrown away."""
    check_sha256(sha256)
    if urllib.parse.urlsplit(url).scheme not in ("http", "https", "file"):
        raise UserError(f"--url {url}: not an http://, https:// or file:// address (check the `mirror` setting)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    target, through = output_target(out)
    part = part_of(out)
    source = local_source(url)
    if source is not None:
        readable(source, "the archive (a file: URL, from the mirror setting)")
        if size is not None and Path(source).stat().st_size != size:
            raise UserError(
                f"{url}: {Path(source).stat().st_size:,} bytes, config.yaml expects {size:,}; nothing was copied "
                "(a changed file, or the wrong mirror)"
            )
        shutil.copyfile(source, part)
    else:
        fetch_retrying(url, part, retries=retries, wait=wait, timeout=timeout, size=size, log=log)
    if size is not None and part.stat().st_size != size:
        got = part.stat().st_size
        part.unlink()
        raise UserError(
            f"{url}: {got:,} bytes, config.yaml expects {size:,}; the download was removed "
            "(a changed file, or the wrong mirror)"
        )
    digest = file_sha256(part)
    if digest != sha256:
        part.unlink()
        raise UserError(
            f"{url}: sha256 is {digest}, config.yaml expects {sha256}; the download was removed "
            "(a changed or corrupt file, or the wrong mirror)"
        )
    if through:  # a character device (/dev/null): its bytes go to it, the device stays
        with open(part, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        part.unlink()
    else:
        os.replace(part, target)
    log(f"{url}: sha256 verified -> {out}")


def fetch_retrying(url: str, part: Path, *, retries: int, wait: float, timeout: float, size: int | None, log) -> None:
    """`fetch` until `part` is whole (`size` bytes where known), again after a failure of the network
    (`retries` times, `wait` seconds apart); a full disk or an HTTP 403, 404 or 410 stops it at once."""
    for attempt in range(1, retries + 2):
        try:
            fetch(url, part, timeout, size=size)
            have = part.stat().st_size if part.exists() else 0
            if size is not None and have < size:
                raise Incomplete(f"the connection closed after {have:,} of {size:,} bytes")
            return
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno in WRITING:
                raise  # the disk's fault (a full disk): retrying would fail the same way
            if isinstance(exc, urllib.error.HTTPError) and exc.code in (403, 404, 410):
                raise UserError(
                    f"{url}: HTTP {exc.code} {exc.reason}; check the URL (or `mirror`) in config.yaml"
                ) from None
            if attempt > retries:
                again = f"run again to resume from {part}" if part.is_file() and part.stat().st_size else "run again"
                raise UserError(f"{url}: download failed after {attempt} attempts ({exc}); {again}") from None
            log(f"{url}: attempt {attempt} failed ({exc}); resuming in {wait:g} s")
            time.sleep(wait)
