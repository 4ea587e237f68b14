"""Applying a person's handoff operations to a stored session, and delivering what they write.

A change (`engine.handoff`: take, write, hand back, ticket) is computed on the loaded session and
committed under its change id, conditional on the session's version: a racing turn (the customer
wrote meanwhile) makes it reload and recompute; the same change id twice (a client retry, Slack
redelivering an event) commits once and returns what was committed.

A person's message goes to the customer through the same outbox as an agent's reply (one record
per change id: PENDING → SENDING → SENT, a lease against concurrent sends, a bounded number of
attempts) and the channel's own `send`, so platform limits (splitting, lengths) apply alike. It
never runs a turn.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import SessionConflict, WaypointError
from engine.handoff import SessionChange
from engine.ports import SessionStore
from engine.session import Event, SessionState
from infra.channels.base import Channel, OutboundReply
from infra.channels.errors import DeliveryError
from infra.outbox import DynamoOutbox, LeaseOutcome

_CONFLICT_RETRIES = 4
MAX_PERSON_MESSAGE_ATTEMPTS = 5
DELIVERY_LEASE_SECONDS = 60


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
    """Load, compute (`make` may raise `HandoffStateError`), commit; retried on a racing turn."""
    for attempt in range(_CONFLICT_RETRIES):
        state = await sessions.load(session_id)
        if state is None:
            raise SessionMissing(f"no session {session_id[:100]!r}")
        if change_id in state.committed_turn_ids:
            return _replayed(state, change_id)
        change = make(state)
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


@dataclass(frozen=True)
class Delivery:
    """How a person's message went: `sent`, `already_sent`, `in_flight` (another delivery holds
    it: retry), `retry` (the platform failed for now: retry), `failed` (refused for good or out of
    attempts), or `not_delivered` (no channel to send on, e.g. the API channel)."""

    outcome: str
    message_ids: tuple[str, ...] = ()
    error: str | None = None


async def deliver_person_message(
    outbox: DynamoOutbox,
    channel: Channel | None,
    http: Any,
    state: SessionState,
    event: Event,
) -> Delivery:
    """Send a person's message to the customer under the outbox (exactly-once-visible)."""
    if channel is None:
        return Delivery("not_delivered")
    handoff = state.handoff
    reply_to = handoff.reply_to if handoff is not None else None
    if not reply_to:
        return Delivery(
            "not_delivered", error="the customer's address is learned from their next message"
        )
    turn_id = event.turn_id or event.id
    owner = uuid.uuid4().hex
    lease = await outbox.take(
        state.id, turn_id, channel.name, owner=owner, lease_seconds=DELIVERY_LEASE_SECONDS
    )
    if lease.outcome is LeaseOutcome.DONE:
        return Delivery("already_sent", lease.entry.message_ids, lease.entry.last_error)
    if lease.outcome is LeaseOutcome.BUSY:
        return Delivery("in_flight")
    reply = OutboundReply(text=event.text or "", reply_to=reply_to, id=event.id)
    try:
        receipt = await channel.send(reply, http)
    except DeliveryError as error:
        if not error.retryable or lease.entry.attempts >= MAX_PERSON_MESSAGE_ATTEMPTS:
            await outbox.mark_failed(state.id, turn_id, str(error))
            return Delivery("failed", error=str(error))
        await outbox.release(state.id, turn_id, owner, str(error))
        return Delivery("retry", error=str(error))
    except Exception:
        await outbox.release(state.id, turn_id, owner, "interrupted")
        raise
    await outbox.mark_sent(state.id, turn_id, receipt.message_ids)
    return Delivery("sent", tuple(receipt.message_ids))
