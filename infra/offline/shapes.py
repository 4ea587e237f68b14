"""Values recognised by their shape, in any domain: numbers (in digits, with a currency, or in
words), dates, e-mail addresses, phone numbers, times of day, weekdays — and the tokens of a
message they are read from. Used by `infra.offline.values`; nothing here knows what a field is
for."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from engine.values.dates import clock_times as engine_clock_times
from infra.offline.language import word_set

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
# Longer than any number written in words ("nine hundred and ninety nine million nine hundred and
# ninety nine thousand nine hundred and ninety nine" is 17 words): a phrase is read from at most
# this many words, so a message of number words costs time in proportion to its length.
MAX_NUMBER_PHRASE_WORDS = 24
_WEEKDAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?:s)?\b", re.I)

_CURRENCY_WORDS = word_set("dollar dollars usd euro euros eur pound pounds gbp bucks yen cents")
_NUMBER = re.compile(
    r"^(?P<sign>-)?(?P<pre>[$€£¥])?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<k>k)?(?P<post>[$€£¥]|usd|eur|gbp)?$",
    re.I,
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ],
        start=1,
    )
    for m in names
}
_MONTH_FIRST = re.compile(r"\b([a-z]{3,9})\.? (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})\b", re.I)
_DAY_FIRST = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?([a-z]{3,9})\.?,? (\d{4})\b", re.I)
# Tried only where a run of address characters starts: from inside a run it would find the same
# address, and a long run with no "@" would be scanned again from each of its characters.
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+")
PHONE = re.compile(r"\+?\d[\d\s().-]{6,}\d")


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
    engine's own reading (`engine.values.dates.clock_times`), so a time stored as 15:00 is grounded
    in the "3pm" the customer wrote."""
    return [(value, text[start:end]) for value, start, end in engine_clock_times(text)]


def weekdays(text: str) -> list[str]:
    """The weekdays named in `text`, capitalised, each once, in order."""
    return list(dict.fromkeys(d.capitalize() for d in (w.lower() for w in _WEEKDAY.findall(text))))


@dataclass(frozen=True)
class Token:
    """A word of a message as written (`raw`) and without its punctuation (`clean`)."""

    index: int
    raw: str
    clean: str

    @property
    def lower(self) -> str:
        return self.clean.lower()


@dataclass(frozen=True)
class WrittenNumber:
    """A number in a message: its value as digits, whether a currency goes with it, whether it
    has a fraction."""

    token: Token
    value: str
    currency: bool
    fraction: bool
    word: bool = False  # written in words: read only as a count ("two pizzas")

    @property
    def digits(self) -> int:
        return len(re.sub(r"\D", "", self.value.split(".")[0]))


def tokenize(text: str) -> list[Token]:
    """The whitespace-separated words of `text`, each with its position."""
    raw = text.split()
    return [Token(i, r, r.strip(".,;:!?()[]{}\"'")) for i, r in enumerate(raw)]


def written_numbers(tokens: Sequence[Token], masked: set[int]) -> list[WrittenNumber]:
    """The numbers among `tokens` — in digits ("$1,200", "3k", "200 dollars") or in words ("three
    hundred", a count like "two") — skipping the `masked` positions."""
    found = []
    skip_to = 0
    for i, token in enumerate(tokens):
        if i in masked or i < skip_to:
            continue
        m = _NUMBER.match(token.clean)
        if not m:
            window = tokens[i : i + MAX_NUMBER_PHRASE_WORDS]
            free = [t.lower for t in itertools.takewhile(lambda t: t.index not in masked, window)]
            value_in_words, span = number_phrase(free)
            if span:  # "three hundred": unambiguous, a number like any written in digits
                skip_to = i + span
                following = tokens[i + span].lower if i + span < len(tokens) else ""
                currency = following in _CURRENCY_WORDS
                found.append(WrittenNumber(token, str(value_in_words), currency, False))
                continue
            if token.lower in SMALL_NUMBER_WORDS:  # "two pizzas": a count written as a word
                value = str(SMALL_NUMBER_WORDS.index(token.lower))
                found.append(WrittenNumber(token, value, False, False, word=True))
            continue
        value = m["num"].replace(",", "")
        if m["k"]:
            value = str(int(float(value) * 1000))
        if m["sign"]:
            value = f"-{value}"  # kept, so that validation can say why it is refused
        following = tokens[i + 1].lower if i + 1 < len(tokens) else ""
        currency = bool(m["pre"] or m["post"]) or following in _CURRENCY_WORDS
        found.append(WrittenNumber(token, value, currency, "." in value))
    return found


def iso_dates(text: str) -> list[str]:
    """The dates written in `text` ("2024-05-01", "May 1st, 2024", "1 May 2024"), as ISO dates."""
    found = [f"{y}-{m}-{d}" for y, m, d in _ISO_DATE.findall(text)]
    for month, day, year in _MONTH_FIRST.findall(text):
        if month.lower() in MONTHS:
            found.append(_iso(int(year), MONTHS[month.lower()], int(day)))
    for day, month, year in _DAY_FIRST.findall(text):
        if month.lower() in MONTHS:
            found.append(_iso(int(year), MONTHS[month.lower()], int(day)))
    return [d for d in found if d]


def _iso(year: int, month: int, day: int) -> str:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return ""
