"""In-memory stores with exactly the semantics of the DynamoDB adapters.

They back the engine's unit tests and the offline demo, and they run the same contract tests as
`infra.aws.dynamo_*` (tests/contracts/), so a behavior pinned here holds in production:
optimistic concurrency (`SessionConflict`), idempotent replay of a turn (`commit` → False),
immutable agent versions, inbox claims that expire.

The session store is in `engine.memory.sessions` (with retention and erasure); the rules both
implementations share (`validate_commit`, `versioned`, `version_conflict`, `session_conflict`)
are in `engine.sessions.store_rules`. Both are importable from here.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass
from typing import Any

from engine.clock import SystemClock
from engine.errors import AgentNotFound
from engine.memory.sessions import InMemoryErasureReport, InMemorySessionStore
from engine.model import AgentSnapshot
from engine.ports import Clock
from engine.sessions.inbox import ClaimOutcome
from engine.sessions.store_rules import (
    agent_not_found,
    session_conflict,
    validate_commit,
    version_conflict,
    versioned,
)

# --------------------------------------------------------------------------------------------------
# Agents


class InMemoryAgentStore:
    """`AgentStore` in a dict: versions are immutable, publish flips the published pointer."""

    def __init__(self) -> None:
        self._versions: dict[tuple[str, str], AgentSnapshot] = {}
        self._published: dict[str, str] = {}
        self._previous: dict[str, str] = {}  # the version published before the current one
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
            if snapshot.id in self._published:
                self._previous[snapshot.id] = self._published[snapshot.id]
            self._published[snapshot.id] = snapshot.version
        return snapshot.version

    async def rollback(self, agent_id: str, version: str | None = None) -> tuple[str, str]:
        """Point the agent back at `version` (default: the version published before the current
        one); returns (from, to). As `DynamoAgentStore.rollback`: the version must be stored,
        and rolling back again flips forward."""
        with self._lock:
            current = self._published.get(agent_id)
            if current is None:
                raise agent_not_found(agent_id, None)
            target = version or self._previous.get(agent_id)
            if not target:
                raise AgentNotFound(
                    f"agent {agent_id!r}: no earlier published version to roll back to; name "
                    "one (`waypoint rollback AGENT VERSION`)"
                )
            if (agent_id, target) not in self._versions:
                known = ", ".join(sorted(v for a, v in self._versions if a == agent_id))
                raise AgentNotFound(
                    f"agent {agent_id!r} has no version {target!r} (stored versions: {known})"
                )
            self._published[agent_id], self._previous[agent_id] = target, current
        return current, target

    async def published_version(self, agent_id: str) -> str | None:
        """The published version, or None if never published."""
        with self._lock:
            return self._published.get(agent_id)

    async def versions(self, agent_id: str) -> list[str]:
        """Every stored version of the agent, in the DynamoDB store's (sort-key) order."""
        with self._lock:
            return sorted(v for a, v in self._versions if a == agent_id)

    async def get(self, agent_id: str, version: str | None = None) -> AgentSnapshot:
        """The given version, or the published one. Raises `AgentNotFound`."""
        with self._lock:
            resolved = version if version is not None else self._published.get(agent_id)
            snapshot = self._versions.get((agent_id, resolved)) if resolved else None
        if snapshot is None:
            raise agent_not_found(agent_id, version)
        return snapshot


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
        self._one_moment: set[tuple[str, str]] = set()  # events whose line went out
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

    async def note_one_moment(self, channel: str, event_id: str, ttl_seconds: int) -> bool:
        """True the first time for this event (its "one moment" line goes out), then False."""
        with self._lock:
            if (channel, event_id) in self._one_moment:
                return False
            self._one_moment.add((channel, event_id))
            if (channel, event_id) not in self._claims:
                self._claims[(channel, event_id)] = _Claim("", self._now() + ttl_seconds, None)
            return True

    def forget(self, channel: str, event_id: str) -> bool:
        """Delete a claim whatever its state (erasing the customer who sent it); True if one
        was there."""
        with self._lock:
            return self._claims.pop((channel, event_id), None) is not None


class InMemoryVariableStore:
    """Context variable values per (agent, channel, customer): the same id on two channels is
    two people, with a profile each."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    async def get_variables(self, agent_id: str, channel: str, customer_id: str) -> dict[str, Any]:
        """All stored values for this customer of this agent (name → value)."""
        with self._lock:
            return copy.deepcopy(self._values.get((agent_id, channel, customer_id), {}))

    async def set_variable(
        self, agent_id: str, channel: str, customer_id: str, name: str, value: Any
    ) -> None:
        """Store one JSON value, replacing the previous one."""
        # A JSON round trip, as DynamoDB does: tuples come back as lists, bad types fail here.
        stored = json.loads(json.dumps(value))
        with self._lock:
            self._values.setdefault((agent_id, channel, customer_id), {})[name] = stored

    async def delete_variable(
        self, agent_id: str, channel: str, customer_id: str, name: str
    ) -> None:
        """Forget one value; absent names are ignored."""
        with self._lock:
            self._values.get((agent_id, channel, customer_id), {}).pop(name, None)

    def forget(self, agent_id: str, channel: str, customer_id: str) -> None:
        """Delete every value of one customer of one agent (erasing that customer)."""
        with self._lock:
            self._values.pop((agent_id, channel, customer_id), None)


# --------------------------------------------------------------------------------------------------
# Erasing one customer across the in-memory stores


class InMemoryCustomerErasure:
    """`DELETE /customers/{channel}/{customer}` on the in-memory stores, as
    `infra.aws.erasure.CustomerErasure` does it on the state table: their sessions (whole or
    redacted, `InMemorySessionStore.erase_customer`), the inbox claims of their messages and
    their context variables for the agents of the sessions they opened."""

    def __init__(
        self,
        sessions: InMemorySessionStore,
        *,
        inbox: InMemoryInboxStore | None = None,
        variables: InMemoryVariableStore | None = None,
    ) -> None:
        self._sessions = sessions
        self._inbox = inbox
        self._variables = variables

    async def erase(self, channel: str, customer_id: str) -> InMemoryErasureReport:
        """Erase what the stores hold about `(channel, customer_id)`; idempotent."""
        report = await self._sessions.erase_customer(channel, customer_id)
        prefix = f"{channel}:"  # channel ids are "{channel}:{account}:{event}" (the inbox key)
        if self._inbox is not None:
            for message_id in report.message_ids:
                if message_id.startswith(prefix):
                    forgotten = self._inbox.forget(channel, message_id[len(prefix) :])
                    report.inbox_claims_deleted += int(forgotten)
        if self._variables is not None:
            for agent_id in report.variables_of:
                self._variables.forget(agent_id, channel, customer_id)
        return report


__all__ = [
    "InMemoryAgentStore",
    "InMemoryCustomerErasure",
    "InMemoryErasureReport",
    "InMemoryInboxStore",
    "InMemorySessionStore",
    "InMemoryVariableStore",
    "agent_not_found",
    "session_conflict",
    "validate_commit",
    "version_conflict",
    "versioned",
]
