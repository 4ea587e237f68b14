"""Grounded tool arguments: every value a tool runs on is traced to where it came from, by the
rules of `engine.values.provenance`.

`ground_call` decides, for each argument of one call, its `Provenance` and whether it is
*direct* (the customer gave exactly this for this argument) or *inferred* (worked out, or chosen
among several: a consequential call asks the customer to confirm it), or that nothing supports
it (the customer is asked for it). Values are compared typed: the customer's words are read as
the parameter's type by `engine.values.reading`, whole runs only.

Nothing here asks a model anything: a hostile model cannot make an unsupported value pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from engine.sessions.session import Event
from engine.values.cost import measured
from engine.values.money import Money
from engine.values.provenance import Provenance
from engine.values.reading import read
from engine.values.runs import Reading, ReadingContext, normalize
from engine.values.types import ValueShape, canonical, coerce


@dataclass(frozen=True)
class CustomerMessage:
    """One message of the customer whose turn this is: its position and its (normalized) text."""

    number: int  # the event offset, shown to people as "message #n"
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", normalize(self.text))

    @classmethod
    def of(cls, event: Event) -> CustomerMessage:
        """A customer message event as grounding reads it. A button press is stored with its
        option's id as its text (`engine.turn`); an id is not words — its meaning is the pick
        itself (a collected value with its origin) — so option "3" never grounds a 3."""
        choice = event.data.get("choice")
        pressed = choice is not None and (event.text or "") == str(choice)
        return cls(event.offset, "" if pressed else event.text or "")


@dataclass(frozen=True)
class Answer:
    """A value collected for a field in a journey run that is under way, and how it was given
    (`CollectedValue.bound`)."""

    journey_id: str
    value: Any
    bound: bool
    evidence: str


@dataclass(frozen=True)
class SourceResult:
    """A successful tool result in view: when it came (event offset), what it holds, and whether
    the call that made it ran on values given for it (a lookup run on a worked-out value gives a
    worked-out result)."""

    offset: int
    data: Any
    given: bool = True


@dataclass(frozen=True)
class Evidence:
    """What a tool argument may be traced to, in this session, for this sender."""

    now: Sequence[CustomerMessage] = ()  # this sender's messages of this turn
    earlier: Sequence[CustomerMessage] = ()  # their earlier messages in the session
    others: Sequence[CustomerMessage] = ()  # other senders' messages (a group conversation)
    # tool → its successful results for this sender, oldest first
    results: Mapping[str, Sequence[SourceResult]] = field(default_factory=dict)
    # journey → the offset of the message that asked for its current run (`run_started`)
    request_starts: Mapping[str, int] = field(default_factory=dict)
    variables: Mapping[str, Any] = field(default_factory=dict)
    principal: Mapping[str, Any] | None = None
    # value name → (origin, value) of the customer's picks and form results, latest last
    picks: Mapping[str, Sequence[tuple[str, Any]]] = field(default_factory=dict)
    # field name → the answers collected for it in journey runs under way
    answers: Mapping[str, Sequence[Answer]] = field(default_factory=dict)
    # (guideline id, action) of the guidelines in force this turn: a value one of them sets
    instructions: Sequence[tuple[str, str]] = ()
    reading: ReadingContext = field(default_factory=ReadingContext)


@dataclass(frozen=True)
class Grounding:
    """Where one argument's value came from."""

    parameter: str
    source: str  # "customer message #7: '$40'", "tool lookup_account_id", "principal", …
    direct: bool
    span: tuple[int, int, int] | None = None  # (message, start, end) of a customer phrase
    provenance: Provenance = Provenance.SAID
    why: str = ""  # what made it inferred

    def describe(self) -> str:
        kind = "" if self.direct else f" (inferred{': ' + self.why if self.why else ''})"
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


@measured
def ground_call(
    spec: Any,
    arguments: Mapping[str, Any],
    evidence: Evidence,
    *,
    journey_id: str | None = None,
    journey_fields: Iterable[str] = (),
) -> CallGrounding:
    """Ground every argument of a call to `spec` (a `ToolSpec`; arguments validated and typed).
    `journey_id`: the journey whose tool step makes the call; `journey_fields`: the fields that
    journey collects — an argument of such a name comes from its answer, not from other words."""
    fields = frozenset(journey_fields)
    params = [p for p in spec.parameters if p.name in arguments]
    # First the phrase each argument would be read from, so that a phrase read for one argument
    # is not counted against, nor given to, another (amount 40 and account 1234324 of one
    # message are two values, not an ambiguity; "12" of "12 Baker Street" is no quantity).
    first = {
        p.name: ground_argument(spec, p, arguments[p.name], evidence, journey_id, fields, {})
        for p in params
    }
    taken = {name: g.span for name, g in first.items() if g is not None and g.span is not None}
    found: list[Grounding] = []
    missing: list[str] = []
    for p in params:
        others = phrases_of_others(p.name, taken)
        g = ground_argument(spec, p, arguments[p.name], evidence, journey_id, fields, others)
        if g is None:
            missing.append(p.name)
        else:
            found.append(g)
    if spec.consequential:
        found = _one_phrase_one_value(found)
    return CallGrounding(tuple(found), tuple(missing))


def phrases_of_others(
    name: str, phrases: Mapping[str, tuple[int, int, int]]
) -> dict[str, tuple[int, int, int]]:
    """The phrases read for the other values that this one may not be read from, nor counted
    against: those apart from its own, and those its own lies inside ("12" of "12 Baker
    Street"). A phrase two values both claim stays with both — and makes both inferred."""
    mine = phrases.get(name)
    out = {}
    for other, span in phrases.items():
        if other == name:
            continue
        if mine is None or not _overlaps(mine, span) or _strictly_inside(mine, span):
            out[other] = span
    return out


def _strictly_inside(inner: tuple[int, int, int], outer: tuple[int, int, int]) -> bool:
    return (
        inner[0] == outer[0]
        and outer[1] <= inner[1]
        and inner[2] <= outer[2]
        and (outer[1], outer[2]) != (inner[1], inner[2])
    )


def _one_phrase_one_value(found: list[Grounding]) -> list[Grounding]:
    """Two arguments read from one phrase of the customer: the model chose how to split it, so
    the customer must see the values."""
    shared = {
        g.parameter
        for g in found
        for h in found
        if g is not h
        and g.span is not None
        and h.span is not None
        and g.span[0] == h.span[0]
        and g.span[1] < h.span[2]
        and h.span[1] < g.span[2]
    }
    return [
        Grounding(g.parameter, g.source, False, g.span, g.provenance, "one phrase, two values")
        if g.parameter in shared
        else g
        for g in found
    ]


def ground_argument(
    spec: Any,
    param: Any,
    value: Any,
    evidence: Evidence,
    journey_id: str | None = None,
    journey_fields: frozenset[str] = frozenset(),
    taken: Mapping[str, tuple[int, int, int]] | None = None,
) -> Grounding | None:
    """Where `value` of `param` (a `ToolParameter`) comes from, or None when nothing supports it."""
    if isinstance(value, list) and param.type == "array":
        return _ground_items(spec, param, value, evidence, journey_id, journey_fields, taken)
    consequential = bool(spec.consequential)
    name = param.name
    shape: ValueShape = param.shape
    shape = ValueShape(shape.kind, shape.choices, shape.pattern, shape.currency)
    spans = list((taken or {}).values())
    principal = evidence.principal or {}
    if name in principal and same_value(principal[name], value):
        return Grounding(name, "the authenticated principal", True, None, Provenance.PRINCIPAL)
    picks = evidence.picks.get(name, ())
    if picks and same_value(picks[-1][1], value):
        return Grounding(name, picks[-1][0], True, None, Provenance.PICK)
    sourced = _from_source(param, value, evidence, journey_id)
    if sourced is not None:
        return sourced
    answer = _answer(evidence, name, journey_id)
    if answer is not None and same_value(answer.value, value):
        return Grounding(
            name,
            f"the answer for {name} ({answer.evidence})" if answer.evidence else f"answer {name}",
            answer.bound,
            None,
            Provenance.ANSWER,
            ""
            if answer.bound
            else "worked out, chosen among several, or given before the run was left",
        )
    # An argument of a field its journey collects comes from that answer — given at its step,
    # never read off words said for something else ("12" of "12 Baker Street" is no quantity).
    answered = name in journey_fields or (answer is not None and journey_id is None)
    if not answered:
        said = find_in_messages(
            shape, value, evidence.now, evidence.reading, spans, unique=consequential
        )
        if said is not None:
            return Grounding(name, said.source, said.direct, said.span, Provenance.SAID, said.why)
    if name in evidence.variables and same_value(evidence.variables[name], value):
        return Grounding(name, f"context variable {name}", True, None, Provenance.VARIABLE)
    if param.default is not None and same_value(param.default, value):
        return Grounding(name, "the parameter's default", True, None, Provenance.DEFAULT)
    derived = _derived(spec, param, shape, value, evidence)
    if derived is not None:
        return derived
    return _from_history(spec, param, shape, value, evidence, answered)


def _ground_items(
    spec: Any,
    param: Any,
    values: list[Any],
    evidence: Evidence,
    journey_id: str | None,
    journey_fields: frozenset[str],
    taken: Mapping[str, tuple[int, int, int]] | None,
) -> Grounding | None:
    """A list argument: grounded when every item is, direct when every item is."""
    if not values:
        return None
    item = param.model_copy(update={"type": param.items or "string", "items": None})
    parts = [
        ground_argument(spec, item, v, evidence, journey_id, journey_fields, taken) for v in values
    ]
    if any(p is None for p in parts):
        return None
    grounded = [p for p in parts if p is not None]
    sources = "; ".join(dict.fromkeys(g.source for g in grounded))
    direct = all(g.direct for g in grounded)
    whys = "; ".join(dict.fromkeys(g.why for g in grounded if g.why))
    return Grounding(param.name, sources, direct, None, grounded[0].provenance, whys)


def _answer(evidence: Evidence, name: str, journey_id: str | None) -> Answer | None:
    answers = evidence.answers.get(name, ())
    if journey_id is not None:
        own = [a for a in answers if a.journey_id == journey_id]
        return own[-1] if own else None
    return answers[-1] if answers else None


def _from_source(
    param: Any, value: Any, evidence: Evidence, journey_id: str | None
) -> Grounding | None:
    """A declared source: the latest result of that tool for this sender grounds the value — for
    a journey's step, a result produced since the customer asked for this run (the balance check
    the transfer required, not one from an earlier request); an older result, one of several
    values, or one item of a list result is a candidate to confirm."""
    if param.source is None:
        return None
    tool, _, fld = param.source.partition(".")
    seen = [(r, _field_values(r.data, fld)) for r in evidence.results.get(tool, ())]
    seen = [(r, values) for r, values in seen if values]
    if not seen:
        return None
    where = f"tool {tool}" + (f".{fld}" if fld else "")
    last, latest = seen[-1]
    since = evidence.request_starts.get(journey_id or "", None)
    if any(same_value(v, value) for v in latest):
        distinct = {canonical(v) for _, values in seen for v in values}
        if since is not None and last.offset < since:
            why = "a result from before this request"
        elif len(latest) != 1 or len(distinct) != 1:
            why = "one of several values that tool returned"
        elif not last.given:
            why = "that tool ran on a value worked out, not given"
        else:
            return Grounding(param.name, where, True, None, Provenance.SOURCE)
        return Grounding(param.name, where, False, None, Provenance.SOURCE, why)
    if any(same_value(v, value) for _, values in seen for v in values):
        why = "from an earlier result of that tool, not its latest"
        return Grounding(param.name, where, False, None, Provenance.SOURCE, why)
    return None


def _field_values(data: Any, fld: str) -> list[Any]:
    """The values a result holds for `fld`: the field of a dict, of each dict of a list, or the
    whole result (or each item of it) when no field is named."""
    if not fld:
        items = data if isinstance(data, list) else [data]
        return [v for v in items if v is not None and not isinstance(v, Mapping | list)]
    if isinstance(data, Mapping):
        return [data[fld]] if data.get(fld) is not None else []
    if isinstance(data, list):
        return [d[fld] for d in data if isinstance(d, Mapping) and d.get(fld) is not None]
    return []


def _derived(
    spec: Any, param: Any, shape: ValueShape, value: Any, evidence: Evidence
) -> Grounding | None:
    """A value worked out from something the engine can point at: an instruction in force that
    sets it, a listed choice for the customer's words, a parameter the author declared derived.
    Inferred on a consequential tool (confirmed); used on a harmless one."""
    consequential = bool(spec.consequential)
    for gid, action in evidence.instructions:
        for reading in read(shape, normalize(action), evidence.reading, value=value):
            if same_value(reading.value, value):
                why = "an instruction in force sets it"
                source = f"guideline {gid}: {action[reading.start : reading.end]!r}"
                return Grounding(
                    param.name, source, not consequential, None, Provenance.DERIVED, why
                )
    said_something = any(m.text.strip() for m in evidence.now)
    if said_something and find_in_messages(shape, value, evidence.others, evidence.reading):
        return None  # another sender's value is theirs: never worked out for this one
    if shape.kind == "enum" and said_something and (consequential or param.derived):
        why = "a listed choice for the customer's words"
        return Grounding(
            param.name, "the customer's words, mapped", not consequential, None,
            Provenance.DERIVED, why,
        )  # fmt: skip
    if param.derived and said_something:
        why = "derived by the model (declared derived)"
        return Grounding(
            param.name, "the customer's words, worked out", not consequential, None,
            Provenance.DERIVED, why,
        )  # fmt: skip
    return None


def _from_history(
    spec: Any,
    param: Any,
    shape: ValueShape,
    value: Any,
    evidence: Evidence,
    answered: bool,
) -> Grounding | None:
    """Earlier in the conversation: for a consequential tool, a candidate to confirm; for a
    harmless one, grounded (the looser rule)."""
    consequential = bool(spec.consequential)
    # This turn's words were read already (`said`) unless the argument has its answer: then a
    # value there was said for something else, a candidate at most.
    messages = [*evidence.earlier, *(evidence.now if answered else ())]
    found = find_in_messages(shape, value, messages, evidence.reading, [], unique=False)
    if found is not None:
        direct = found.direct and not consequential
        why = found.why or ("said earlier, not for this" if consequential else "")
        return Grounding(param.name, found.source, direct, found.span, Provenance.HISTORY, why)
    for origin, picked in evidence.picks.get(param.name, ()):
        if same_value(picked, value):
            return Grounding(
                param.name, origin, not consequential, None, Provenance.HISTORY, "an earlier pick"
            )
    for tool, made in evidence.results.items():
        for result in made:
            if any(same_value(v, value) for v in _field_values(result.data, param.name)):
                why = "" if not consequential else "a result of the same name, not its source"
                return Grounding(
                    param.name, f"tool {tool}", not consequential, None, Provenance.HISTORY, why
                )
    if param.composed and not consequential:
        return Grounding(
            param.name, "composed by the model (declared composed)", True, None,
            Provenance.COMPOSED,
        )  # fmt: skip
    return None


# -- values in the customer's words ----------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    source: str
    direct: bool
    span: tuple[int, int, int]
    why: str


def find_in_messages(
    shape: ValueShape,
    value: Any,
    messages: Sequence[CustomerMessage],
    ctx: ReadingContext,
    taken: Sequence[tuple[int, int, int]] = (),
    *,
    unique: bool = True,
) -> Found | None:
    """Where the messages hold `value` read as `shape` — latest message first, an exact reading
    before a worked-out one. Direct when the reading is exact and (with `unique`) the value is
    the only one of its type in those messages, phrases in `taken` (read for other values)
    left out."""
    best: tuple[CustomerMessage, Reading] | None = None
    others: set[str] = set()
    wanted = canonical(value)
    for message in messages:
        for reading in read(shape, message.text, ctx, value=value):
            if any(_overlaps((message.number, *reading.span), t) for t in taken):
                continue
            match = same_value(reading.value, value)
            if reading.strong and not match:
                others.add(canonical(reading.value))
            if match and (
                best is None
                or (reading.exact and not best[1].exact)
                or (reading.exact == best[1].exact and message.number >= best[0].number)
            ):
                best = (message, reading)
    if best is None:
        return None
    message, reading = best
    others.discard(wanted)
    direct = reading.exact and reading.strong and not (unique and others)
    why = reading.how
    if reading.exact and unique and others:
        why = "one of several values of its type in the message"
    phrase = message.text[reading.start : reading.end].strip()
    return Found(
        f"customer message #{message.number}: {phrase!r}",
        direct,
        (message.number, reading.start, reading.end),
        "" if direct else why,
    )


def _overlaps(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


# -- comparing values ------------------------------------------------------------------------------


def same_value(known: Any, value: Any) -> bool:
    """Equal as values: numbers by value ("40.00" is 40), money by amount and currency, dates and
    times by what they mean, text by case and spacing (ids also without separators)."""
    if known is None or value is None or isinstance(known, Mapping | list | tuple):
        if isinstance(known, Mapping) and isinstance(value, Money):
            return _money(known) == value
        return False
    if isinstance(value, bool) or isinstance(known, bool):
        return known is value
    if isinstance(value, Money) or isinstance(known, Money):
        money = _money(known)
        return money is not None and money == _money(value)
    if isinstance(value, datetime | date | time) or isinstance(known, datetime | date | time):
        return _when(known) == _when(value) and _when(value) is not None
    a, b = _number(known), _number(value)
    if a is not None and b is not None:
        return a == b
    return _normal_text(known) == _normal_text(value)


def _money(value: Any) -> Money | None:
    if isinstance(value, Money):
        return value
    try:
        return Money.model_validate(value if isinstance(value, Mapping) else str(value))
    except Exception:  # not money written as money
        return None


def _when(value: Any) -> str | None:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    text = str(value).strip()
    for kind in ("date", "time", "datetime"):
        try:
            return str(coerce(ValueShape(kind), text).isoformat())
        except ValueError:
            continue
    return None


def _number(value: Any) -> Decimal | None:
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        return Decimal(str(value))
    text = str(value).strip()
    if not text or not (text[0].isdigit() or text[0] in "+-."):
        return None
    if len(text) > 1 and text[0] == "0" and text[1].isdigit():
        return None  # "0100" is a code, not one hundred
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _normal_text(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def value_in_text(value: Any, text: str) -> bool:
    """Whether `text` holds `value` as the customer's words would ground it (used to keep, out of
    a bounded history, the messages a collected value came from)."""
    if value is None or isinstance(value, bool | Mapping):
        return False
    if isinstance(value, Money):
        shape = ValueShape("money", currency=value.currency)
    elif isinstance(value, int | float | Decimal):
        shape = ValueShape("decimal")
    elif isinstance(value, datetime):
        shape = ValueShape("datetime")
    elif isinstance(value, date):
        shape = ValueShape("date")
    elif isinstance(value, time):
        shape = ValueShape("time")
    else:
        shape = ValueShape("str")
    ctx = ReadingContext()
    message = CustomerMessage(0, text)
    return find_in_messages(shape, value, [message], ctx, unique=False) is not None
