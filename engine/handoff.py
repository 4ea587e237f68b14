"""Human handoff: the session modes `auto` / `human` and the changes a person makes outside turns.

A session in `human` mode is with a person: a customer message is still recorded and matched (the
trace shows what the agent would have done) but the agent composes nothing and runs no tool
(`engine.stages.handoff`). Everything a person does — take the session, write to the customer,
hand it back — is a `SessionChange`: new events plus the new state, committed like a turn under
its own change id (optimistic concurrency on the session's version, idempotent per id). No change
here runs a turn, and no model output can make one: only these functions, called by the
management API or the support channel, write `source=human` events or set the mode back.

Mode changes are status events (`data.status == "mode_changed"`) saying who (`by`), when
(`created_at`) and why (`why`). Who has the session is a `handoff_taken` event: taking it,
writing first to a waiting one, or taking it over from someone else (`from`, `take_over`) —
only the person who has it writes and hands back, unless they take it over.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.agent_config import (
    HANDOFF_TEMPLATE_TAG,
    HANDOFF_UNAVAILABLE_TAG,
    BusinessHours,
    HandoffConfig,
)
from engine.errors import WaypointError
from engine.language.requests import asks_for_person_in_other_languages
from engine.model import AgentSnapshot
from engine.sessions.history import fold_history
from engine.sessions.session import (
    Event,
    EventKind,
    EventSource,
    Handoff,
    SessionMode,
    SessionState,
    remember,
)
from engine.trace import TurnTrace

if TYPE_CHECKING:
    from engine.ports import TurnCommit

MODE_CHANGED = "mode_changed"
HANDOFF_TAKEN = "handoff_taken"
HANDOFF_TICKET = "handoff_ticket"
SUPPORT_THREAD = "support_thread_opened"

# An event a change records: kind, source, text, data.
_Recorded = tuple[EventKind, EventSource, str | None, dict[str, Any]]

# What counts as asking for a person, by default: "can I talk to a person", "speak with a real
# human", "I want a human agent", "get me a representative", "operator please".
_DEFAULT_REQUEST = re.compile(
    r"\b(?:(?:talk|speak|chat|connect\s+me)\s+(?:to|with)\s+(?:a\s+|an\s+|some\s+)?"
    r"(?:real\s+|live\s+|actual\s+)?(?:person|human|agent|someone|somebody|representative|rep)"
    r"|(?:real|live|actual)\s+(?:person|human|agent)"
    r"|human\s+(?:agent|being|please)"
    r"|(?:get|give|want|need)\s+(?:me\s+)?(?:a\s+|an\s+)?(?:human|person|representative|operator)"
    r"|^\s*(?:human|operator|agent)\s*(?:please)?\s*[.!?]*\s*$)",
    re.IGNORECASE,
)


class HandoffStateError(WaypointError):
    """The operation does not fit the session's mode (e.g. a person's message while the agent
    has the session): take or start a handoff first."""


class TakenByAnother(HandoffStateError):
    """Another person has the session: they write and hand back, unless the caller takes it
    over (`take_over`). `assignee` names who has it."""

    def __init__(self, session_id: str, assignee: str, doing: str) -> None:
        self.assignee = assignee
        super().__init__(
            f"session {session_id!r} is already taken by {assignee!r}: leave it to them, or "
            f"send take_over: true to take it over{doing}"
        )


def asks_for_person(text: str, config: HandoffConfig) -> bool:
    """Whether the customer's words ask for a person (`config.customer_request` on)."""
    if not config.customer_request or not text.strip():
        return False
    lowered = " ".join(text.lower().split())
    if any(p.strip() and p.strip().lower() in lowered for p in config.request_phrases):
        return True
    return _DEFAULT_REQUEST.search(lowered) is not None or asks_for_person_in_other_languages(text)


def within_business_hours(hours: BusinessHours | None, now: datetime) -> bool:
    """Whether a person is there at `now` (always, when no hours are configured)."""
    if hours is None:
        return True
    try:
        local = now.astimezone(ZoneInfo(hours.timezone))
    except ZoneInfoNotFoundError:
        local = now  # a bad zone is refused at load (`engine.validation.agent`); never fail a turn
    if local.weekday() not in hours.days:
        return False
    opens = time.fromisoformat(hours.opens)
    closes = time.max if hours.closes == "24:00" else time.fromisoformat(hours.closes)
    return opens <= local.time().replace(tzinfo=None) < closes


def pickup_overdue(session: SessionState, config: HandoffConfig, now: datetime) -> bool:
    """Handed off, no person took it and no ticket yet, for longer than the pickup timeout."""
    handoff = session.handoff
    if session.mode is not SessionMode.HUMAN or handoff is None:
        return False
    if handoff.assignee is not None or handoff.ticket_id is not None:
        return False
    return (now - handoff.since).total_seconds() >= config.pickup_timeout_seconds


def approved_notice(agent: AgentSnapshot, tag: str, language: str) -> str:
    """The agent's approved text for a handoff notice (`tag`: `handoff`, `handoff_unavailable`)
    in `language`: its canned response tagged `tag` (that language's variant), else the engine's
    line as the agent words it (`config.handoff.message` / `unavailable_message`, `messages`) —
    never model text."""
    for response in agent.canned_responses:
        if tag in response.tags:
            return response.text_in(language)
    return agent.config.lines().line(_NOTICE_LINES[tag], language)


# The catalog line of each handoff notice.
_NOTICE_LINES = {HANDOFF_TEMPLATE_TAG: "handoff", HANDOFF_UNAVAILABLE_TAG: "handoff_unavailable"}


def mode_event_data(mode: SessionMode, *, by: str, why: str, **more: Any) -> dict[str, Any]:
    """The data of a `mode_changed` status event."""
    return {"status": MODE_CHANGED, "mode": mode.value, "by": by, "why": why, **more}


# --------------------------------------------------------------------------------------------------
# Changes outside turns


@dataclass(frozen=True)
class SessionChange:
    """New events and the session after them, to commit as one unit under `change_id`."""

    change_id: str
    expected_version: int
    state: SessionState
    new_events: tuple[Event, ...]

    def trace(self) -> TurnTrace:
        """A trace like a turn's (read by `GET /sessions/{id}/traces/{change_id}`): the mode
        after the change, and what it recorded."""
        trace = TurnTrace(
            turn_id=self.change_id,
            session_id=self.state.id,
            agent_id=self.state.agent_id,
            agent_version=self.state.agent_version or "",
            mode=self.state.mode.value,
        )
        for event in self.new_events:
            what = event.data.get("status") or f"{event.source.value} message"
            who = event.data.get("by") or event.data.get("person") or event.source.value
            why = f": {event.data['why']}" if event.data.get("why") else ""
            trace.notes.append(f"{what} by {who}{why}")
        return trace

    def commit(self) -> TurnCommit:
        """The commit that writes this change (its trace says what it was)."""
        from engine.ports import TurnCommit  # (numpy, via the ports: not on a handler's import)

        return TurnCommit(
            turn_id=self.change_id,
            expected_version=self.expected_version,
            state=self.state,
            new_events=self.new_events,
            trace=self.trace().model_dump(mode="json"),
            in_flight_before=bool(self.state.active_journey_ids),
        )


def _change(
    session: SessionState,
    change_id: str,
    now: datetime,
    events: Sequence[_Recorded],
    **updates: Any,
) -> SessionChange:
    offset = session.next_offset()
    new_events = tuple(
        Event(
            id=f"{change_id}.{i}",
            offset=offset + i,
            kind=kind,
            source=source,
            created_at=now,
            turn_id=change_id,
            text=text,
            data=data,
        )
        for i, (kind, source, text, data) in enumerate(events)
    )
    window, kept = fold_history(
        session.kept_evidence,
        session.events,
        list(new_events),
        session.collected,
        requests=session.request_offsets(),
    )
    state = session.model_copy(
        update={
            "version": session.version + 1,
            "events": window,
            "kept_evidence": kept,
            "committed_turn_ids": remember(session.committed_turn_ids, change_id),
            **updates,
        }
    )
    return SessionChange(change_id, session.version, state, new_events)


def start_handoff(
    session: SessionState,
    change_id: str,
    now: datetime,
    *,
    by: str,
    reason: str,
    trigger: str = "operator",
) -> SessionChange:
    """A person (or an inbox tool) takes the session away from the agent."""
    if session.mode is SessionMode.HUMAN:
        raise HandoffStateError(f"session {session.id!r} is already with a person")
    # A person's messages go where the customer was last answered (never stored in an event);
    # a session that has none (the API channel, or no message yet) learns it from their next.
    handoff = Handoff(reason=reason, trigger=trigger, since=now, reply_to=session.last_reply_to)
    data = mode_event_data(SessionMode.HUMAN, by=by, why=reason, trigger=trigger)
    return _change(
        session,
        change_id,
        now,
        [(EventKind.STATUS, EventSource.HUMAN, None, data)],
        mode=SessionMode.HUMAN,
        handoff=handoff,
        pending_interrupt=None,
        pending_confirmation=None,
    )


def _claimed(
    session: SessionState,
    handoff: Handoff,
    person: str,
    now: datetime,
    *,
    take_over: bool,
    doing: str,
    why_first: str | None = None,
) -> tuple[Handoff, list[_Recorded]]:
    """The handoff with `person` as its assignee, and the `handoff_taken` event that records
    it (none when they had it already). Someone else's session is refused (`TakenByAnother`)
    unless `take_over`: then it is reassigned, the event naming whom it was taken from."""
    current = handoff.assignee
    if current == person:
        return handoff, []
    if current is not None and not take_over:
        raise TakenByAnother(session.id, current, doing)
    data: dict[str, Any] = {"status": HANDOFF_TAKEN, "by": person}
    if current is not None:
        data.update({"from": current, "take_over": True, "why": f"taken over from {current}"})
    elif why_first:
        data["why"] = why_first
    claimed = handoff.model_copy(update={"assignee": person, "taken_at": now})
    return claimed, [(EventKind.STATUS, EventSource.HUMAN, None, data)]


def take(
    session: SessionState, change_id: str, now: datetime, *, person: str, take_over: bool = False
) -> SessionChange:
    """`person` takes the handed-off session (refused when someone else has it, unless
    `take_over`)."""
    handoff, events = _claimed(
        session, _handed_off(session), person, now, take_over=take_over, doing=""
    )
    if not events:  # they have it already: recorded all the same (an inbox tool's click)
        events = [
            (EventKind.STATUS, EventSource.HUMAN, None, {"status": HANDOFF_TAKEN, "by": person})
        ]
    return _change(session, change_id, now, events, handoff=handoff)


def person_message(
    session: SessionState,
    change_id: str,
    now: datetime,
    *,
    person: str,
    text: str,
    take_over: bool = False,
) -> SessionChange:
    """A person's message to the customer (recorded as `source=human`; never runs a turn). Only
    the person who has the session writes: a waiting one is taken by whoever writes first (a
    `handoff_taken` event before the message), someone else's is refused unless `take_over`."""
    handoff = _handed_off(session)
    if not text.strip():
        raise HandoffStateError("a person's message needs text")
    handoff, events = _claimed(
        session,
        handoff,
        person,
        now,
        take_over=take_over,
        doing=" and write",
        why_first="wrote to the customer first",
    )
    events.append((EventKind.MESSAGE, EventSource.HUMAN, text, {"person": person}))
    return _change(session, change_id, now, events, handoff=handoff)


def hand_back(
    session: SessionState,
    change_id: str,
    now: datetime,
    *,
    by: str,
    why: str = "",
    take_over: bool = False,
) -> SessionChange:
    """The person gives the session back to the agent, which answers the next message with the
    whole conversation (the person's messages included) in its history. A session someone else
    has is theirs to hand back, unless `take_over` (recorded as a take-over first); a waiting
    one anyone may hand back."""
    handoff = _handed_off(session)
    events: list[_Recorded] = []
    if handoff.assignee is not None:
        handoff, events = _claimed(
            session, handoff, by, now, take_over=take_over, doing=" and hand it back"
        )
    data = mode_event_data(
        SessionMode.AUTO, by=by, why=why or "handed back to the agent", reason=handoff.reason
    )
    events.append((EventKind.STATUS, EventSource.HUMAN, None, data))
    return _change(session, change_id, now, events, mode=SessionMode.AUTO, handoff=None)


def record_ticket(
    session: SessionState,
    change_id: str,
    now: datetime,
    *,
    why: str,
    notice: str | None,
    language: str | None = None,
) -> SessionChange:
    """No one picked the session up: a ticket-style record (a status event, listed by the API)
    and, when `notice` is given, that message to the customer from the agent (written in
    `language`, which the channel writes around it in)."""
    handoff = _handed_off(session)
    if handoff.ticket_id is not None:
        raise HandoffStateError(f"session {session.id!r} has a ticket already")
    events: list[_Recorded] = [
        (EventKind.STATUS, EventSource.SYSTEM, None, ticket_data(change_id, handoff, why))
    ]
    if notice:
        data: dict[str, Any] = {"handoff_notice": True}
        if language:
            data["language"] = language
        events.append((EventKind.MESSAGE, EventSource.AGENT, notice, data))
    return _change(
        session, change_id, now, events, handoff=handoff.model_copy(update={"ticket_id": change_id})
    )


def ticket_data(ticket_id: str, handoff: Handoff, why: str) -> dict[str, Any]:
    """The data of a `handoff_ticket` status event."""
    return {
        "status": HANDOFF_TICKET,
        "ticket_id": ticket_id,
        "reason": handoff.reason,
        "why": why,
        "since": handoff.since.isoformat(),
    }


def open_support_thread(
    session: SessionState, change_id: str, now: datetime, *, thread: dict[str, str]
) -> SessionChange:
    """Record where the support side discusses this session (e.g. a Slack thread)."""
    handoff = _handed_off(session)
    data = {"status": SUPPORT_THREAD, **thread}
    return _change(
        session,
        change_id,
        now,
        [(EventKind.STATUS, EventSource.SYSTEM, None, data)],
        handoff=handoff.model_copy(update={"support_thread": dict(thread)}),
    )


def _handed_off(session: SessionState) -> Handoff:
    if session.mode is not SessionMode.HUMAN or session.handoff is None:
        raise HandoffStateError(
            f"session {session.id!r} is with the agent; start a handoff before a person acts on it"
        )
    return session.handoff
