"""Bounded history: what a turn reads of a session, however long the session has run.

A session's events are stored forever (until retention expires them), but a turn loads only the
last `EVENT_WINDOW` of them plus the session's compact state. Everything the engine's guarantees
read from older history is folded into that state when it leaves the window:

- journey paths, collected values, applied guidelines, principals and pending questions are
  state already (they never needed the events);
- a successful tool result a later turn may ground an argument on, or must not repeat
  (`own_earlier_results`, `_already_called`) is kept: the latest per (tool, sender, arguments);
  when there is too much, a tool's older results go before another tool's latest one, so a tool
  called in a loop (a funds check per amount tried) never pushes out what the loop needs;
- a customer message holding a value a journey step collected is kept while that value is, so
  the value stays grounded in the customer's own words;
- the customer's messages that asked for a journey suspended for a prerequisite are kept while
  that journey waits and runs (`SessionState.said_with_request`): values said with the request.

Kept events are real events at their own offsets, in evidence form (`evidence_form`: only what
grounding and the repeated-call check read); `TurnState.earlier_events` puts them before the
window. Evidence the window itself holds a newer copy of is not kept twice. Prompts show at most
`engine.context.HISTORY_LIMIT` recent events, which the window covers, so no running summary of
older history is needed: composition never saw it.

What a channel shows of an event but no later turn reads — a reply's options (buttons), a view
(`CHANNEL_PAYLOAD`) — is stored beside the event, not in it: `load` returns window events
without it (`without_channel_payload`); the history API and a replayed turn read it back.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from engine.sessions.session import CollectedValue, Event, EventKind, EventSource

# The most recent events the prompts show (`engine.context.render_history`). Defined here, not
# in engine.context, so that the stores can import the window without the engine's ports.
HISTORY_LIMIT = 30
# Events a turn loads: the prompts' history (its last HISTORY_LIMIT messages and tool results).
# A turn adds its own messages after the window, so the prompts never reach past it; only
# delivery-failure status events (never shown) can take a place in it.
EVENT_WINDOW = HISTORY_LIMIT
# Events per page when the whole history is read (the management API), not by a turn.
EVENT_PAGE = 100
# Older events kept as evidence, at most, and at most this much of their JSON: the oldest go
# first. The state is read by every turn, so a tool that returned a large result cannot make
# every later turn pay for it.
MAX_KEPT_EVENTS = 16
MAX_KEPT_BYTES = 8 * 1024

RESPONSE_ONLY = frozenset({"response", "turn"})  # `control.lifespan` values: this turn only
# What of a kept tool event later turns read: grounding (`own_earlier_results`), the repeated-call
# check (`_already_called`) and whose it is. Not its call id, its view or the turn that ran it.
EVIDENCE_DATA = ("tool", "arguments", "llm_view", "sender", "error", "lifespan", "inferred")
# What of an event only the channel shows (buttons, a rendered view): stored beside the event.
CHANNEL_PAYLOAD = ("options", "view")


def channel_payload(event: Event) -> dict[str, Any]:
    """The part of `event` only a channel shows (empty for most events)."""
    return {k: event.data[k] for k in CHANNEL_PAYLOAD if event.data.get(k) is not None}


def without_channel_payload(event: Event) -> Event:
    """The event as a later turn reads it (and as its window item stores it)."""
    if not channel_payload(event) and not any(k in event.data for k in CHANNEL_PAYLOAD):
        return event
    data = {k: v for k, v in event.data.items() if k not in CHANNEL_PAYLOAD}
    return event.model_copy(update={"data": data})


def with_channel_payload(event: Event, payload: dict[str, Any] | None) -> Event:
    """The event as it was committed, from its stored form and its stored payload."""
    if not payload:
        return event
    return event.model_copy(update={"data": {**event.data, **payload}})


def evidence_form(event: Event) -> Event:
    """An event as kept evidence: a customer message's words and sender, a tool event's call
    and the flat values of its result (all that grounding and argument filling read of an
    earlier result: `engine.tools.calls.known_values`, `engine.stages.action_gate`); nothing a
    later turn does not read (it is rewritten with the state each turn)."""
    data = {k: event.data[k] for k in EVIDENCE_DATA if event.data.get(k) is not None}
    if event.kind is EventKind.MESSAGE:
        data = {k: v for k, v in data.items() if k == "sender"}
    elif isinstance(data.get("llm_view"), Mapping):
        data["llm_view"] = {
            k: v for k, v in data["llm_view"].items() if not isinstance(v, Mapping | list)
        }
    if data == event.data and event.turn_id is None:
        return event
    return event.model_copy(update={"data": data, "turn_id": None})


def is_response_only(event: Event) -> bool:
    """A tool result that served the turn it ran in, and no other."""
    return event.kind is EventKind.TOOL and event.data.get("lifespan") in RESPONSE_ONLY


def fold_history(
    kept: Sequence[Event],
    window: Sequence[Event],
    new_events: Sequence[Event],
    collected: Sequence[CollectedValue],
    *,
    requests: Collection[int] = (),
) -> tuple[tuple[Event, ...], tuple[Event, ...]]:
    """(the new window, the new kept evidence) after appending `new_events` to a session whose
    loaded state is `kept` + `window`. `requests`: offsets of customer messages a waiting
    journey may still take values from (`SessionState.said_with_request`)."""
    every = [*window, *new_events]
    new_window = tuple(every[-EVENT_WINDOW:])
    leaving = every[: max(0, len(every) - EVENT_WINDOW)]
    return new_window, keep_evidence(
        [*kept, *leaving], collected, window=new_window, requests=requests
    )


def _call_key(event: Event) -> tuple[str, str, str]:
    return (
        str(event.data.get("tool", "")),
        str(event.data.get("sender", "")),
        json.dumps(event.data.get("arguments"), sort_keys=True, default=str),
    )


def _is_evidence_result(event: Event) -> bool:
    return (
        event.kind is EventKind.TOOL and not event.data.get("error") and not is_response_only(event)
    )


def keep_evidence(
    events: Sequence[Event],
    collected: Sequence[CollectedValue],
    *,
    window: Sequence[Event] = (),
    requests: Collection[int] = (),
) -> tuple[Event, ...]:
    """The events (outside the window) later turns may still need, oldest first, bounded, in
    evidence form: the latest result of each distinct successful call, for each collected
    value the latest customer message holding it — unless `window` holds a newer one — and
    the customer messages at `requests` (a waiting journey's request). Beyond the bounds, the
    results a newer result of the same tool supersedes go first, then the oldest."""
    # Reading values is the turn's (the management API imports this module for its page size)
    from engine.values.grounding import value_in_text

    in_window = {_call_key(e) for e in window if _is_evidence_result(e)}
    tool_results: dict[tuple[str, str, str], Event] = {}
    for event in events:
        if _is_evidence_result(event):
            key = _call_key(event)
            tool_results.pop(key, None)  # the latest result of the same call wins
            if key not in in_window:
                tool_results[key] = event
    # A value the same sender's words in the window hold needs no older message.
    held_in_window = {
        id(c)
        for c in collected
        for e in window
        if e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
        and e.data.get("sender") == c.sender
        and value_in_text(c.value, e.text or "")
    }
    unsourced = [
        c.value
        for c in collected
        if not c.secret and c.origin is None and id(c) not in held_in_window
    ]
    in_window_offsets = {e.offset for e in window}
    messages = [
        e
        for e in events
        if e.offset in requests
        and e.offset not in in_window_offsets
        and e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
    ]
    for event in reversed(events):
        if not unsourced:
            break
        if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
            continue
        held = [v for v in unsourced if value_in_text(v, event.text or "")]
        if held and event not in messages:
            messages.append(event)
            unsourced = [v for v in unsourced if v not in held]
    ranked = sorted(
        [*tool_results.values(), *messages], key=lambda e: (_superseded(e, tool_results), -e.offset)
    )[:MAX_KEPT_EVENTS]
    forms = [evidence_form(e) for e in ranked]
    sizes = [len(e.model_dump_json()) for e in forms]
    while forms and sum(sizes) > MAX_KEPT_BYTES:  # the last in that order go first
        forms.pop()
        sizes.pop()
    return tuple(sorted(forms, key=lambda e: e.offset))


def _superseded(event: Event, tool_results: Mapping[tuple[str, str, str], Event]) -> int:
    """How many newer results of the same tool, for the same sender, are kept: the order in which
    evidence goes when there is too much of it (then the oldest first). A tool called again and
    again with new arguments — a funds check for every amount tried in a loop — loses its older
    results before any other tool loses its latest (the account lookup the next check needs)."""
    if event.kind is not EventKind.TOOL:
        return 0
    tool, sender = event.data.get("tool"), event.data.get("sender")
    return sum(
        1
        for other in tool_results.values()
        if other.offset > event.offset
        and other.data.get("tool") == tool
        and other.data.get("sender") == sender
    )


def upsert_collected(
    collected: list[CollectedValue], value: CollectedValue
) -> CollectedValue | None:
    """Put `value` in place of the field's earlier entry, so a repeated or corrected value never
    grows the state; returns the replaced one. A journey's field holds one value whoever gave
    it (the last given); a pick or form result (`origin`) is kept per sender, since it grounds
    only its sender's calls."""

    def key(c: CollectedValue) -> tuple[str, str, str | None]:
        return (c.journey_id, c.name, c.sender if c.origin is not None else None)

    wanted = key(value)
    for i, c in enumerate(collected):
        if key(c) == wanted:
            del collected[i]
            collected.append(value)
            return c
    collected.append(value)
    return None
