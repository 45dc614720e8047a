"""`python -m aiayn download`: fetch one archive, resume and retry, verify its sha256."""

from __future__ import annotations

from aiayn.commands import at_least, finite_at_least, library_default, say
from aiayn.data.download import download
from aiayn.inventory import OUTPUT, text


def add_arguments(add):
    add(
        "--url",
        type=text("aiayn.data.download.download"),
        required=True,
        help="the archive's URL (http, https or file)",
    )
    add(
        "--sha256",
        type=text("aiayn.data.download.check_sha256"),
        required=True,
        help="the archive's SHA-256, 64 hex digits",
    )
    add("--out", type=OUTPUT, required=True, help="path of the downloaded archive")
    add(
        "--retries",
        type=at_least(0),
        default=library_default("aiayn.data.download.download", "retries"),
        help="attempts after the first before giving up (default %(default)s)",
    )
    add(
        "--wait",
        type=finite_at_least(0),
        default=library_default("aiayn.data.download.download", "wait"),
        help="seconds between attempts (default %(default)s)",
    )
    add(
        "--timeout",
        type=finite_at_least(0.001),
        default=library_default("aiayn.data.download.download", "timeout"),
        help="seconds without data before an attempt fails (default %(default)s)",
    )
    add("--size", type=at_least(1), help="the archive's size in bytes (tells a cut transfer from a finished one)")


def run(args) -> None:
    download(
        args.url,
        args.out,
        args.sha256,
        retries=args.retries,
        wait=args.wait,
        timeout=args.timeout,
        size=args.size,
        log=say,
    )
