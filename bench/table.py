"""A benchmark table — a title, headers, rows of text and notes — how a figure is written in one
of its cells, and its two renderings: plain text for the console, Markdown for
docs/BENCHMARKS.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Table:
    """One table of a report, its cells already written as text."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)


def ms_cell(value: float | None, digits: int = 1) -> str:
    """A duration in ms with thousands separators; "–" when it was not measured (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def count_cell(value: float, digits: int = 0) -> str:
    """A count or mean with thousands separators; "–" for NaN (nothing to average)."""
    if isinstance(value, float) and math.isnan(value):
        return "–"
    return f"{value:,.{digits}f}"


def render_text(table: Table) -> str:
    """The table for the console: padded columns, a rule under the headers, notes below."""
    widths = [len(h) for h in table.headers]
    for row in table.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    line = "  ".join("-" * w for w in widths)
    out = [table.title, "=" * len(table.title)]
    out.append("  ".join(h.ljust(w) for h, w in zip(table.headers, widths, strict=True)))
    out.append(line)
    for row in table.rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    out.extend(f"  note: {n}" for n in table.notes)
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(table: Table, level: str = "###") -> str:
    """The table as a Markdown section: its title a heading of `level`, its notes in italics."""
    out = [f"{level} {table.title}", ""]
    out.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
    out.append("|" + "|".join("---" for _ in table.headers) + "|")
    for row in table.rows:
        out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    if table.notes:
        out.append("")
        out.extend(f"_{n}_" for n in table.notes)
    return "\n".join(out)
