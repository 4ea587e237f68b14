"""What erasing one person removes from a session they took part in, for every store.

A session that is theirs alone is deleted whole (each store knows its items). In a group session
their messages — and the agent's replies and tool calls of the turns that answered them, which
quote their values (their login, their account, its balance) — are overwritten with an erased
marker at the same offset, so the conversation's order stays intact for the others; the traces
of every turn from their first message on go (their recorded prompts quote the conversation);
and what the session's state holds about them — their principal, their picks and the values
journeys collected from their words (a value without a recorded sender is the opener's, like
their messages), their evidence, a question put to them, where the conversation was last
answered — goes.

A message of theirs may still be queued when they are erased (the webhook accepted it, the worker
has not run it yet). So that it is not written back, the erasure records when it happened under a
digest of the person (`person_digest`: no id is stored): in a group session's state
(`SessionState.erased_senders`), and in a tombstone beside the deleted sessions of their own that
a session created afresh copies; a turn drops the messages they wrote before it
(`written_before_erasure`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from engine.sessions.session import Event, EventKind, EventSource, InboundMessage, SessionState

ERASED = "erased"  # the customer of a group session whose opener was erased
# How long an erasure is remembered (a group state's `erased_senders` entry, the tombstone of
# their own sessions): longer than a message can wait to be run — 4 days on the turn queue, 14
# in its dead-letter queue, and the time it takes someone to redrive it.
ERASURE_TOMBSTONE_DAYS = 30


def person_digest(channel: str, person: str) -> str:
    """Who was erased, as stored: a digest of `(channel, person)`, never their id."""
    return hashlib.sha256(f"{channel}\0{person}".encode()).hexdigest()[:32]


class ErasureRecords(Protocol):
    """Where erasures are remembered (a session store: `SessionStore.erased_at`)."""

    async def erased_at(self, channel: str, customer_id: str) -> datetime | None: ...


async def erasures_of(
    records: ErasureRecords, channel: str, people: Iterable[str]
) -> dict[str, datetime]:
    """The `erased_senders` a session created afresh starts with: the erasures of `people`
    (their sessions were deleted whole, perhaps with messages of theirs still queued)."""
    erased: dict[str, datetime] = {}
    for person in sorted(set(people)):
        erased_at = await records.erased_at(channel, person)
        if erased_at is not None:
            erased[person_digest(channel, person)] = erased_at
    return erased


def written_before_erasure(
    message: InboundMessage, session: SessionState, erased: Mapping[str, datetime] | None = None
) -> bool:
    """Whether `message` was written by someone erased after it was received (it waited on the
    queue through their erasure): it is dropped, never answered. Its sender is the channel's
    (else the session's customer); `erased` defaults to the session's `erased_senders`."""
    erased = session.erased_senders if erased is None else erased
    sender = message.sender_id or session.customer_id
    erased_at = erased.get(person_digest(session.channel, sender))
    return (
        erased_at is not None
        and message.received_at is not None
        and message.received_at <= erased_at
    )


def sender_of(event: Event) -> str | None:
    """Who wrote a customer message, when the channel said (None for other events)."""
    if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
        return None
    sender = event.data.get("sender")
    return str(sender) if sender else None


def is_theirs(event: Event, person: str, opener: bool) -> bool:
    """A message `person` wrote (the opener's messages from before senders were recorded carry
    no sender: they are the session customer's)."""
    if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
        return False
    sender = sender_of(event)
    return sender == person or (opener and sender is None)


def others_wrote(events: list[Event], person: str) -> bool:
    """Whether anyone but `person` wrote in these events (a group: the others' conversation)."""
    return any((sender := sender_of(e)) is not None and sender != person for e in events)


def turns_that_may_quote(events: Iterable[Event], person: str, opener: bool) -> set[str]:
    """The turns whose traces may hold `person`'s words: every turn from their first message
    on, since a turn's recorded prompts quote the conversation's recent window and its kept
    evidence — not only the turns that answered them."""
    events = list(events)
    first = min((e.offset for e in events if is_theirs(e, person, opener)), default=None)
    if first is None:
        return set()
    return {e.turn_id for e in events if e.offset >= first and e.turn_id}


def is_erased(event: Event) -> bool:
    """Whether `event` is already an erased marker."""
    return event.text is None and event.data == {"erased": True}


def their_part(events: Iterable[Event], person: str, opener: bool) -> list[Event]:
    """The events to overwrite with erased markers: their messages, and the agent's replies and
    the tool calls and results of the turns that answered them (or that a tool made for them).
    The others' messages stay, even in a turn that answered both. Their messages come last: a
    store that stops midway finds the turns again through them."""
    events = [e for e in events if not is_erased(e)]
    theirs = [e for e in events if is_theirs(e, person, opener)]
    turns = {e.turn_id for e in theirs if e.turn_id}
    answers = [
        e
        for e in events
        if e.source is not EventSource.CUSTOMER
        and e.kind in (EventKind.MESSAGE, EventKind.TOOL)
        and (e.turn_id in turns or str(e.data.get("sender") or "") == person)
    ]
    return [*answers, *theirs]


def erased_copy(event: Event) -> Event:
    """The marker left at an erased message's offset."""
    return event.model_copy(update={"text": None, "data": {"erased": True}})


def without_person(
    state: SessionState, person: str, opener: bool, erased_at: datetime
) -> SessionState:
    """The session's state with nothing left of `person` (and, when they opened a group the
    others stay in, its customer renamed `ERASED`), their digest recorded as erased at
    `erased_at` (the erasure's time: their messages still queued are dropped)."""

    def theirs(event: Event) -> bool:
        return is_theirs(event, person, opener) or str(event.data.get("sender") or "") == person

    cleaned = state.model_copy(
        update={
            "principals": {k: v for k, v in state.principals.items() if k != person},
            "collected": tuple(
                c
                for c in state.collected
                if c.sender != person and not (opener and c.sender is None)
            ),
            "kept_evidence": tuple(e for e in state.kept_evidence if not theirs(e)),
            "completed_by": {
                j: tuple(s for s in senders if s != person)
                for j, senders in state.completed_by.items()
            },
            "pending_interrupt": (
                None
                if state.pending_interrupt and state.pending_interrupt.sender == person
                else state.pending_interrupt
            ),
            "pending_confirmation": (
                None
                if state.pending_confirmation and state.pending_confirmation.sender == person
                else state.pending_confirmation
            ),
            # Where the conversation was last answered may hold their message's ids (or, in a
            # generic group, their callback): forgotten; the others' next message teaches it.
            "last_reply_to": None,
            "handoff": (
                state.handoff.model_copy(update={"reply_to": None}) if state.handoff else None
            ),
            "erased_senders": remember_erasure(
                state.erased_senders, person_digest(state.channel, person), erased_at
            ),
        }
    )
    if cleaned.customer_id == person:  # they opened the group: it stays the others'
        cleaned = cleaned.model_copy(update={"customer_id": ERASED})
    return cleaned


def remember_erasure(
    erased: Mapping[str, datetime], digest: str, erased_at: datetime
) -> dict[str, datetime]:
    """`erased` with `digest` erased at `erased_at`, less the erasures older than
    `ERASURE_TOMBSTONE_DAYS` (no message of theirs can still be waiting)."""
    oldest = erased_at - timedelta(days=ERASURE_TOMBSTONE_DAYS)
    kept = {d: at for d, at in erased.items() if at > oldest and d != digest}
    return {**kept, digest: erased_at}
