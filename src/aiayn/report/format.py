"""Rows of a table (dicts) as Markdown and as CSV, from the same values; the line every table ends with."""

from __future__ import annotations

import csv
import io

from aiayn import described


def cell(value, key: str = "") -> str:
    """The text of one cell of column `key`: floats rounded as the column's kind needs, None blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        if "flops" in key or "cost" in key:
            return f"{value:.1e}"
        if key in ("mfu",):
            return f"{value:.1%}"
        if key == "tokens_per_update":
            return f"{value:,.0f}"
        if key.startswith("p_value"):
            return f"{value:.4f}"
        return f"{value:.2f}"
    return str(value)


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def to_markdown(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "(no experiments)\n"
    columns = columns or list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c), c) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def footer() -> str:
    """The last line of every table: which aiayn wrote it."""
    return f"\nWritten by aiayn {described()}.\n"
