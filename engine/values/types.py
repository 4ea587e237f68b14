"""The types a value can have — one vocabulary for tool parameters and collected fields.

| kind | what a tool receives | written by a model as |
|---|---|---|
| `str` | `str` (matching the declared `pattern`, if any) | the text |
| `enum` | `str`, one of the listed choices (a `Literal` or an `Enum` in Python) | a listed choice |
| `int` | `int` | `3` |
| `decimal` | `Decimal` (`float` when the function says `float`) | `12.50` |
| `bool` | `bool` | `true` / `false` |
| `date` | `datetime.date` | `2026-12-12` |
| `datetime` | `datetime.datetime` | `2026-12-12T15:00` |
| `time` | `datetime.time` | `15:00` |
| `money` | `engine.values.Money` | `40.00 USD` |
| a list of any of these | `list` | a JSON array |

A value that does not read as its type never reaches a tool: `coerce` raises `ValueError` saying
what is wrong, and the engine asks the customer again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from engine.values.money import Money

ValueKind = Literal["str", "enum", "int", "decimal", "bool", "date", "datetime", "time", "money"]

# What a type is called where an author or a model reads it.
KIND_FORMATS: dict[str, str] = {
    "str": "text",
    "enum": "one of the listed choices",
    "int": "a whole number, digits only (3)",
    "decimal": "a plain number with a dot for decimals, no grouping (1234.50)",
    "bool": "true or false",
    "date": "a date, YYYY-MM-DD",
    "datetime": "a date and time, YYYY-MM-DDTHH:MM",
    "time": "a time of day, HH:MM (24-hour)",
    "money": "an amount and its ISO currency code (40.00 USD)",
}


@dataclass(frozen=True)
class ValueShape:
    """What one parameter or field holds: its kind, and what narrows it."""

    kind: ValueKind = "str"
    choices: tuple[str, ...] = ()  # enum
    pattern: str | None = None  # str: the whole value must match it (an account id's shape)
    currency: str | None = None  # money: the currency when the customer names none
    many: bool = False  # a list of values of `kind`

    def describe(self) -> str:
        """How a model must write a value of this shape."""
        one = KIND_FORMATS[self.kind]
        if self.kind == "enum":
            one = f"one of {list(self.choices)}"
        elif self.kind == "str" and self.pattern:
            one = f"text matching /{self.pattern}/"
        elif self.kind == "money" and self.currency:
            one += f"; {self.currency} unless the customer names another currency"
        return f"a JSON array, each item {one}" if self.many else one


def currency_code(value: str | None) -> str | None:
    """A declared currency as its ISO code ("usd" → "USD"); raises ValueError for anything else."""
    if value is None:
        return None
    code = value.strip().upper()
    if not re.fullmatch(r"[A-Z]{3}", code):
        raise ValueError(f"{value!r} is not a currency code (three letters, e.g. USD)")
    return code


def compiled_pattern(value: str | None) -> str | None:
    """A declared pattern, checked to be a regular expression; raises ValueError otherwise."""
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from None
    return value


def coerce(shape: ValueShape, raw: Any) -> Any:
    """The typed value of `raw` for `shape`; raises ValueError saying what is wrong."""
    if shape.many:
        items = _as_list(raw)
        if not items:
            raise ValueError("is an empty list")
        single = ValueShape(shape.kind, shape.choices, shape.pattern, shape.currency)
        return [coerce(single, item) for item in items]
    if raw is None:
        raise ValueError("has no value")
    reader = _READERS[shape.kind]
    return reader(shape, raw)


def _as_list(raw: Any) -> list[Any]:
    if isinstance(raw, list | tuple):
        return list(raw)
    text = str(raw).strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError("is not a JSON array") from None
        if isinstance(parsed, list):
            return parsed
    raise ValueError("is not a list (write a JSON array)")


def _text(shape: ValueShape, raw: Any) -> str:
    if isinstance(raw, Mapping | list | tuple | bool):
        raise ValueError("is not text")
    text = str(raw).strip()
    if not text:
        raise ValueError("is empty")
    if shape.pattern and not re.fullmatch(shape.pattern, text):
        # An id written with separators ("1234 324", "1234-324") is the id without them.
        bare = _ID_SEPARATORS.sub("", text)
        if not re.fullmatch(shape.pattern, bare):
            raise ValueError("does not have the shape this value has")
        return bare
    return text


_ID_SEPARATORS = re.compile(r"[-_/.,'’\s]")


def _choice(shape: ValueShape, raw: Any) -> str:
    text = str(getattr(raw, "value", raw)).strip()
    for choice in shape.choices:
        if choice.casefold() == text.casefold():
            return choice
    raise ValueError(f"must be one of: {', '.join(shape.choices)}")


_PLAIN = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


def read_plain_number(raw: Any) -> Decimal:
    """A number as a model or a program writes it: 1234.50, 1,234.50 (comma thousands only with
    groups of three), a leading currency sign tolerated. Raises ValueError otherwise."""
    if isinstance(raw, bool):
        raise ValueError("is not a number")
    if isinstance(raw, int | Decimal):
        number = Decimal(raw)
    elif isinstance(raw, float):
        number = Decimal(str(raw))
    elif isinstance(raw, Money):
        raise ValueError("is an amount of money, not a plain number")
    else:
        text = str(raw).strip().strip("$€£¥₹").replace(" ", "")
        if _GROUPED.fullmatch(text):
            text = text.replace(",", "")
        if not _PLAIN.fullmatch(text):
            if re.fullmatch(r"[+-]?[\d.,']+", text):
                raise ValueError("is not an unambiguous number")  # "1,5": 1.5 or 15?
            raise ValueError("is not a number")
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise ValueError("is not a number") from None
    if not number.is_finite():
        raise ValueError("is not a number")
    return number


def _integer(shape: ValueShape, raw: Any) -> int:
    number = read_plain_number(raw)
    if number != number.to_integral_value():
        raise ValueError("must be a whole number")
    return int(number)


def _decimal(shape: ValueShape, raw: Any) -> Decimal:
    return read_plain_number(raw)


_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0"})


def _boolean(shape: ValueShape, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().casefold()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("must be yes or no")


def _date(shape: ValueShape, raw: Any) -> date:
    if isinstance(raw, datetime):
        return raw.date()
    if isinstance(raw, date):
        return raw
    try:
        return date.fromisoformat(str(raw).strip())
    except ValueError:
        raise ValueError("must be a date written YYYY-MM-DD") from None


def _datetime(shape: ValueShape, raw: Any) -> datetime:
    if isinstance(raw, datetime):
        return raw
    text = str(raw).strip()
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("must be a date and time written YYYY-MM-DDTHH:MM") from None
    if "T" not in text and " " not in text:
        raise ValueError("must be a date and time written YYYY-MM-DDTHH:MM")
    return value


def _time(shape: ValueShape, raw: Any) -> time:
    if isinstance(raw, time):
        return raw
    text = str(raw).strip()
    if not re.fullmatch(r"([01]?\d|2[0-3]):[0-5]\d(:[0-5]\d)?", text):
        raise ValueError("must be a time written HH:MM")
    parts = [int(p) for p in text.split(":")] + [0]
    return time(parts[0], parts[1], parts[2])


def _money(shape: ValueShape, raw: Any) -> Money:
    if isinstance(raw, Money):
        return raw
    if isinstance(raw, Mapping):
        try:
            return Money.model_validate(dict(raw))
        except Exception as exc:
            raise ValueError(f"is not an amount with a currency ({exc})") from None
    text = str(raw).strip()
    try:
        return Money.model_validate(text)
    except Exception:  # not "40.00 USD": a bare amount takes the declared currency
        pass
    try:
        amount = read_plain_number(text)
    except ValueError:
        raise ValueError("is not an amount with a currency, e.g. '40.00 USD'") from None
    if shape.currency is None:
        raise ValueError("has no currency (write it as '40.00 USD')")
    return Money(amount=amount, currency=shape.currency)


_READERS = {
    "str": _text,
    "enum": _choice,
    "int": _integer,
    "decimal": _decimal,
    "bool": _boolean,
    "date": _date,
    "datetime": _datetime,
    "time": _time,
    "money": _money,
}


def show(value: Any) -> str:
    """A typed value as the customer is shown it to confirm: unambiguous, whatever the locale —
    numbers without grouping ("1000.50"), dates in ISO form, money with its currency code."""
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return format(Decimal(str(value)), "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="minutes")
    if isinstance(value, date | time):
        return value.isoformat() if isinstance(value, date) else value.strftime("%H:%M")
    return str(value)


def written(value: Any) -> str:
    """A typed value as events and traces record it: a time as "15:30", a date in ISO form,
    money as "40.00 USD", anything else as its text."""
    if isinstance(value, time | datetime):
        return show(value)
    return str(value)


def canonical(value: Any) -> str:
    """One spelling per value, for comparing what was agreed with what is about to run:
    40, 40.0 and Decimal("40.00") agree; Money by amount and currency."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, Money):
        return f"{_number_text(value.amount)} {value.currency}"
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return _number_text(Decimal(str(value)))
    if isinstance(value, date | time):
        return value.isoformat()
    return str(value)


def _number_text(number: Decimal) -> str:
    text = format(number.normalize(), "f")
    return "0" if text in ("-0", "0") else text
