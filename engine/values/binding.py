"""Answers bound to their question: how a value a journey step collected was given.

Node selection reports values for the fields of a journey's steps; the model chose them. Each is
bound here, in code, by the role of its field in this turn:

- **answer** — a field of the step the customer was answering (the step the journey stood at when
  this turn began): bound when their message holds it as the only value of its type (read by
  `engine.values.reading`, phrases read for the other fields left out); found among several, or
  worked out ("tomorrow", "forty", a listed choice for their words), or taken from earlier in
  the conversation, it is kept but *inferred*; found nowhere, it is dropped.
- **ahead** — a field of a step the journey has not asked yet (values said with the request, or
  ahead of their step): kept only when this turn's words hold it (bound, or inferred as above).
- **change** — a field of a step this run already passed: a changed answer is kept only when this
  turn's words hold it, and is always inferred — the customer sees it before it is used.

A bound value grounds a consequential call directly (`engine.values.provenance`, rule 1); an
inferred one is shown and confirmed first; a dropped one leaves its step to ask again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.values.cost import measured
from engine.values.grounding import (
    CustomerMessage,
    find_in_messages,
    phrases_of_others,
    same_value,
)
from engine.values.runs import ReadingContext
from engine.values.types import ValueShape
from engine.values.yes_no import read_yes_no

Role = Literal["answer", "ahead", "change"]


@dataclass(frozen=True)
class Binding:
    """How one collected value was given."""

    bound: bool  # the customer said exactly this for this field
    evidence: str  # where: "customer message #7: '40'"
    said_at: int | None  # the offset of the message holding it (who said it)
    why: str = ""  # why it is inferred


@measured
def bind_answers(
    shapes: Mapping[str, ValueShape],
    values: Mapping[str, Any],
    roles: Mapping[str, Role],
    *,
    now: Sequence[CustomerMessage],
    ahead_words: Sequence[CustomerMessage],
    earlier: Sequence[CustomerMessage],
    results: Sequence[Any] = (),
    offered: Sequence[CustomerMessage] = (),
    ctx: ReadingContext | None = None,
) -> dict[str, Binding | None]:
    """The binding of each reported value (None: nothing the customer said supports it).

    `now`: this turn's customer messages; `ahead_words`: those a value ahead may come from (this
    turn's and the request's a prerequisite delayed); `earlier`: the conversation before this
    turn; `results`: tool results in view (a value an answer may be taken from, inferred)."""
    ctx = ctx or ReadingContext()
    sources = _Sources(now, ahead_words, earlier, results, offered, ctx)
    first = {name: _bind(shapes[name], v, roles[name], sources, []) for name, v in values.items()}
    taken = {n: b.span for n, b in first.items() if b is not None and b.span is not None}
    second: dict[str, _Found | None] = {}
    for name, value in values.items():
        others = list(phrases_of_others(name, taken).values())
        second[name] = _bind(shapes[name], value, roles[name], sources, others)
    # One phrase read as two values: the model chose how to split it, the customer must see it.
    spans = {n: f.span for n, f in second.items() if f is not None and f.span is not None}
    out: dict[str, Binding | None] = {}
    for name, found in second.items():
        if found is None:
            out[name] = None
            continue
        b = found.binding
        mine = spans.get(name)
        if mine is not None and any(_shared(mine, s) for n, s in spans.items() if n != name):
            b = Binding(False, b.evidence, b.said_at, "one phrase, two values")
        out[name] = b
    return out


@dataclass(frozen=True)
class _Found:
    binding: Binding
    span: tuple[int, int, int] | None


def _shared(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


@dataclass(frozen=True)
class _Sources:
    now: Sequence[CustomerMessage]
    ahead_words: Sequence[CustomerMessage]
    earlier: Sequence[CustomerMessage]
    results: Sequence[Any]
    offered: Sequence[CustomerMessage]
    ctx: ReadingContext


def _bind(
    shape: ValueShape,
    value: Any,
    role: Role,
    sources: _Sources,
    taken: Sequence[tuple[int, int, int]],
) -> _Found | None:
    now, ctx = sources.now, sources.ctx
    if shape.kind == "bool":
        return _bind_yes_no(value, role, now)
    words = sources.ahead_words if role == "ahead" else now
    found = find_in_messages(shape, value, words, ctx, taken, unique=True)
    if found is not None:
        bound = found.direct and role != "change"
        why = "a changed answer" if role == "change" else found.why
        if bound and role == "ahead" and shape.kind == "str" and not shape.pattern:
            # Free text is the customer's whole answer to its question, or a choice the model
            # made among their words: said before the question, it is the latter.
            bound, why = False, "text said before its question"
        return _Found(Binding(bound, found.source, found.span[0], why), found.span)
    if role != "answer":
        return None  # a value ahead or a change must be in this turn's words
    before = find_in_messages(shape, value, sources.earlier, ctx, unique=False)
    if before is not None:
        binding = Binding(False, before.source, before.span[0], "said earlier, not as this answer")
        return _Found(binding, None)
    if (
        any(m.text.strip() for m in now)
        and find_in_messages(shape, value, sources.offered, ctx, unique=False)
        and not _names_another_offered(value, now, sources.offered)
    ):
        why = "one of the options the agent offered, for their words"
        return _Found(Binding(False, "the agent's offer", None, why), None)
    for data in sources.results:
        if _result_holds(data, value):
            return _Found(Binding(False, "a tool result", None, "taken from a tool result"), None)
    if shape.kind == "enum" and any(m.text.strip() for m in now):
        return _Found(
            Binding(False, "the customer's words, mapped", None, "a listed choice for their words"),
            None,
        )
    return None


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[^\W\d_]{4,}", text.casefold())}


def _names_another_offered(
    value: Any, now: Sequence[CustomerMessage], offered: Sequence[CustomerMessage]
) -> bool:
    """Whether the customer's words name something of the agent's offer other than `value`
    ("Checking", when it offered "Checking or Savings"): then `value` is not their pick."""
    offer = set().union(*(_content_words(m.text) for m in offered)) if offered else set()
    said = set().union(*(_content_words(m.text) for m in now)) if now else set()
    return bool((offer & said) - _content_words(str(value)))


def _bind_yes_no(value: Any, role: Role, now: Sequence[CustomerMessage]) -> _Found | None:
    """A yes/no field is answered by a clear yes or no of the answering message, never read
    off other words, and never ahead of its step."""
    if role != "answer" or not isinstance(value, bool):
        return None
    for message in reversed(now):
        verdict = read_yes_no(message.text)
        if verdict is not None:
            if verdict is value:
                where = f"customer message #{message.number}: {message.text.strip()!r}"
                return _Found(Binding(True, where, message.number), None)
            return None
    if any(m.text.strip() for m in now):
        return _Found(Binding(False, "the customer's words", None, "read as yes/no"), None)
    return None


def _result_holds(data: Any, value: Any) -> bool:
    if isinstance(data, Mapping):
        return any(_result_holds(v, value) for v in data.values())
    if isinstance(data, list):
        return any(_result_holds(v, value) for v in data)
    return same_value(data, value)
