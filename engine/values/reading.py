"""The customer's words read as a type: every value of that type a message holds, where, and how
surely.

A message is cut into *runs* first — letters and digits joined by the characters that join
them inside one value ("1,000.50", "1234 324", "P-7001", "12/12/2026", "3:30pm") — and a value
is only ever read from a whole run: the 50 of "2,50 €", the 324 of "1234 324" and the 1234 of
"1234-324" are never values of their own. Each `Reading` says whether it is *exact* (written one
way only, in the agent's own conventions) or had to be worked out (a number in words, "2k", a
separator that means thousands in one locale and decimals in another, a relative date, a date
without its year, a long bare digit string read as an amount, a choice named by a prefix).

Pure and deterministic: nothing here asks a model anything.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from engine.values.dates import dates, datetimes, times
from engine.values.money import Money
from engine.values.numbers import currency_near, numbers
from engine.values.runs import GAPS, Reading, ReadingContext, runs
from engine.values.types import ValueShape

# -- text, ids and choices -------------------------------------------------------------------------

_EDGES = " \t\r\n.,;:!?\"'“”‘’«»()[]{}"
_SPACE = re.compile(r"\s+")


def _folded(text: str) -> str:
    return _SPACE.sub(" ", text.strip()).casefold()


def texts(text: str, value: str, shape: ValueShape) -> list[Reading]:
    """Where a text value is in a message. Text is exact when it is the whole message (an id
    compared without its separators: "1234-324" is 1234324), and found, inexact, as whole words
    of a longer one — the model chose which words. A value of a declared `pattern` (an account
    id's shape) is read from whole runs of that shape only, and exact when it is the only one."""
    wanted = _folded(value)
    if not wanted:
        return []
    if shape.pattern:
        return _ids(text, wanted, shape)
    whole = _folded(text.strip(_EDGES))
    if _bare(whole) == _bare(wanted) and (whole == wanted or _has_digit(wanted)):
        return [Reading(value, 0, len(text), True)]
    if _has_digit(wanted) and " " not in wanted:
        # an id among other words: whole runs only, never a piece of a longer number
        return [
            Reading(r.value, r.start, r.end, False, how="an id among other words")
            for r in _ids(text, wanted, shape)
            if r.value == wanted
        ]
    pattern = r"(?<!\w)" + re.escape(wanted).replace(r"\ ", r"\s+") + r"(?!\w)"
    return [
        Reading(value, m.start(), m.end(), False, how="part of a longer message")
        for m in re.finditer(pattern, text.casefold())
    ]


_ID_SEPARATORS = re.compile(rf"[-_/.,'’{GAPS}]")


def _bare(text: str) -> str:
    return _ID_SEPARATORS.sub("", text)


def _has_digit(text: str) -> bool:
    return any(c.isdigit() for c in text)


def _ids(text: str, wanted: str, shape: ValueShape) -> list[Reading]:
    """Id-like runs of a message (with a digit, not an amount; of the declared pattern, if
    any): the reading of `wanted` where a run spells it, and a reading of each other run's own
    spelling, so that uniqueness can be judged."""
    bare = _bare(wanted).casefold()
    found = []
    for run in runs(text):
        if not run.has_digit or currency_near(text, run.start, run.end)[0] is not None:
            continue  # "$40" is an amount, not an account
        spelled = _bare(run.text).casefold()
        if shape.pattern and not (
            re.fullmatch(shape.pattern, run.text) or re.fullmatch(shape.pattern, spelled)
        ):
            continue
        found.append(Reading(wanted if spelled == bare else spelled, run.start, run.end, True))
    return found


def choices(text: str, shape: ValueShape) -> list[Reading]:
    """The listed choices a message names as whole words (not qualified by the word before:
    "extra large" names no "large"), and a unique prefix of one ("med" for "medium")."""
    folded = text.casefold()
    found = []
    for choice in shape.choices:
        pattern = r"(?<!\w)" + re.escape(choice.strip().casefold()).replace(r"\ ", r"\s+")
        for m in re.finditer(pattern + r"(?!\w)", folded):
            before = re.search(r"([\w']+)\s*$", folded[: m.start()])
            if before is not None and before.group(1) in _QUALIFIERS:
                continue
            found.append(Reading(choice, m.start(), m.end(), True))
    if not found:
        for m in re.finditer(r"\w{3,}", folded):
            labels = [c for c in shape.choices if c.casefold().startswith(m.group())]
            if len(labels) == 1 and labels[0].casefold() != m.group():
                found.append(
                    Reading(labels[0], m.start(), m.end(), False, how=f"{m.group()!r} completed")
                )
    return found


# Words that make the choice after them another thing: "extra large", "not large".
_QUALIFIERS = frozenset({"extra", "not", "no", "non", "super", "very", "x", "xx", "less", "more"})


# -- one entry point -------------------------------------------------------------------------------


def read(shape: ValueShape, text: str, ctx: ReadingContext, *, value: Any = None) -> list[Reading]:
    """Every value of `shape` in a normalized message. For text, `value` is the value looked for
    (text is not enumerable); ids read every id-like run so that uniqueness can be judged."""
    kind = shape.kind
    if kind in ("int", "decimal", "money"):
        return _number_readings(shape, text, ctx)
    if kind == "date":
        return dates(text, ctx)
    if kind == "time":
        return times(text)
    if kind == "datetime":
        return datetimes(text, ctx)
    if kind == "enum":
        return choices(text, shape)
    if kind == "str":
        return texts(text, str(value), shape) if value is not None else []
    return []  # bool: a yes/no is never read off free text


def _number_readings(shape: ValueShape, text: str, ctx: ReadingContext) -> list[Reading]:
    out: list[Reading] = []
    for n in numbers(text, ctx, shape.currency):
        for number in n.values:
            if shape.kind == "int" and number != number.to_integral_value():
                continue
            exact = n.exact and len(n.values) == 1
            how = n.how
            if shape.kind == "money":
                currency = n.currency or shape.currency
                if currency is None:
                    continue
                if not n.currency_sure:
                    exact, how = False, how or "the currency sign fits several currencies"
                value: Any = Money(amount=number, currency=currency)
                # An amount with its currency written is no account number.
                strong = not n.bare_long
            else:
                value = int(number) if shape.kind == "int" else number
                strong = not n.bare_long
            out.append(Reading(value, n.start, n.end, exact, strong, how))
    return out


def overlapping(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def spans_of(readings: Sequence[Reading]) -> list[tuple[int, int]]:
    return [r.span for r in readings]
