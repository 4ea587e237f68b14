"""Grounded tool arguments: every value a tool runs on is traced to where it came from.

A value is grounded when it can be found, after normalisation, in the evidence of this session:

- the customer's own messages (numbers and amounts with currency signs before or after them or
  currency words, ids with or without separators, dates — the day also as an ordinal, "12th of
  December 2026" —, enum labels, any text — case and whitespace ignored); normalising makes
  the customer's words equal to the value exactly or not at all, never a near value;
- a successful tool result or a context variable of the same name as the parameter;
- the authenticated principal (a field of the same name);
- a value of the same name the customer picked from offered options or submitted in a form;
- for a parameter declared `composed` on a non-consequential tool, the model itself.

Grounding is *direct* when the value appears as is (after normalisation) and *inferred* when it
had to be derived: a number written in words, a unique prefix of an enum label, a long bare digit
string read as an amount (or an amount read as an id), two arguments drawn from one phrase.
Nothing here asks a model anything: a hostile model cannot make an ungrounded value pass.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.model import CollectedField
from engine.session import Event
from engine.tool_spec import ToolParameter, ToolSpec


@dataclass(frozen=True)
class CustomerMessage:
    """One message of the customer whose turn this is: its position and its text."""

    number: int  # the event offset, shown to people as "message #n"
    text: str

    @classmethod
    def of(cls, event: Event) -> CustomerMessage:
        """A customer message event as grounding reads it. A button press is stored with its
        option's id as its text (`engine.turn`); an id is not words — its meaning is the pick
        itself (a collected value with its origin) — so option "3" never grounds a 3."""
        choice = event.data.get("choice")
        pressed = choice is not None and (event.text or "") == str(choice)
        return cls(event.offset, "" if pressed else event.text or "")


@dataclass(frozen=True)
class Evidence:
    """What a tool argument may be traced to, in this session, for this sender."""

    customer_messages: Sequence[CustomerMessage] = ()
    # parameter name → (tool, value) of successful results that returned a field of that name
    tool_values: Mapping[str, Sequence[tuple[str, Any]]] = field(default_factory=dict)
    variables: Mapping[str, Any] = field(default_factory=dict)
    principal: Mapping[str, Any] | None = None
    # value name → (origin, value) of the customer's picks and form results, latest last
    picks: Mapping[str, Sequence[tuple[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Grounding:
    """Where one argument's value came from."""

    parameter: str
    source: str  # "customer message #7: '$40'", "tool lookup_account_id", "principal", …
    direct: bool
    span: tuple[int, int, int] | None = None  # (message, start, end) of a customer phrase

    def describe(self) -> str:
        kind = "" if self.direct else " (inferred)"
        return f"{self.parameter} ← {self.source}{kind}"


@dataclass(frozen=True)
class CallGrounding:
    """The grounding of every argument of one call; `ungrounded` names what must be asked."""

    groundings: tuple[Grounding, ...]
    ungrounded: tuple[str, ...]

    @property
    def inferred(self) -> tuple[str, ...]:
        return tuple(g.parameter for g in self.groundings if not g.direct)

    def describe(self) -> list[str]:
        return [g.describe() for g in self.groundings] + [
            f"{name} ← nothing the customer said (ungrounded)" for name in self.ungrounded
        ]


def ground_call(spec: ToolSpec, arguments: Mapping[str, Any], evidence: Evidence) -> CallGrounding:
    """Ground every argument of a call to `spec` (arguments already validated and coerced)."""
    found: list[Grounding] = []
    missing: list[str] = []
    for param in spec.parameters:
        if param.name not in arguments:
            continue
        grounding = ground_argument(spec, param, arguments[param.name], evidence)
        if grounding is None:
            missing.append(param.name)
        else:
            found.append(grounding)
    # Two arguments of a consequential call read from one phrase of the customer: the model
    # chose how to split it, so the customer must see the values.
    if spec.consequential:
        by_span: dict[tuple[int, int, int], int] = {}
        for g in found:
            if g.span is not None:
                by_span[g.span] = by_span.get(g.span, 0) + 1
        found = [
            Grounding(g.parameter, g.source, False, g.span)
            if g.span is not None and by_span[g.span] > 1
            else g
            for g in found
        ]
    return CallGrounding(tuple(found), tuple(missing))


def ground_argument(
    spec: ToolSpec, param: ToolParameter, value: Any, evidence: Evidence
) -> Grounding | None:
    """Where `value` of `param` comes from, or None when nothing in the evidence supports it."""
    name = param.name
    principal = evidence.principal or {}
    if name in principal and same_value(principal[name], value):
        return Grounding(name, "the authenticated principal", True)
    for origin, picked in reversed(evidence.picks.get(name, ())):
        if same_value(picked, value):
            return Grounding(name, origin, True)  # the customer chose exactly this value
    for tool_name, result_value in evidence.tool_values.get(name, ()):
        if same_value(result_value, value):
            return Grounding(name, f"tool {tool_name}", True)
    if name in evidence.variables and same_value(evidence.variables[name], value):
        return Grounding(name, f"context variable {name}", True)
    if param.default is not None and same_value(param.default, value):
        return Grounding(name, "the parameter's default", True)
    from_customer = _in_customer_messages(param, value, evidence.customer_messages)
    if from_customer is not None:
        return from_customer
    if param.composed and not spec.consequential:
        return Grounding(name, "composed by the model (declared composed)", True)
    return None


_FIELD_TYPES = {"int": "integer", "decimal": "number", "bool": "boolean"}


def ground_collected(
    fld: CollectedField, value: Any, messages: Sequence[CustomerMessage]
) -> Grounding | None:
    """Where the customer said `value` for `fld`, or None. Used for a value given ahead of its
    step: nothing but the customer's own words can fill a step the journey has not reached (a
    yes/no is never read off free text, so a `bool` field is never filled ahead)."""
    param = ToolParameter(
        name=fld.name,
        type=_FIELD_TYPES.get(fld.type, "string"),
        enum=fld.choices,
    )
    return _in_customer_messages(param, value, messages)


# -- values in the customer's words ----------------------------------------------------------------

_NUMBER = re.compile(
    r"(?P<cur>[$€£¥₹])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<k>\s?[kK]\b)?(?:\s?(?P<word>dollars?|usd|eur|euros?|pounds?|gbp|bucks)|(?P<sign>[$€£¥₹]))?",
    re.IGNORECASE,
)
_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_ID_SEPARATORS = re.compile(r"[\s\-./_]")
_ID_GAP = re.compile(r"[\s\-./]+")
_SPACE = re.compile(r"\s+")


def _in_customer_messages(
    param: ToolParameter, value: Any, messages: Sequence[CustomerMessage]
) -> Grounding | None:
    # Latest first: the customer's most recent words are the best evidence.
    for message in reversed(messages):
        found = _in_text(param, value, message.text)
        if found is not None:
            direct, start, end = found
            phrase = message.text[start:end].strip()
            return Grounding(
                param.name,
                f"customer message #{message.number}: {phrase!r}",
                direct,
                (message.number, start, end),
            )
    return None


def _in_text(param: ToolParameter, value: Any, text: str) -> tuple[bool, int, int] | None:
    if isinstance(value, bool):
        return None  # a yes/no argument is never read off free text; it needs a tool or a step
    if param.type in ("number", "integer") or isinstance(value, int | float | Decimal):
        return _number_in_text(_decimal(value), text)
    if isinstance(value, list | tuple):
        spans = [_in_text(param, item, text) for item in value]
        if not spans or any(s is None for s in spans):
            return None
        direct = all(s[0] for s in spans if s is not None)
        return direct, min(s[1] for s in spans if s), max(s[2] for s in spans if s)
    if isinstance(value, Mapping):
        return None
    return _text_in_text(param, str(value), text)


def _decimal(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value).replace(",", "").strip())
    except (InvalidOperation, ValueError):
        return None


def _number_in_text(wanted: Decimal | None, text: str) -> tuple[bool, int, int] | None:
    if wanted is None:
        return None
    for m in _NUMBER.finditer(text):
        number = Decimal(m.group("num").replace(",", ""))
        if m.group("k"):
            if number * 1000 == wanted:
                return False, m.start(), m.end()  # "2k": a conversion, shown back to confirm
            continue
        if number != wanted:
            continue
        money = bool(m.group("cur") or m.group("word") or m.group("sign"))  # "$500", "500$"
        bare_digits = m.group("num").isdigit() and len(m.group("num")) >= 6
        # A long bare digit string reads like an account or phone number, not an amount.
        return (money or not bare_digits), m.start(), m.end()
    for start, end, number in _number_words(text):
        if number == wanted:
            return False, start, end
    return None


def _number_words(text: str) -> list[tuple[int, int, Decimal]]:
    """Numbers written in words ("forty", "two hundred fifty"), with their spans."""
    found: list[tuple[int, int, Decimal]] = []
    tokens = list(re.finditer(r"[A-Za-z]+", text))
    i = 0
    while i < len(tokens):
        total, current, start, end, j = 0, 0, None, None, i
        while j < len(tokens):
            word = tokens[j].group().lower()
            if word in _WORDS:
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


def _text_in_text(param: ToolParameter, value: str, text: str) -> tuple[bool, int, int] | None:
    wanted = _SPACE.sub(" ", value.strip()).casefold()
    if not wanted:
        return None
    haystack = text.casefold()
    pattern = r"(?<!\w)" + re.escape(wanted).replace(r"\ ", r"\s+") + r"(?!\w)"
    m = re.search(pattern, haystack)
    if m is not None:
        return _money_shaped(text, m.start(), m.end()), m.start(), m.end()
    if any(ch.isdigit() for ch in wanted):
        # Ids are compared without separators: "1234-324" is "1234324".
        found = _id_in_text(_ID_SEPARATORS.sub("", wanted), haystack)
        if found is not None:
            return True, found[0], found[1]
    parsed = _date(wanted)
    if parsed is not None:
        tokens = list(re.finditer(r"[\w/.\-,]+", text))
        for i in range(len(tokens)):
            for last in tokens[i : i + 4]:  # "12th of December 2026": four tokens
                if _date(text[tokens[i].start() : last.end()]) == parsed:
                    return True, tokens[i].start(), last.end()
    if _CLOCK_VALUE.fullmatch(wanted):
        # A time of day in any common writing: "3pm", "3:30 pm", "15.00" for 15:00 / 15:30.
        for clock, start, end in clock_times(text):
            if clock == _clock_value(wanted):
                return True, start, end
    if param.enum:
        # A unique prefix of a label ("med" for "medium"): the model completed it.
        for m in re.finditer(r"\w{3,}", haystack):
            labels = [e for e in param.enum if e.casefold().startswith(m.group())]
            if len(labels) == 1 and labels[0].casefold() == wanted:
                return False, m.start(), m.end()
    return None


def _id_in_text(bare: str, haystack: str) -> tuple[int, int] | None:
    """A run of word tokens joined only by separators whose letters and digits spell `bare`."""
    tokens = list(re.finditer(r"\w+", haystack))
    for i in range(len(tokens)):
        joined = ""
        for j in range(i, min(i + 6, len(tokens))):
            if j > i and not _ID_GAP.fullmatch(haystack[tokens[j - 1].end() : tokens[j].start()]):
                break
            joined += tokens[j].group()
            if joined == bare:
                return tokens[i].start(), tokens[j].end()
            if not bare.startswith(joined):
                break
    return None


def _money_shaped(text: str, start: int, end: int) -> bool:
    """False when an id-like text value sits in an amount phrase ("$40" used as an account)."""
    before = text[max(0, start - 2) : start]
    after = text[end : end + 9].casefold()
    return not (
        any(c in before for c in "$€£¥₹")
        or re.match(r"\s?(dollars?|usd|eur|euros?|pounds?|bucks)\b", after) is not None
    )


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


_CLOCK = re.compile(
    r"(?<![\w.:])(?P<h>[01]?\d|2[0-3])(?:[:.](?P<m>[0-5]\d))?\s?(?P<ampm>[ap]\.?m\b\.?)?(?![\w:])",
    re.IGNORECASE,
)
_CLOCK_VALUE = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


def _clock_value(value: str) -> str:
    m = _CLOCK_VALUE.fullmatch(value)
    return f"{int(m[1]):02d}:{m[2]}" if m else value


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


_ORDINAL = r"(?:st|nd|rd|th)?"  # the day written as an ordinal: 1st, 2nd, 3rd, 12th


def _date(text: str) -> date | None:
    """A calendar date written as ISO, d/m/y or "5 March 2026" / "March 5, 2026", the day also
    as an ordinal ("12th of December 2026", "December 12th, 2026"). The whole text must be the
    date: a near date is a different date, never this one."""
    t = text.strip().casefold().rstrip(".,")
    m = re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", t)
    try:
        if m:
            return date(int(m[1]), int(m[2]), int(m[3]))
        m = re.fullmatch(r"(\d{1,2})[/.](\d{1,2})[/.](\d{4})", t)
        if m:
            return date(int(m[3]), int(m[2]), int(m[1]))
        m = re.fullmatch(rf"(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?([a-z]+),?\s+(\d{{4}})", t)
        if m and m[2] in _MONTHS:
            return date(int(m[3]), _MONTHS[m[2]], int(m[1]))
        m = re.fullmatch(rf"([a-z]+)\s+(?:the\s+)?(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})", t)
        if m and m[1] in _MONTHS:
            return date(int(m[3]), _MONTHS[m[1]], int(m[2]))
    except ValueError:
        return None
    return None


def same_value(known: Any, value: Any) -> bool:
    """Equal after normalisation: numbers by value, text by case and whitespace."""
    if known is None or isinstance(known, Mapping | list | tuple):
        return False
    if isinstance(value, bool) or isinstance(known, bool):
        return known is value
    a, b = _decimal(known), _decimal(value)
    if a is not None and b is not None:
        return a == b
    return _normal_text(known) == _normal_text(value)


def _normal_text(value: Any) -> str:
    return _SPACE.sub(" ", str(value).strip()).casefold()


def value_in_text(value: Any, text: str) -> bool:
    """Whether `text` holds `value` as the customer's words would ground it (used to keep, out of
    a bounded history, the messages a collected value came from)."""
    if value is None or isinstance(value, bool | Mapping):
        return False
    kind = "number" if isinstance(value, int | float | Decimal) else "string"
    return _in_text(ToolParameter(name="value", type=kind), value, text) is not None
