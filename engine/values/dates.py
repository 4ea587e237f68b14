"""Dates and times in a customer's words: ISO and numeric dates (day and month read both ways when
both fit), month names, dates relative to the agent's today, times of day, and both together.

Pure and deterministic: nothing here asks a model anything.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from engine.values.locale import locale_dates
from engine.values.runs import Reading, ReadingContext, Run, runs

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
