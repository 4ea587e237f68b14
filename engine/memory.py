"""In-memory stores with exactly the semantics of the DynamoDB adapters.

They back the engine's unit tests and the offline demo, and they run the same contract tests as
`infra.aws.dynamo_store` (tests/contracts/), so a behavior pinned here holds in production:
optimistic concurrency (`SessionConflict`), idempotent replay of a turn (`commit` → False),
immutable agent versions, inbox claims that expire.

The shared rules (`validate_commit`, `versioned`, `version_conflict`, `session_conflict`) live
here too, so both implementations check and word things identically.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.clock import SystemClock
from engine.errors import AgentNotFound, InvalidAgentDefinition, SessionConflict
from engine.history import (
    EVENT_PAGE,
    EVENT_WINDOW,
    channel_payload,
    with_channel_payload,
    without_channel_payload,
)
from engine.inbox import ClaimOutcome
from engine.model import AgentSnapshot
from engine.ports import Clock, TurnCommit
from engine.session import Event, SessionState

# --------------------------------------------------------------------------------------------------
# Rules shared by every store implementation


def versioned(snapshot: AgentSnapshot) -> AgentSnapshot:
    """The snapshot as it is published: with its explicit version, or its content hash."""
    return snapshot if snapshot.version else snapshot.with_content_version()


def version_conflict(agent_id: str, version: str) -> InvalidAgentDefinition:
    """Versions are immutable (warm containers cache them forever), so re-using one is an error."""
    return InvalidAgentDefinition(
        [
            f"agent {agent_id!r}: version {version!r} is already published with different "
            "content; give the changed agent a new version, or leave `version` empty so the "
            "content hash is used"
        ]
    )


def agent_not_found(agent_id: str, version: str | None) -> AgentNotFound:
    if version is None:
        return AgentNotFound(
            f"no published agent {agent_id!r}; publish it first: `waypoint publish PATH`"
        )
    return AgentNotFound(
        f"agent {agent_id!r} has no version {version!r}; publish it, or load the published "
        "version by passing version=None"
    )


def session_conflict(
    session_id: str, expected: int, stored: int | None, *, detail: str | None = None
) -> SessionConflict:
    if detail is None:
        found = "no such session" if stored is None else f"stored version is {stored}"
        detail = f"this turn expected version {expected} but {found}"
    return SessionConflict(
        f"session {session_id!r}: {detail}; another turn committed first — reload the session "
        "and re-run the turn"
    )


def validate_commit(commit: TurnCommit) -> None:
    """Reject malformed commits (programming errors, not conflicts) before touching storage."""
    state = commit.state
    if state.version != commit.expected_version + 1:
        raise ValueError(
            f"TurnCommit for session {state.id!r}: state.version must be expected_version + 1 "
            f"({commit.expected_version + 1}), got {state.version}"
        )
    offsets = [event.offset for event in commit.new_events]
    if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        raise ValueError(
            f"TurnCommit for session {state.id!r}: new event offsets must be consecutive and "
            f"increasing, got {offsets}; take the first from SessionState.next_offset()"
        )
    # Earlier events only: a rewrite never stands in for this turn's own events.
    first_new = offsets[0] if offsets else None
    late = [
        e.offset for e in commit.masked_events if first_new is not None and e.offset >= first_new
    ]
    if late:
        raise ValueError(
            f"TurnCommit for session {state.id!r}: masked events rewrite earlier events only; "
            f"offsets {late} are not earlier than this turn's first event ({first_new})"
        )


# --------------------------------------------------------------------------------------------------
# Agents


class InMemoryAgentStore:
    """`AgentStore` in a dict: versions are immutable, publish flips the published pointer."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], AgentSnapshot] = {}
        self._published: dict[str, str] = {}
        self._lock = threading.Lock()

    async def publish(self, snapshot: AgentSnapshot) -> str:
        """Store the version (idempotent for identical content) and make it the published one."""
        snapshot = versioned(snapshot)
        key = (snapshot.id, snapshot.version)
        with self._lock:
            existing = self._versions.get(key)
            if existing is not None and existing.content_hash() != snapshot.content_hash():
                raise version_conflict(snapshot.id, snapshot.version)
            self._versions[key] = snapshot
            self._published[snapshot.id] = snapshot.version
        return snapshot.version

    async def get(self, agent_id: str, version: str | None = None) -> AgentSnapshot:
        """The given version, or the published one. Raises `AgentNotFound`."""
        with self._lock:
            resolved = version if version is not None else self._published.get(agent_id)
            snapshot = self._versions.get((agent_id, resolved)) if resolved else None
        if snapshot is None:
            raise agent_not_found(agent_id, version)
        return snapshot


# --------------------------------------------------------------------------------------------------
# Sessions


class InMemorySessionStore:
    """`SessionStore` in dicts: session meta, ordered events, traces and committed turn ids."""

    def __init__(self) -> None:
        self._meta: dict[str, SessionState] = {}  # state without events
        self._events: dict[str, list[Event]] = {}  # as a later turn reads them
        # (session, offset) → what only the channel shows of that event, stored beside it
        self._payloads: dict[tuple[str, int], dict[str, Any]] = {}
        self._turns: dict[str, set[str]] = {}
        self._traces: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    async def load(self, session_id: str) -> SessionState | None:
        """The session with its last `EVENT_WINDOW` events in order, or None."""
        with self._lock:
            meta = self._meta.get(session_id)
            if meta is None:
                return None
            window = tuple(self._events[session_id][-EVENT_WINDOW:])
            return meta.model_copy(update={"events": window})

    async def events(
        self, session_id: str, *, after: int = -1, limit: int = EVENT_PAGE
    ) -> list[Event] | None:
        """Up to `limit` events with an offset above `after`, in order (the whole history, page
        by page, for the management API); None for an unknown session."""
        with self._lock:
            if session_id not in self._meta:
                return None
            page = [e for e in self._events[session_id] if e.offset > after][:limit]
            return [
                with_channel_payload(e, self._payloads.get((session_id, e.offset))) for e in page
            ]

    async def create(self, state: SessionState) -> SessionState:
        """Create a session (with any events it carries); an existing one is returned as is."""
        with self._lock:
            if state.id not in self._meta:
                self._meta[state.id] = state.model_copy(update={"events": ()})
                self._events[state.id] = self._split(state.id, state.events)
                self._turns[state.id] = set()
        stored = await self.load(state.id)
        assert stored is not None
        return stored

    async def commit(self, commit: TurnCommit) -> bool:
        """Write the turn atomically; False on replay of a committed turn; `SessionConflict` when
        the version moved (or an event offset is taken)."""
        validate_commit(commit)
        session_id = commit.state.id
        with self._lock:
            if commit.turn_id in self._turns.get(session_id, set()):
                return False
            meta = self._meta.get(session_id)
            stored_version = meta.version if meta is not None else None
            # An absent session counts as version 0: a first turn may create it.
            if (stored_version or 0) != commit.expected_version:
                raise session_conflict(session_id, commit.expected_version, stored_version)
            events = self._events.get(session_id, [])
            taken = {event.offset for event in events} & {e.offset for e in commit.new_events}
            if taken:
                raise session_conflict(
                    session_id,
                    commit.expected_version,
                    stored_version,
                    detail=f"event offset {min(taken)} is already taken",
                )
            masked = {e.offset: e for e in self._split(session_id, commit.masked_events)}
            self._meta[session_id] = commit.state.model_copy(update={"events": ()})
            self._events[session_id] = [
                *(masked.get(e.offset, e) for e in events),
                *self._split(session_id, commit.new_events),
            ]
            self._turns.setdefault(session_id, set()).add(commit.turn_id)
            # A deep copy: the caller may keep mutating its trace dict after the commit.
            self._traces[(session_id, commit.turn_id)] = copy.deepcopy(dict(commit.trace))
        return True

    def _split(self, session_id: str, events: Sequence[Event]) -> list[Event]:
        """Store each event's channel payload beside it, as the DynamoDB store does."""
        for event in events:
            payload = channel_payload(event)
            if payload:
                self._payloads[(session_id, event.offset)] = copy.deepcopy(payload)
        return [without_channel_payload(e) for e in events]

    async def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The trace a committed turn wrote, or None."""
        with self._lock:
            trace = self._traces.get((session_id, turn_id))
            return copy.deepcopy(trace) if trace is not None else None


# --------------------------------------------------------------------------------------------------
# Inbound deduplication and per-customer variables


@dataclass
class _Claim:
    owner: str
    expires_at: int  # epoch seconds
    lease_until: int | None  # None once queued


class InMemoryInboxStore:
    """Inbound event dedup with the `InboxStore` contract: an owner's claim, a lease until it is
    queued, duplicates recognised until the claim expires."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._claims: dict[tuple[str, str], _Claim] = {}
        self._lock = threading.Lock()

    def _now(self) -> int:
        # Whole epoch seconds, like the DynamoDB TTL attribute, so both stores expire alike.
        return int(self._clock.now().timestamp())

    async def claim(
        self, channel: str, event_id: str, ttl_seconds: int, *, owner: str, lease_seconds: int
    ) -> ClaimOutcome:
        """OURS the first time, for the same owner again, over an expired claim or over a lease
        that ran out before the message was queued; else QUEUED or IN_FLIGHT."""
        now = self._now()
        with self._lock:
            held = self._claims.get((channel, event_id))
            if held is not None and held.expires_at > now:
                if held.lease_until is None:
                    return ClaimOutcome.QUEUED
                if held.owner != owner and held.lease_until > now:
                    return ClaimOutcome.IN_FLIGHT
            self._claims[(channel, event_id)] = _Claim(
                owner, now + ttl_seconds, now + lease_seconds
            )
            return ClaimOutcome.OURS

    async def mark_queued(self, channel: str, event_id: str, owner: str) -> bool:
        """CLAIMED → QUEUED, if `owner` still holds the claim."""
        with self._lock:
            held = self._claims.get((channel, event_id))
            if held is None or held.owner != owner:
                return False
            held.lease_until = None
            return True

    async def is_claimed(self, channel: str, event_id: str) -> bool:
        """Whether an unexpired claim exists."""
        with self._lock:
            held = self._claims.get((channel, event_id))
        return held is not None and held.expires_at > self._now()

    async def release(self, channel: str, event_id: str, owner: str) -> None:
        """Drop `owner`'s unqueued claim (the event could not be queued; the channel will
        retry). Another owner's claim, or a queued one, is left alone."""
        with self._lock:
            held = self._claims.get((channel, event_id))
            if held is not None and held.owner == owner and held.lease_until is not None:
                del self._claims[(channel, event_id)]


class InMemoryVariableStore:
    """Context variable values per (agent, customer)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    async def get_variables(self, agent_id: str, customer_id: str) -> dict[str, Any]:
        """All stored values for this customer of this agent (name → value)."""
        with self._lock:
            return copy.deepcopy(self._values.get((agent_id, customer_id), {}))

    async def set_variable(self, agent_id: str, customer_id: str, name: str, value: Any) -> None:
        """Store one JSON value, replacing the previous one."""
        # A JSON round trip, as DynamoDB does: tuples come back as lists, bad types fail here.
        stored = json.loads(json.dumps(value))
        with self._lock:
            self._values.setdefault((agent_id, customer_id), {})[name] = stored

    async def delete_variable(self, agent_id: str, customer_id: str, name: str) -> None:
        """Forget one value; absent names are ignored."""
        with self._lock:
            self._values.get((agent_id, customer_id), {}).pop(name, None)
