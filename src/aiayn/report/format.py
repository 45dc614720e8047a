"""Rows of a table (dicts) as Markdown and as CSV, from the same values, through a pandas DataFrame;
a table's document (its parts: title, table, paragraphs, numbered notes) as Markdown and as an HTML
page; the line every table ends with."""

from __future__ import annotations

import html
import re

from aiayn import described
from aiayn.report.compact import OURS, fill, numbered


def cell(value, key: str = "") -> str:
    """The text of one cell of column `key`: floats rounded as the column's kind needs, None blank."""
    if value is None:
        return ""
    if isinstance(value, float):
        if "flops" in key or "cost" in key:
            return f"{value:.1e}"
        if key in ("mfu",):
            return f"{value:.1%}"
        if key.endswith("tokens_per_update"):
            return f"{value:,.0f}"
        if key.startswith("p_value"):
            return f"{value:.4f}"
        return f"{value:.2f}"
    return str(value)


def to_csv(rows: list[dict]) -> str:
    """The rows as CSV, every value as it is (None empty): one column per key of the first row."""
    import pandas as pd

    if not rows:
        return ""
    return pd.DataFrame(rows, columns=list(rows[0]), dtype=object).to_csv(index=False)


def to_markdown(rows: list[dict], columns: list[str] | None = None) -> str:
    """The rows as a Markdown table of `columns` (default: the first row's keys), each value as `cell`
    writes it for its column."""
    import pandas as pd
    import tabulate  # noqa: F401 -- what pandas' to_markdown writes with; a missing one is then named

    if not rows:
        return "(no experiments)\n"
    columns = columns or list(rows[0])
    cells = pd.DataFrame([[cell(r.get(c), c).replace("|", "\\|") for c in columns] for r in rows], columns=columns)
    return cells.to_markdown(index=False, tablefmt="pipe", disable_numparse=True) + "\n"


def compact_markdown(lines: list[dict], columns: list[str], right: set[str] = frozenset()) -> str:
    """`lines` (cells already text) as a Markdown pipe table as narrow as its cells allow: each column
    as wide as its widest cell or header (3 at least, the `---` Markdown needs), the columns of `right`
    aligned right (figures, as a paper prints them). pandas' `to_markdown` pads every header by 2."""
    if not lines:
        return "(no experiments)\n"
    text = [[str(line.get(c, "")).replace("|", "\\|") for c in columns] for line in lines]
    widths = [max(3, len(c), *(len(row[i]) for row in text)) for i, c in enumerate(columns)]

    def fill(cells: list[str]) -> str:
        padded = [t.rjust(w) if c in right else t.ljust(w) for c, t, w in zip(columns, cells, widths)]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":") if c in right else (":" + "-" * (w + 1)) for c, w in zip(columns, widths)
    )
    return "\n".join([fill(list(columns)), rule + "|", *(fill(row) for row in text)]) + "\n"


def footer() -> str:
    """The last line of every table: which aiayn wrote it."""
    return f"\nWritten by aiayn {described()}.\n"


def paragraphs(text: str) -> list[tuple[str, str]]:
    """A note's text (lines, blank ones between) as paragraph parts."""
    return [("p", line.strip()) for line in text.split("\n") if line.strip()]


def markdown_of(parts: list[tuple[str, object]]) -> str:
    """A table's `document` as Markdown, its prose wrapped to WIDTH characters a line."""
    out = []
    for kind, content in parts:
        if kind == "title":
            out.append(f"# {content}\n")
        elif kind == "h2":
            out.append(f"## {content}\n")
        elif kind == "table":
            out.append(compact_markdown(*content))
        elif kind == "ol":
            out.append(numbered(content))
        else:
            out.append(fill(content) + "\n")
    return "\n".join(out)


def html_of(parts: list[tuple[str, object]]) -> str:
    """A table's `document` as one self-contained HTML page, what Snakemake's report shows of it:
    the paper's table with our rows in it first, its figures aligned right."""
    body, title = [], ""
    for kind, content in parts:
        if kind == "title":
            title = inline(content)
            body.append(f"<h1>{title}</h1>")
        elif kind == "h2":
            body.append(f"<h2>{inline(content)}</h2>")
        elif kind == "table":
            lines, cols, right = content
            right = {c: ' class="n"' if c in right else "" for c in cols}
            head = "".join(f"<th{right[c]}>{inline(c)}</th>" for c in cols)
            trs = "".join(
                ('<tr class="ours">' if line.get(OURS) else "<tr>")
                + "".join(f"<td{right[c]}>{inline(str(line.get(c, '')))}</td>" for c in cols)
                + "</tr>"
                for line in lines
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>")
        elif kind == "ol":
            body.append("<ol>" + "".join(f"<li>{inline(n)}</li>" for n in content) + "</ol>")
        else:
            body.append(f"<p>{inline(content)}</p>")
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em;line-height:1.4}"
    "table{border-collapse:collapse;margin:1em 0}th,td{padding:.2em .6em;border-bottom:1px solid #ddd;"
    "text-align:left;white-space:nowrap}th{border-bottom:2px solid #444}.n{text-align:right}"
    "tr.ours td{background:#eef4ff;font-weight:bold}ol,p{font-size:.9em}code{font-size:.95em}"
)


def inline(text: str) -> str:
    """Text as HTML: escaped, `code` spans as <code>."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text, quote=False))
