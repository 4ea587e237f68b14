"""Numbers in a customer's words: digit runs under either decimal mark, "2k", numbers in words
(English here, other languages by `engine.values.locale`) and the currency written next to them.

Pure and deterministic: nothing here asks a model anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from engine.values.locale import CURRENCY_WORDS
from engine.values.locale import number_words as locale_number_words
from engine.values.runs import GAPS, ReadingContext, Run, runs

_NUMBER_RUN = re.compile(rf"\d+(?:[.,'’{GAPS}]\d+)*")
_SCALED = re.compile(r"(\d+(?:[.,]\d+)?)([kK])")
_THOUSANDS = {".": frozenset({",", "'", "’"}), ",": frozenset({".", "'", "’"})}


def number_values(
    token: str, marks: frozenset[str], spaced: bool = False
) -> tuple[set[Decimal], bool]:
    """The values a digit token can mean under the decimal marks people use (a dot or a comma),
    and whether the reading is settled: one value, written in one of `marks`' conventions, and
    not grouped by spaces (a gap between digits may split two numbers) unless `spaced` (the
    customer's language groups thousands with a space)."""
    seps = re.findall(rf"[.,'’{GAPS}]", token)
    groups = re.split(rf"[.,'’{GAPS}]", token)
    if not seps:
        return {Decimal(token)}, True
    values: dict[Decimal, set[str]] = {}
    for mark in (".", ","):
        for value in _under(mark, seps, groups):
            values.setdefault(value, set()).add(mark)
    # A gap between digits may split two numbers — unless the customer's language groups
    # thousands with spaces (French "1 000,50").
    gapped = any(s in GAPS for s in seps) and not spaced
    settled = len(values) == 1 and not gapped and bool(next(iter(values.values())) & marks)
    return set(values), settled


def _under(mark: str, seps: list[str], groups: list[str]) -> Iterator[Decimal]:
    """The values of a token read with `mark` as the decimal mark (at most one, at the end)."""
    thousands = _THOUSANDS[mark] | set(GAPS)
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


def currency_near(text: str, start: int, end: int) -> tuple[str | None, int, int]:
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
        code, start, end = currency_near(text, run.start, run.end)
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
        code, start2, end2 = currency_near(text, start, end)
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
