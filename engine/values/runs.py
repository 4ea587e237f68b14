"""What every reader of values shares: a `Reading` (one value read off a span of a message), the
`ReadingContext` a turn reads in, the normalized text every span refers to, and its *runs* —
letters and digits joined by the characters that join them inside one value ("1,000.50",
"1234 324", "P-7001", "12/12/2026", "3:30pm"). A value is only ever read from a whole run.

Pure and deterministic: nothing here asks a model anything.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.values.locale import decimal_mark, groups_with_spaces


@dataclass(frozen=True)
class Reading:
    """One value of the shape asked for, read off a span of a message."""

    value: Any
    start: int
    end: int
    exact: bool  # written one way only: nothing had to be worked out
    # Counts as a candidate against the others: a long bare digit string read as an amount (an
    # account number, most likely) does not make "$40" ambiguous.
    strong: bool = True
    how: str = ""  # what had to be worked out, when not exact

    @property
    def span(self) -> tuple[int, int]:
        return self.start, self.end


@dataclass(frozen=True)
class ReadingContext:
    """What reading needs besides the text: the agent's today (relative dates), the language the
    customer writes in (number words, dates, currency words: `engine.values.locale`) and the
    decimal marks they write natively (a separator read by another convention is inferred)."""

    today: date | None = None
    decimal_marks: frozenset[str] = field(default_factory=lambda: frozenset({"."}))
    language: str = "en"
    spaced_groups: bool = False  # the language groups thousands with a space ("1 000")
    # the languages the agent serves: words and dates are read in each (a one-word message
    # may not tell its language), the customer's own first
    languages: tuple[str, ...] = ("en",)

    @property
    def word_languages(self) -> tuple[str, ...]:
        """The languages numbers in words and dates are read in, besides English (read always)."""
        ordered = dict.fromkeys((self.language, *self.languages))
        return tuple(tag for tag in ordered if tag != "en")


@lru_cache(maxsize=64)
def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC  # validation reports an unknown time zone; a turn never fails on it


def reading_context(
    timezone: str, now: datetime | None, language: str = "en", languages: tuple[str, ...] = ()
) -> ReadingContext:
    """How a turn reads values: today's date where the agent's customers are, in the language
    the customer writes (its decimal mark)."""
    marks = frozenset({decimal_mark(language)})
    spaced = groups_with_spaces(language)
    today = None
    if now is not None:
        local = now.astimezone(_zone(timezone)) if now.tzinfo is not None else now
        today = local.date()
    return ReadingContext(today, marks, language, spaced, languages or (language,))


def normalize(text: str) -> str:
    """Compatibility forms folded (full-width digits and signs, no-break spaces kept as spaces
    of their own kind) and every script's decimal digits written as ASCII ("٥٠٠", "५००" → "500",
    one character for one): every reading, and every span, refers to this form of the text."""
    folded = unicodedata.normalize("NFKC", text or "")
    if folded.isascii():
        return folded
    return _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), folded)


_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # a decimal digit of another script


# -- runs ------------------------------------------------------------------------------------------

_ALNUM = "0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f"
GAPS = " \u00a0\u202f\u2009"
_JOIN = rf"(?:(?<=[0-9])[.,'’{GAPS}](?=[0-9])|[-_/:](?=[{_ALNUM}]))"
_RUN = re.compile(rf"(?<![{_ALNUM}])[{_ALNUM}]+(?:{_JOIN}[{_ALNUM}]+)*")


@dataclass(frozen=True)
class Run:
    start: int
    end: int
    text: str

    @property
    def has_digit(self) -> bool:
        return any(c.isdigit() for c in self.text)


@lru_cache(maxsize=1024)
def runs(text: str) -> tuple[Run, ...]:
    """The runs of a (normalized) text, in order. Cached: a turn reads the same messages for
    several values and stages, and the window's messages again every turn (runs are frozen)."""
    return tuple(Run(m.start(), m.end(), m.group()) for m in _RUN.finditer(text))
