"""The in-memory `SessionStore`, with the DynamoDB store's semantics (tests/contracts run both).

Besides turns (optimistic concurrency, idempotent replay, a bounded window), it keeps the same
lifecycle as the state table: each item expires after its `engine.privacy.retention.Retention` TTL — an
idle session (its state and turn markers) after `session_idle` since its last write, each event
after `events` since it was written, each trace after `traces` — and reads treat an expired item
as absent, so a session can start afresh under the same id. `erase_customer` removes one person
the way `infra.aws.erasure` does (`engine.privacy.erasure`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.clock import SystemClock
from engine.ports import Clock, TurnCommit
from engine.privacy.erasure import (
    DEVELOPMENT_ERASURE_KEY,
    ERASURE_TOMBSTONE_DAYS,
    PersonDigest,
    erased_copy,
    is_theirs,
    others_wrote,
    sender_of,
    their_part,
    turns_that_may_quote,
    without_person,
)
from engine.privacy.retention import DAY, Retention
from engine.sessions.history import (
    EVENT_PAGE,
    EVENT_WINDOW,
    channel_payload,
    with_channel_payload,
    without_channel_payload,
)
from engine.sessions.index import SessionPage, SessionSummary, page_after, summarize_session
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from engine.sessions.store_rules import session_conflict, validate_commit


@dataclass
class _Stored:
    """One item and when it expires (epoch seconds; None: never)."""

    value: Any
    expires_at: float | None


@dataclass
class _Session:
    meta: _Stored  # the state without events
    events: list[_Stored] = field(default_factory=list)  # Event, as a later turn reads it
    payloads: dict[int, dict[str, Any]] = field(default_factory=dict)  # offset → channel payload
    turns: dict[str, _Stored] = field(default_factory=dict)  # committed turn id → marker
    traces: dict[str, _Stored] = field(default_factory=dict)


@dataclass
class InMemoryErasureReport:
    """What `InMemorySessionStore.erase_customer` removed (as `infra.aws.erasure.ErasureReport`
    reports it for sessions)."""

    channel: str
    customer_id: str
    sessions_deleted: list[str] = field(default_factory=list)
    sessions_redacted: list[str] = field(default_factory=list)
    inbox_claims_deleted: int = 0
    complete: bool = True
    # What the other in-memory stores hold about them (`engine.memory.stores.InMemoryCustomerErasure`):
    # the channel ids of the erased messages (their inbox claims) and the agents whose context
    # variables for them go.
    message_ids: list[str] = field(default_factory=list)
    variables_of: list[str] = field(default_factory=list)


class InMemorySessionStore:
    """`SessionStore` in dicts: session meta, ordered events, traces and committed turn ids."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        retention: Retention | None = None,
        erasure_key: bytes = DEVELOPMENT_ERASURE_KEY,
    ) -> None:
        self._clock = clock or SystemClock()
        self._retention = retention if retention is not None else Retention()
        self._sessions: dict[str, _Session] = {}
        self._summaries: dict[str, SessionSummary] = {}  # `engine.sessions.index`
        self._people = PersonDigest(erasure_key)
        # `person_digest` → when they were erased (a tombstone, as the state table keeps one)
        self._erased: dict[str, _Stored] = {}
        self._lock = threading.Lock()

    # ---- reads

    async def load(self, session_id: str) -> SessionState | None:
        """The session with its last `EVENT_WINDOW` live events in order, or None (unknown, or
        idle past its TTL)."""
        with self._lock:
            stored = self._live(session_id)
            if stored is None:
                return None
            events = [e.value for e in stored.events if self._alive(e)]
            meta: SessionState = stored.meta.value
            return meta.model_copy(update={"events": tuple(events[-EVENT_WINDOW:])})

    async def events(
        self, session_id: str, *, after: int = -1, limit: int = EVENT_PAGE
    ) -> list[Event] | None:
        """Up to `limit` live events with an offset above `after`, in order, as committed
        (channel payload included); None for an unknown session."""
        with self._lock:
            stored = self._live(session_id)
            if stored is None:
                return None
            page = [e.value for e in stored.events if self._alive(e) and e.value.offset > after]
            return [with_channel_payload(e, stored.payloads.get(e.offset)) for e in page[:limit]]

    async def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The trace a committed turn wrote, or None (unknown turn, or expired)."""
        with self._lock:
            stored = self._live(session_id)
            trace = stored.traces.get(turn_id) if stored else None
            if trace is None or not self._alive(trace):
                return None
            return _copy_tree(trace.value)  # type: ignore[no-any-return]

    async def erased_at(self, channel: str, customer_id: str) -> datetime | None:
        """When `(channel, customer_id)` was last erased, while that is remembered
        (`engine.privacy.erasure.ERASURE_TOMBSTONE_DAYS`), else None."""
        with self._lock:
            tombstone = self._erased.get(self.person_digest(channel, customer_id))
            if tombstone is None or not self._alive(tombstone):
                return None
            erased: datetime = tombstone.value
            return erased

    def person_digest(self, channel: str, person: str) -> str:
        """How an erased person is named here (`engine.privacy.erasure.PersonDigest`, this store's key)."""
        return self._people(channel, person)

    # ---- writes

    async def create(self, state: SessionState) -> SessionState:
        """Create a session (with any events it carries); an existing one is returned as is.
        Over a session idle past its TTL, a new one starts: the old history does not carry
        over."""
        with self._lock:
            if self._live(state.id) is None:
                fresh = _Session(meta=self._meta(state))
                fresh.events = self._split(fresh, state.events)
                self._sessions[state.id] = fresh
                self._summaries[state.id] = summarize_session(state)
        stored = await self.load(state.id)
        assert stored is not None
        return stored

    async def commit(self, commit: TurnCommit) -> bool:
        """Write the turn atomically; False on replay of a committed turn; `SessionConflict` when
        the version moved (or an event offset is taken)."""
        validate_commit(commit)
        session_id = commit.state.id
        with self._lock:
            stored = self._live(session_id)
            marker = stored.turns.get(commit.turn_id) if stored else None
            if marker is not None and self._alive(marker):
                return False
            stored_version = stored.meta.value.version if stored is not None else None
            # An absent (or expired) session counts as version 0: a first turn may create it.
            if (stored_version or 0) != commit.expected_version:
                raise session_conflict(session_id, commit.expected_version, stored_version)
            if stored is None:
                stored = self._sessions[session_id] = _Session(meta=self._meta(commit.state))
            live = {e.value.offset for e in stored.events if self._alive(e)}
            taken = live & {e.offset for e in commit.new_events}
            if taken:
                raise session_conflict(
                    session_id,
                    commit.expected_version,
                    stored_version,
                    detail=f"event offset {min(taken)} is already taken",
                )
            new_offsets = {e.offset for e in commit.new_events}
            masked = {e.value.offset: e for e in self._split(stored, commit.masked_events)}
            kept = [e for e in stored.events if e.value.offset not in new_offsets]
            stored.meta = self._meta(commit.state)
            stored.events = [
                *(
                    _Stored(masked[e.value.offset].value, e.expires_at)
                    if e.value.offset in masked
                    else e
                    for e in kept
                ),
                *self._split(stored, commit.new_events),
            ]
            stored.turns[commit.turn_id] = _Stored(True, self._expiry(self._retention.session_idle))
            # The store owns a commit's trace dicts (`TurnCommit.trace`): kept as given, not
            # copied; a read returns a copy, so no reader can change what is stored.
            stored.traces[commit.turn_id] = _Stored(
                commit.trace, self._expiry(self._retention.traces)
            )
            for earlier, trace in commit.masked_traces.items():  # rewritten with a secret masked
                stored.traces[earlier] = _Stored(trace, self._expiry(self._retention.traces))
            self._summaries[session_id] = summarize_session(commit.state, commit.new_events)
        return True

    async def list_sessions(
        self, agent_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> SessionPage:
        """A page of the agent's session summaries (`engine.sessions.index`); a session idle past
        its TTL is not listed."""
        with self._lock:
            live = {k: v for k, v in self._summaries.items() if self._live(k) is not None}
            return page_after(live, agent_id, limit, cursor)

    async def replace_state(self, state: SessionState, *, expected_version: int) -> None:
        """Rewrite the session's state (not its events) if its version is still
        `expected_version`, bumping the version (as `DynamoSessionStore.replace_state`)."""
        with self._lock:
            stored = self._live(state.id)
            version = stored.meta.value.version if stored else None
            if stored is None or version != expected_version:
                raise session_conflict(state.id, expected_version, version)
            stored.meta = self._meta(state.model_copy(update={"version": expected_version + 1}))

    async def erase_customer(self, channel: str, customer_id: str) -> InMemoryErasureReport:
        """Erase one person on one channel: a session that is theirs alone goes whole; in a
        group session their messages become erased markers, the traces of the turns from their
        first message on go (their prompts quote the conversation), and the state forgets them
        (`engine.privacy.erasure`); a tombstone (`erased_at`) remembers when. Idempotent."""
        report = InMemoryErasureReport(channel, customer_id)
        with self._lock:
            now = self._clock.now()
            self._erased[self.person_digest(channel, customer_id)] = _Stored(
                now, self._expiry(ERASURE_TOMBSTONE_DAYS * DAY)
            )
            for session_id in sorted(self._sessions):
                stored = self._live(session_id)
                if stored is None or stored.meta.value.channel != channel:
                    continue
                events = [e.value for e in stored.events]
                owner = stored.meta.value.customer_id == customer_id
                if not owner and all(sender_of(e) != customer_id for e in events):
                    continue
                if owner:
                    report.variables_of.append(stored.meta.value.agent_id)
                if owner and not others_wrote(events, customer_id):
                    report.message_ids += _message_ids(events)
                    del self._sessions[session_id]
                    self._summaries.pop(session_id, None)
                    report.sessions_deleted.append(session_id)
                    continue
                report.message_ids += _message_ids(
                    [e for e in events if is_theirs(e, customer_id, owner)]
                )
                self._redact(stored, customer_id, owner, now)
                report.sessions_redacted.append(session_id)
        return report

    # ---- internals

    def _redact(self, stored: _Session, person: str, opener: bool, now: datetime) -> None:
        turns = turns_that_may_quote([item.value for item in stored.events], person, opener)
        part = {e.offset for e in their_part([i.value for i in stored.events], person, opener)}
        for item in stored.events:
            if item.value.offset in part:
                item.value = erased_copy(item.value)
                stored.payloads.pop(item.value.offset, None)
        for turn in turns:
            stored.traces.pop(turn, None)
        meta: SessionState = stored.meta.value
        cleaned = without_person(meta, person, opener, now, self.person_digest)
        if cleaned != meta:
            stored.meta = _Stored(
                cleaned.model_copy(update={"version": meta.version + 1}), stored.meta.expires_at
            )

    def _split(self, stored: _Session, events: Sequence[Event]) -> list[_Stored]:
        """Each event's channel payload beside it, as the DynamoDB store keeps it."""
        expiry = self._expiry(self._retention.events)
        for event in events:
            payload = channel_payload(event)
            if payload:
                stored.payloads[event.offset] = copy.deepcopy(payload)
        return [_Stored(without_channel_payload(e), expiry) for e in events]

    def _meta(self, state: SessionState) -> _Stored:
        # Every write pushes an idle session's expiry back.
        return _Stored(
            state.model_copy(update={"events": ()}), self._expiry(self._retention.session_idle)
        )

    def _live(self, session_id: str) -> _Session | None:
        stored = self._sessions.get(session_id)
        return stored if stored is not None and self._alive(stored.meta) else None

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _expiry(self, ttl: int | None) -> float | None:
        return self._now() + ttl if ttl is not None else None

    def _alive(self, item: _Stored) -> bool:
        return item.expires_at is None or item.expires_at > self._now()


def _message_ids(events: Sequence[Event]) -> list[str]:
    """The channel ids of the customer messages among `events` (their inbox claims' keys)."""
    return [
        str(e.data["channel_event_id"])
        for e in events
        if e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
        and e.data.get("channel_event_id")
    ]


__all__ = ["InMemoryErasureReport", "InMemorySessionStore"]


_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)


def _copy_tree(value: Any) -> Any:
    """A deep copy of a trace: dicts and lists copied all the way down, immutable scalars shared.

    Traces are JSON trees (`TurnTrace.model_dump(mode="json")`), and `copy.deepcopy`'s generic
    machinery cost more per turn than the rest of the commit; anything else still goes through it.
    """
    if type(value) is dict:  # exact types: a subclass keeps deepcopy's behaviour
        return {k: v if type(v) in _SCALARS else _copy_tree(v) for k, v in value.items()}
    if type(value) is list:  # (a trace's id lists run to thousands: copied at once)
        if _SCALAR_TYPES.issuperset(map(type, value)):
            return value.copy()
        return [v if type(v) in _SCALARS else _copy_tree(v) for v in value]
    if type(value) in _SCALARS:
        return value
    return copy.deepcopy(value)
