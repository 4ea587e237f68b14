"""Bounded history: what a turn reads of a session, however long the session has run.

A session's events are stored forever (until retention expires them), but a turn loads only the
last `EVENT_WINDOW` of them plus the session's compact state. Everything the engine's guarantees
read from older history is folded into that state when it leaves the window:

- journey paths, collected values, applied guidelines, principals and pending questions are
  state already (they never needed the events);
- a successful tool result a later turn may ground an argument on, or must not repeat
  (`own_earlier_results`, `_already_called`) is kept: the latest per (tool, sender, arguments);
- a customer message holding a value a journey step collected is kept while that value is, so
  the value stays grounded in the customer's own words.

Kept events are real events at their own offsets; `TurnState.earlier_events` puts them before
the window. Prompts show at most `engine.context.HISTORY_LIMIT` recent events, which the window
covers, so no running summary of older history is needed: composition never saw it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.grounding import value_in_text
from engine.session import CollectedValue, Event, EventKind, EventSource

# Events a turn loads. At least the prompts' HISTORY_LIMIT (30 messages and tool results), with
# a little room for status events.
EVENT_WINDOW = 32
# Events per page when the whole history is read (the management API), not by a turn.
EVENT_PAGE = 100
# Older events kept as evidence, at most; the oldest go first.
MAX_KEPT_EVENTS = 16

RESPONSE_ONLY = frozenset({"response", "turn"})  # `control.lifespan` values: this turn only


def is_response_only(event: Event) -> bool:
    """A tool result that served the turn it ran in, and no other."""
    return event.kind is EventKind.TOOL and event.data.get("lifespan") in RESPONSE_ONLY


def fold_history(
    kept: Sequence[Event],
    window: Sequence[Event],
    new_events: Sequence[Event],
    collected: Sequence[CollectedValue],
) -> tuple[tuple[Event, ...], tuple[Event, ...]]:
    """(the new window, the new kept evidence) after appending `new_events` to a session whose
    loaded state is `kept` + `window`."""
    every = [*window, *new_events]
    new_window = tuple(every[-EVENT_WINDOW:])
    leaving = every[: max(0, len(every) - EVENT_WINDOW)]
    return new_window, keep_evidence([*kept, *leaving], collected)


def keep_evidence(
    events: Sequence[Event], collected: Sequence[CollectedValue]
) -> tuple[Event, ...]:
    """The events (outside the window) later turns may still need, oldest first, bounded: the
    latest result of each distinct successful call, and for each collected value the latest
    customer message holding it."""
    tool_results: dict[tuple[str, str, str], Event] = {}
    for event in events:
        if event.kind is EventKind.TOOL and not event.data.get("error"):
            if is_response_only(event):
                continue
            key = (
                str(event.data.get("tool", "")),
                str(event.data.get("sender", "")),
                json.dumps(event.data.get("arguments"), sort_keys=True, default=str),
            )
            tool_results.pop(key, None)  # the latest result of the same call wins
            tool_results[key] = event
    unsourced = [c.value for c in collected if not c.secret and c.origin is None]
    messages: list[Event] = []
    for event in reversed(events):
        if not unsourced:
            break
        if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
            continue
        held = [v for v in unsourced if value_in_text(v, event.text or "")]
        if held:
            messages.append(event)
            unsourced = [v for v in unsourced if v not in held]
    kept = sorted([*tool_results.values(), *messages], key=lambda e: e.offset)
    return tuple(kept[max(0, len(kept) - MAX_KEPT_EVENTS) :])


def upsert_collected(
    collected: list[CollectedValue], value: CollectedValue
) -> CollectedValue | None:
    """Put `value` in place of the field's earlier entry (one entry per journey, field and
    sender, so a repeated or corrected value never grows the state); returns the replaced one."""
    key = (value.journey_id, value.name, value.sender)
    for i, c in enumerate(collected):
        if (c.journey_id, c.name, c.sender) == key:
            del collected[i]
            collected.append(value)
            return c
    collected.append(value)
    return None
