"""Rows of a table (dicts) as Markdown and as CSV, from the same values, through a pandas DataFrame;
the line every table ends with."""

from __future__ import annotations

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
