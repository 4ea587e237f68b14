"""Text in an SVG without a browser to measure it: wrapping by characters, widths by estimate,
and escaping (every word drawn comes from an agent document, so none of it is markup)."""

from __future__ import annotations

import textwrap
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
FONT_SIZE = 12.0
LINE_HEIGHT = 15.0
# Average advance of a 12px sans-serif glyph, rounded up: boxes come out a little wide rather
# than clipping text in any common font.
CHAR_WIDTH = 7.0
BOLD_CHAR_WIDTH = 7.6


def text_width(text: str, *, bold: bool = False) -> float:
    return len(text) * (BOLD_CHAR_WIDTH if bold else CHAR_WIDTH)


def wrap(text: str, width: int, max_lines: int) -> tuple[str, ...]:
    """`text` in lines of at most `width` characters, at most `max_lines` of them (the last
    ending in "…" when some was left out)."""
    lines = textwrap.wrap(" ".join(text.split()), width, break_long_words=True) or [""]
    if len(lines) <= max_lines:
        return tuple(lines)
    kept = lines[:max_lines]
    kept[-1] = kept[-1][: width - 1].rstrip() + "…"
    return tuple(kept)


def printable(value: str) -> str:
    """`value` without the control characters XML (and a one-line label) cannot hold."""
    return (
        "".join(ch if ch >= " " or ch in "\t\n" else "\ufffd" for ch in value)
        .replace("\ufffe", "\ufffd")
        .replace("\uffff", "\ufffd")
    )


def attr(value: str) -> str:
    """A value safe inside a double-quoted attribute."""
    return escape(printable(value), quote=True)


def text(value: str) -> str:
    """A value safe as element content."""
    return escape(printable(value), quote=False)


def number(value: float) -> str:
    """Coordinates with one decimal: stable across platforms, small in the file."""
    rounded = round(value, 1)
    return f"{rounded:.1f}" if rounded != int(rounded) else str(int(rounded))
