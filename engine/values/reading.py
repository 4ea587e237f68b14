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
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.values.locale import CURRENCY_WORDS, decimal_mark, groups_with_spaces, locale_dates
from engine.values.locale import number_words as locale_number_words
from engine.values.money import Money
from engine.values.types import ValueShape


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
_GAPS = " \u00a0\u202f\u2009"
_JOIN = rf"(?:(?<=[0-9])[.,'’{_GAPS}](?=[0-9])|[-_/:](?=[{_ALNUM}]))"
_RUN = re.compile(rf"(?<![{_ALNUM}])[{_ALNUM}]+(?:{_JOIN}[{_ALNUM}]+)*")


@dataclass(frozen=True)
class Run:
    start: int
    end: int
    text: str

    @property
    def has_digit(self) -> bool:
        return any(c.isdigit() for c in self.text)


def runs(text: str) -> list[Run]:
    """The runs of a (normalized) text, in order."""
    return [Run(m.start(), m.end(), m.group()) for m in _RUN.finditer(text)]


# -- numbers ---------------------------------------------------------------------------------------

_NUMBER_RUN = re.compile(rf"\d+(?:[.,'’{_GAPS}]\d+)*")
_SCALED = re.compile(r"(\d+(?:[.,]\d+)?)([kK])")
_THOUSANDS = {".": frozenset({",", "'", "’"}), ",": frozenset({".", "'", "’"})}


def number_values(
    token: str, marks: frozenset[str], spaced: bool = False
) -> tuple[set[Decimal], bool]:
    """The values a digit token can mean under the decimal marks people use (a dot or a comma),
    and whether the reading is settled: one value, written in one of `marks`' conventions, and
    not grouped by spaces (a gap between digits may split two numbers) unless `spaced` (the
    customer's language groups thousands with a space)."""
    seps = re.findall(rf"[.,'’{_GAPS}]", token)
    groups = re.split(rf"[.,'’{_GAPS}]", token)
    if not seps:
        return {Decimal(token)}, True
    values: dict[Decimal, set[str]] = {}
    for mark in (".", ","):
        for value in _under(mark, seps, groups):
            values.setdefault(value, set()).add(mark)
    # A gap between digits may split two numbers — unless the customer's language groups
    # thousands with spaces (French "1 000,50").
    gapped = any(s in _GAPS for s in seps) and not spaced
    settled = len(values) == 1 and not gapped and bool(next(iter(values.values())) & marks)
    return set(values), settled


def _under(mark: str, seps: list[str], groups: list[str]) -> Iterator[Decimal]:
    """The values of a token read with `mark` as the decimal mark (at most one, at the end)."""
    thousands = _THOUSANDS[mark] | set(_GAPS)
    integral_seps, fraction = seps, None
    if seps[-1] == mark:
        integral_seps, fraction = seps[:-1], groups[-1]
        groups = groups[:-1]
    if integral_seps and (
        len(set(integral_seps)) != 1
        or integral_seps[0] not in thousands
        or not 1 <= len(groups[0]) <= 3
        or any(len(g) != 3 for g in groups[1:])
    ):
        return
    text = "".join(groups) + (f".{fraction}" if fraction is not None else "")
    try:
        yield Decimal(text)
    except InvalidOperation:  # pragma: no cover - digits only
        return


_SYMBOLS = {"$": "$", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "¥", "₹": "INR", "R$": "BRL"}
_DOLLARS = frozenset({"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN", "TWD"})
_CODES = frozenset(
    {"USD", "EUR", "GBP", "JPY", "CNY", "RMB", "INR", "BRL", "CAD", "AUD", "NZD", "CHF", "SEK",
     "NOK", "DKK", "PLN", "CZK", "HUF", "MXN", "SGD", "HKD", "TWD", "KRW", "ZAR", "TRY"}
)  # fmt: skip
_CURRENCY_WORDS = {
    "buck": "$", "bucks": "$", "usd": "USD", "pound": "GBP", "pounds": "GBP", "quid": "GBP",
    "yen": "JPY", "yuan": "CNY", "rmb": "CNY", **CURRENCY_WORDS,
}  # fmt: skip
_BEFORE = re.compile(r"(US\$|R\$|[$€£¥₹]|\b[A-Z]{3})\s?$")
_LATIN_WORDS = sorted((w for w in _CURRENCY_WORDS if w.isascii() or (w.isalpha() and w.islower())),
                      key=len, reverse=True)  # fmt: skip
_HAN_WORDS = sorted((w for w in _CURRENCY_WORDS if not w.isascii() and not w.islower()),
                    key=len, reverse=True)  # fmt: skip
_AFTER = re.compile(
    r"^\s?(?:(US\$|R\$|[$€£¥₹])|([A-Za-z]{3})\b|("
    + "|".join(re.escape(w) for w in _LATIN_WORDS)
    + r")\b|("
    + "|".join(re.escape(w) for w in _HAN_WORDS)
    + "))",
    re.IGNORECASE,
)


def _currency_near(text: str, start: int, end: int) -> tuple[str | None, int, int]:
    """The currency written right before or after a number, and the span including it."""
    before = _BEFORE.search(text[max(0, start - 4) : start])
    if before is not None:
        mark = before.group(1)
        code = _SYMBOLS.get(mark) or (mark if mark in _CODES else None)
        if code is not None:
            return code, start - len(before.group(0)), end
    after = _AFTER.match(text[end : end + 12])
    if after is not None:
        symbol, code, word, han = after.groups()
        found = (
            _SYMBOLS.get(symbol or "")
            or (code.upper() if code and code.upper() in _CODES else None)
            or _CURRENCY_WORDS.get((word or han or "").casefold())
        )
        if found is not None:
            return found, start, end + len(after.group(0))
    return None, start, end


def _resolve_currency(mark: str, default: str | None, language: str = "en") -> tuple[str, bool]:
    """An ISO code for a currency mark, and whether it is certain ("$" is the agent's dollar
    when its currency is one; "¥" is yen or yuan: the agent's, else the customer's language's)."""
    if mark == "$":
        return (default, True) if default in _DOLLARS else ("USD", True)
    if mark == "¥":
        if default in ("JPY", "CNY"):
            return default or "JPY", True
        if language.startswith("zh"):
            return "CNY", True
        return ("JPY", True) if language == "ja" else ("JPY", False)
    if mark == "RMB":
        return "CNY", True
    return mark, True


_CJK_MULTIPLIERS = set("十百千万萬亿億")


def _glued_to_cjk_numeral(text: str, run: Run) -> bool:
    after = text[run.end : run.end + 1]
    return bool(after) and after in _CJK_MULTIPLIERS


@dataclass(frozen=True)
class NumberRead:
    values: tuple[Decimal, ...]
    start: int
    end: int
    exact: bool
    currency: str | None  # an ISO code written next to it
    currency_sure: bool
    bare_long: bool  # six digits or more, no currency, no separator: an id more likely
    how: str


def numbers(
    text: str, ctx: ReadingContext, default_currency: str | None = None
) -> list[NumberRead]:
    """Every number of a normalized text, from whole runs and from words."""
    found: list[NumberRead] = []
    for run in runs(text):
        token, scale, how = run.text, Decimal(1), ""
        scaled = _SCALED.fullmatch(token)
        if scaled:
            token, scale, how = scaled.group(1), Decimal(1000), "2k read as 2000"
        elif not _NUMBER_RUN.fullmatch(token):
            continue
        if _glued_to_cjk_numeral(text, run):
            continue  # "2万" is 20000, read whole by engine.values.locale
        values, settled = number_values(token, ctx.decimal_marks, ctx.spaced_groups)
        if not values:
            continue
        if len(values) > 1:
            how = how or f"{token!r} means one number with a dot and another with a comma"
        elif not settled:
            how = how or f"{token!r} is written in another convention or spaced"
        code, start, end = _currency_near(text, run.start, run.end)
        sure = True
        if code is not None:
            code, sure = _resolve_currency(code, default_currency, ctx.language)
        bare_long = code is None and token.isdigit() and len(token) >= 6
        if bare_long:
            how = how or f"{token!r} reads like an account or phone number, not an amount"
        found.append(
            NumberRead(
                tuple(v * scale for v in sorted(values)),
                start,
                end,
                exact=settled and scale == 1 and not bare_long,
                currency=code,
                currency_sure=sure,
                bare_long=bare_long,
                how=how,
            )
        )
    said = [(s, e, n, True) for s, e, n in number_words(text)]
    for language in ctx.word_languages:
        taken = {(s, e) for s, e, *_ in said}
        said += [w for w in locale_number_words(text, language) if (w[0], w[1]) not in taken]
    for start, end, number, strong in said:
        code, start2, end2 = _currency_near(text, start, end)
        sure = True
        if code is not None:
            code, sure = _resolve_currency(code, default_currency, ctx.language)
        how = "a number in words"
        found.append(NumberRead((number,), start2, end2, False, code, sure, not strong, how))
    return found


_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "dozen": 12,
}  # fmt: skip
# "the large one", "which one", "one of them": a pronoun, not a number.
_PRONOUN_ONE = re.compile(
    r"\b(?:the|this|that|which|each|every|no|any|a|an|another|other)\s+(?:[a-z]+\s+)?one\b"
    r"|\bone\s+(?:of|another)\b",
    re.IGNORECASE,
)
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


def number_words(text: str) -> list[tuple[int, int, Decimal]]:
    """Numbers written in (English) words — "forty", "two hundred fifty" — with their spans."""
    found: list[tuple[int, int, Decimal]] = []
    tokens = list(re.finditer(r"[A-Za-z]+", text))
    i = 0
    while i < len(tokens):
        total, current, start, end, j = 0, 0, None, None, i
        while j < len(tokens):
            word = tokens[j].group().lower()
            if word in _WORDS and not (word == "one" and _pronoun(text, tokens[j])):
                current += _WORDS[word]
            elif word in _SCALES and start is not None:
                current = max(current, 1) * _SCALES[word]
                if _SCALES[word] >= 1000:
                    total, current = total + current, 0
            elif word == "and" and start is not None:
                j += 1
                continue
            else:
                break
            start = tokens[j].start() if start is None else start
            end = tokens[j].end()
            j += 1
        if start is not None and end is not None:
            found.append((start, end, Decimal(total + current)))
            i = j
        else:
            i += 1
    return found


def _pronoun(text: str, token: re.Match[str]) -> bool:
    return any(m.start() <= token.start() < m.end() for m in _PRONOUN_ONE.finditer(text))


# -- dates and times -------------------------------------------------------------------------------

_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"),
            ("may",), ("jun", "june"), ("jul", "july"), ("aug", "august"),
            ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
            ("dec", "december"),
        ],
        start=1,
    )
    for m in names
}  # fmt: skip
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(rf"\b{_ORD}\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(?:the\s+)?{_ORD}(?:,?\s+(\d{{4}}))?\b", re.IGNORECASE)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\b(?:(the\s+day\s+after\s+tomorrow)|(today|tonight)|(tomorrow)|(yesterday)|"
    r"(?:(next|this|on|coming)\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"in\s+(\d{1,3}|a|one|two|three|four|five|six|seven)\s+(days?|weeks?))\b",
    re.IGNORECASE,
)
_SMALL = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def dates(text: str, ctx: ReadingContext) -> list[Reading]:
    """Dates: ISO and numeric (day and month read both ways when both fit), with month names,
    and relative to the agent's today ("tomorrow", "next Friday", "in 3 days")."""
    found: list[Reading] = []
    for run in runs(text):
        found.extend(_numeric_dates(run))
    for m in _DAY_MONTH.finditer(text):
        found.extend(_named_date(m, int(m[1]), m[2], m[3], ctx))
    for m in _MONTH_DAY.finditer(text):
        found.extend(_named_date(m, int(m[2]), m[1], m[3], ctx))
    if ctx.today is not None:
        found.extend(_relative_dates(text, ctx.today))
    for language in ctx.word_languages:
        for start, end, day, exact, how in locale_dates(text, language, ctx.today):
            if not any(r.span == (start, end) and r.value == day for r in found):
                found.append(Reading(day, start, end, exact, how=how))
    return found


def _numeric_dates(run: Run) -> list[Reading]:
    iso = re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", run.text)
    try:
        if iso:
            return [Reading(date(int(iso[1]), int(iso[2]), int(iso[3])), run.start, run.end, True)]
    except ValueError:
        return []
    m = re.fullmatch(r"(\d{1,2})([/.\-])(\d{1,2})\2(\d{4})", run.text)
    if not m:
        return []
    a, b, year = int(m[1]), int(m[3]), int(m[4])
    options = set()
    for day, month in ((a, b), (b, a)):
        try:
            options.add(date(year, month, day))
        except ValueError:
            continue
    exact = len(options) == 1
    how = "" if exact else "day and month could be either way round"
    return [Reading(d, run.start, run.end, exact, how=how) for d in sorted(options)]


def _named_date(
    m: re.Match[str], day: int, month_name: str, year: str | None, ctx: ReadingContext
) -> list[Reading]:
    month = _MONTHS.get(month_name.casefold().rstrip("."))
    if month is None:
        return []
    try:
        if year:
            return [Reading(date(int(year), month, day), m.start(), m.end(), True)]
        if ctx.today is None:
            return []
        candidate = date(ctx.today.year, month, day)
        if candidate < ctx.today:
            candidate = date(ctx.today.year + 1, month, day)
    except ValueError:
        return []
    return [Reading(candidate, m.start(), m.end(), False, how="the year was not said")]


def _relative_dates(text: str, today: date) -> list[Reading]:
    found = []
    for m in _RELATIVE.finditer(text):
        after_tomorrow, now, tomorrow, yesterday, qualifier, weekday, count, unit = m.groups()
        qualifier = (qualifier or "").casefold()
        if after_tomorrow:
            day = today + timedelta(days=2)
        elif now:
            day = today
        elif tomorrow:
            day = today + timedelta(days=1)
        elif yesterday:
            day = today - timedelta(days=1)
        elif weekday:
            # "next Friday" is this week's or the week after's, and "Monday" said on a Monday
            # is today or in a week: both days are readings (each is confirmed anyway).
            ahead = (_WEEKDAYS.index(weekday.casefold()) - today.weekday()) % 7
            days = {ahead, ahead + 7} if ahead == 0 or qualifier == "next" else {ahead}
            for n in sorted(days):
                found.append(_relative(m, today + timedelta(days=n), today))
            continue
        else:
            n = int(count) if count.isdigit() else _SMALL[count.casefold()]
            day = today + timedelta(days=n * (7 if unit.casefold().startswith("week") else 1))
        found.append(_relative(m, day, today))
    return found


def _relative(m: re.Match[str], day: date, today: date) -> Reading:
    return Reading(day, m.start(), m.end(), False, how=f"{m.group()!r} counted from {today}")


_CLOCK = re.compile(
    r"(?<![\w.:])(?P<h>[01]?\d|2[0-3])(?:[:.](?P<m>[0-5]\d))?\s?(?P<ampm>[ap]\.?m\b\.?)?(?![\w:])",
    re.IGNORECASE,
)


def clock_times(text: str) -> list[tuple[str, int, int]]:
    """Times of day in `text` as (HH:MM, start, end): "15:00", "15.30", "3pm", "3:30 p.m.".
    A bare number is no time (it needs minutes or am/pm), and "13pm" or "0am" is none."""
    found = []
    for m in _CLOCK.finditer(text):
        hour, minutes, ampm = int(m["h"]), m["m"], (m["ampm"] or "").casefold()
        if minutes is None and not ampm:
            continue
        if ampm:
            if not 1 <= hour <= 12:
                continue
            hour = hour % 12 + (12 if ampm.startswith("p") else 0)
        found.append((f"{hour:02d}:{minutes or '00'}", m.start(), m.end()))
    return found


def times(text: str) -> list[Reading]:
    out = []
    for clock, start, end in clock_times(text):
        hour, minute = (int(p) for p in clock.split(":"))
        out.append(Reading(time(hour, minute), start, end, True))
    for m in re.finditer(r"\b(noon|midday|midnight)\b", text, re.IGNORECASE):
        value = time(0, 0) if m.group().casefold() == "midnight" else time(12, 0)
        out.append(Reading(value, m.start(), m.end(), False, how=f"{m.group()!r} as a time"))
    return out


def datetimes(text: str, ctx: ReadingContext) -> list[Reading]:
    """A date and a time of day said in the same message (or one ISO run)."""
    out = []
    for run in runs(text):
        if "T" in run.text or ":" in run.text:
            try:
                value = datetime.fromisoformat(run.text)
            except ValueError:
                continue
            if "T" in run.text:
                out.append(Reading(value.replace(tzinfo=None), run.start, run.end, True))
    for d in dates(text, ctx):
        for t in times(text):
            out.append(
                Reading(
                    datetime.combine(d.value, t.value),
                    min(d.start, t.start),
                    max(d.end, t.end),
                    d.exact and t.exact,
                    how=d.how or t.how,
                )
            )
    return out


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


_ID_SEPARATORS = re.compile(rf"[-_/.,'’{_GAPS}]")


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
        if not run.has_digit or _currency_near(text, run.start, run.end)[0] is not None:
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
