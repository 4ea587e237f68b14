"""Values recognised by their shape, in any domain: numbers written in words, times of day,
weekdays. Used by `infra.offline.values`; nothing here knows what a field is for."""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.grounding import clock_times as engine_clock_times

SMALL_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
)  # fmt: skip
_UNITS = {w: i for i, w in enumerate(SMALL_NUMBER_WORDS)} | {
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?:s)?\b", re.I)


def number_phrase(words: Sequence[str]) -> tuple[int, int]:
    """A number written in words at the start of `words` (lower-case): "three hundred", "two
    thousand five hundred", "twenty-five", "one hundred and fifty" → (value, words spanned);
    (0, 0) when there is none. A lone small word ("one", "two") is not one: "the checking one"
    names no number, and a count in words is read by its own rule."""
    total = current = 0
    used = 0
    big = False
    for word in words:
        parts = word.split("-")
        if word == "and" and used:
            used += 1
            continue
        if not all(p in _UNITS or p in _TENS or p in _SCALES for p in parts):
            break
        for part in parts:
            if part in _SCALES:
                current = max(current, 1) * _SCALES[part]
                if _SCALES[part] >= 1000:
                    total, current = total + current, 0
                big = True
            else:
                current += _UNITS.get(part, 0) + _TENS.get(part, 0)
                big = big or part in _TENS or _UNITS.get(part, 0) > 12
        used += 1
    if used and words[used - 1] == "and":
        used -= 1
    return (total + current, used) if big and used else (0, 0)


def clock_times(text: str) -> list[tuple[str, str]]:
    """Times of day ("15:00", "15.30", "3pm", "3:30 p.m."): (HH:MM, as written) for each — the
    engine's own reading (`engine.grounding.clock_times`), so a time stored as 15:00 is grounded
    in the "3pm" the customer wrote."""
    return [(value, text[start:end]) for value, start, end in engine_clock_times(text)]


def weekdays(text: str) -> list[str]:
    """The weekdays named in `text`, capitalised, each once, in order."""
    return list(dict.fromkeys(d.capitalize() for d in (w.lower() for w in _WEEKDAY.findall(text))))
