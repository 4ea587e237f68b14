"""Applying a person's handoff operations to a stored session, and delivering what they write.

A change (`engine.handoff`: take, write, hand back, ticket) is computed on the loaded session and
committed under its change id, conditional on the session's version: a racing turn (the customer
wrote meanwhile) makes it reload and recompute; the same change id twice (a client retry, Slack
redelivering an event) commits once and returns what was committed.

A person's message goes to the customer through the turn queue and the turn worker's delivery,
exactly like an agent's reply: the same outbox (one record per change id: PENDING → SENDING →
SENT, a lease against concurrent sends, a bounded number of attempts, a `delivery_failed` event
when given up), the channel's own `send` (platform limits apply alike), in the session's FIFO
order. The worker never runs a turn for it. (The management API holds no channel secrets.)
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import SessionConflict, WaypointError
from engine.sessions.session import Event, SessionState

if TYPE_CHECKING:  # (engine.ports imports numpy: not on a handler's import path)
    from engine.handoff import SessionChange
    from engine.ports import SessionStore

_CONFLICT_RETRIES = 4


class SessionMissing(WaypointError):
    """No session with that id."""


@dataclass(frozen=True)
class AppliedChange:
    """What a change left: the session after it and the events it added (the committed ones,
    on a replay)."""

    state: SessionState
    events: tuple[Event, ...]
    replayed: bool = False


async def apply_change(
    sessions: SessionStore,
    session_id: str,
    change_id: str,
    make: Callable[[SessionState], SessionChange],
) -> AppliedChange:
    """Load, compute (`make` may raise `HandoffStateError`), commit; retried on a racing turn.
    A change already committed is answered with what it recorded, never computed again (a
    retried message after someone took the session over is not refused)."""
    from engine.handoff import HandoffStateError  # (already loaded by every caller)

    for attempt in range(_CONFLICT_RETRIES):
        state = await sessions.load(session_id)
        if state is None:
            raise SessionMissing(f"no session {session_id[:100]!r}")
        if state.has_committed(change_id):
            return _replayed(state, change_id)
        try:
            change = make(state)
        except HandoffStateError:
            # Committed longer ago than the session remembers ids: its stored trace says so.
            if await sessions.trace(session_id, change_id) is not None:
                return _replayed(state, change_id)
            raise
        try:
            written = await sessions.commit(change.commit())
        except SessionConflict:
            if attempt == _CONFLICT_RETRIES - 1:
                raise
            continue
        if not written:
            latest = await sessions.load(session_id)
            return _replayed(latest or state, change_id)
        return AppliedChange(change.state, change.new_events)
    raise SessionConflict(f"session {session_id!r} kept changing; retry the operation")


def _replayed(state: SessionState, change_id: str) -> AppliedChange:
    return AppliedChange(state, tuple(e for e in state.events if e.turn_id == change_id), True)


def change_id_for(kind: str, session_id: str, key: str | None) -> str:
    """A change's id: derived from the caller's idempotency key when given (a retry is the same
    change), else fresh."""
    if key is None:
        return f"{kind}_{uuid.uuid4().hex[:24]}"
    digest = hashlib.sha256(f"{session_id}\x1f{kind}\x1f{key}".encode()).hexdigest()[:24]
    return f"{kind}_{digest}"


class QueuedPersonMessage(BaseModel):
    """A person's recorded message for the turn worker to deliver (on the turn queue, in the
    session's FIFO group: in order with the customer's messages). It carries where to send, so a
    session handed back meanwhile still gets it; the worker sends it under the outbox, never
    runs a turn for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    v: Literal[1] = 1
    kind: Literal["person_message"] = "person_message"
    session_id: str
    agent_id: str
    change_id: str  # the outbox record's id: one delivery whatever the retries
    event_id: str
    text: str
    reply_to: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def dedup_id(self) -> str:
        return hashlib.sha256(f"person\x1f{self.change_id}".encode()).hexdigest()

    @classmethod
    def parse(cls, body: str) -> QueuedPersonMessage | None:
        """The job, when `body` is one (`None` for a customer message)."""
        if '"person_message"' not in body:
            return None
        try:
            return cls.model_validate_json(body)
        except ValidationError:
            return None


def person_message_job(state: SessionState, event: Event) -> QueuedPersonMessage | None:
    """The delivery job of a person's `event`; None when there is nowhere to send it yet (the
    API channel, or a customer whose address the session has not learned)."""
    handoff = state.handoff
    reply_to = handoff.reply_to if handoff is not None else None
    if not reply_to:
        return None
    return QueuedPersonMessage(
        session_id=state.id,
        agent_id=state.agent_id,
        change_id=event.turn_id or event.id,
        event_id=event.id,
        text=event.text or "",
        reply_to=dict(reply_to),
    )


@dataclass(frozen=True)
class OutsideTurnDelivery:
    """A message recorded outside a turn (a person's, or a ticket's notice), to send on the
    customer's channel exactly like a turn's reply, under the outbox record `record_id`."""

    session_id: str
    channel: str
    record_id: str
    event: Event
    reply_to: dict[str, Any]


def delivery_for(state: SessionState, event: Event) -> OutsideTurnDelivery | None:
    """How to send `event` to the customer of `state` (None: nowhere known to send it)."""
    reply_to = state.handoff.reply_to if state.handoff is not None else None
    if not reply_to:
        return None
    return OutsideTurnDelivery(state.id, state.channel, event.turn_id or event.id, event, reply_to)


async def delivery_of_job(
    sessions: SessionStore, now: Any, job: QueuedPersonMessage
) -> OutsideTurnDelivery | None:
    """The delivery a queued job asks for; the job carries the text and address, so a session
    handed back meanwhile, or whose event left the loaded window, still gets it."""
    from engine.sessions.session import EventKind, EventSource

    state = await sessions.load(job.session_id)
    if state is None:
        return None
    event = next((e for e in state.events if e.id == job.event_id), None) or Event(
        id=job.event_id,
        offset=0,
        kind=EventKind.MESSAGE,
        source=EventSource.HUMAN,
        created_at=now,
        turn_id=job.change_id,
        text=job.text,
    )
    return OutsideTurnDelivery(state.id, state.channel, job.change_id, event, dict(job.reply_to))
