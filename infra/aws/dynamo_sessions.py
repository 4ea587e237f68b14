"""The `SessionStore` port on DynamoDB: a session's META item, its events, turn markers and
traces under one partition key, read as a bounded window and written by one transaction per turn.
Its items are built in `infra.aws.dynamo_session_items`; keys and bodies in
`infra.aws.dynamo_table`."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from engine.clock import SystemClock
from engine.errors import WaypointError
from engine.memory.stores import session_conflict, validate_commit
from engine.ports import Clock, TurnCommit
from engine.sessions.history import (
    EVENT_PAGE,
    EVENT_WINDOW,
    with_channel_payload,
    without_channel_payload,
)
from engine.sessions.index import SessionPage
from engine.sessions.session import Event, SessionState
from engine.versioning.pinning import SessionPosition
from infra.aws.clients import BUCKET_ENV
from infra.aws.dynamo_session_items import ABSENT, SessionItems, new_people
from infra.aws.dynamo_table import (
    ERASED_SK,
    MAX_TRANSACTION_ITEMS,
    META,
    Item,
    ItemBodies,
    _is,
    _key,
    _n,
    _reason_codes,
    _s,
    _Table,
    erasure_pk,
    event_sk,
    payload_sk,
    session_pk,
)
from infra.aws.handoff_index import (
    WaitingSession,
    handoff_writes,
    open_handoff_writes,
    waiting_sessions,
)
from infra.aws.in_flight import in_flight_writes, sessions_in_flight
from infra.aws.retention import Retention
from infra.aws.session_index import list_index

# meta update + turn marker + trace + the in-flight index entry (`infra.aws.in_flight`) + the
# customer index entry of a turn that creates its session + the session list's summary
# (`infra.aws.session_index`) + the handed-off sessions' entry (`infra.aws.handoff_index`); a
# turn with several new senders adds one index entry each (and one masking earlier turns one
# trace each) and is refused by the transaction-size check
MAX_EVENTS_PER_COMMIT = MAX_TRANSACTION_ITEMS - 7


class TurnTooLarge(WaypointError):
    """A commit has more events than one DynamoDB transaction can hold."""


class SessionIntegrityError(WaypointError):
    """A session's meta item and its event items disagree; the data was edited by hand."""


class DynamoSessionStore:
    """`SessionStore` port on DynamoDB: one meta item plus one item per event, per trace and per
    committed turn, all under the session's partition key. `commit` is one TransactWriteItems."""

    def __init__(
        self,
        table_name: str | None = None,
        *,
        dynamodb: Any = None,
        s3: Any = None,
        bucket: str | None = None,
        clock: Clock | None = None,
        trace_ttl_seconds: int | None = None,
        event_window: int = EVENT_WINDOW,
        retention: Retention | None = None,
    ):
        self._table = _Table(table_name, dynamodb)
        self._bodies = ItemBodies(bucket or os.environ.get(BUCKET_ENV), s3)
        self._clock = clock or SystemClock()
        self._retention = retention if retention is not None else Retention.from_env()
        trace_ttl = trace_ttl_seconds if trace_ttl_seconds is not None else self._retention.traces
        self._items = SessionItems(
            self._table.name, self._bodies, self._clock, self._retention, trace_ttl
        )
        self._window = event_window

    # ---- reads

    async def load(self, session_id: str) -> SessionState | None:
        """Meta item (consistent GetItem) + its last `EVENT_WINDOW` events (one consistent
        Query of a bounded key range), or None. The older events stay stored; a turn's reads
        do not grow with the session (the state carries what it needs of them)."""
        pk = session_pk(session_id)
        meta = self._table.get(pk, META)
        if meta is None or self._expired(meta):  # an idle session past its TTL is gone
            return None
        next_offset = int(meta.get("next_offset", _n(0))["N"])
        events = self._window_before(session_id, next_offset)
        data = json.loads(self._bodies.decode(meta))
        data["version"] = int(meta["version"]["N"])  # the attribute the conditions check wins
        data["events"] = events
        return SessionState.model_validate(data)

    async def events(
        self, session_id: str, *, after: int = -1, limit: int = EVENT_PAGE
    ) -> list[Event] | None:
        """Up to `limit` events with an offset above `after`, in order (one Query page); None
        for an unknown session. For the management API's history, never for a turn."""
        pk = session_pk(session_id)
        meta = self._table.get(pk, META)
        if meta is None or self._expired(meta):
            return None
        response = self._table.ddb.query(
            TableName=self._table.name,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
            ExpressionAttributeValues={
                ":pk": _s(pk),
                ":first": _s(event_sk(max(after + 1, 0))),
                ":last": _s(event_sk(10**10 - 1)),
            },
            ConsistentRead=True,
            Limit=max(1, limit),
        )
        # Expired events read as absent (TTL deletes lazily): the oldest go first.
        events = [self._decode_event(i) for i in response["Items"] if not self._expired(i)]
        if not events:
            return events
        payloads = {
            int(item["sk"]["S"].removeprefix("PAYLOAD#")): json.loads(self._bodies.decode(item))
            for item in self._table.query(
                "pk = :pk AND sk BETWEEN :first AND :last",
                {
                    ":pk": _s(pk),
                    ":first": _s(payload_sk(events[0].offset)),
                    ":last": _s(payload_sk(events[-1].offset)),
                },
            )
        }
        return [with_channel_payload(e, payloads.get(e.offset)) for e in events]

    def _decode_event(self, item: Item) -> Event:
        # Items written before payloads were stored apart may still hold one: a turn never sees it.
        return without_channel_payload(Event.model_validate_json(self._bodies.decode(item)))

    def _window_before(self, session_id: str, next_offset: int) -> list[Event]:
        if next_offset == 0:
            return []
        # Bounded by the meta's next_offset: events of a turn committed after the meta was read
        # are left out, so meta and events always describe the same version.
        first = max(0, next_offset - self._window)
        items = self._table.query(
            "pk = :pk AND sk BETWEEN :first AND :last",
            {
                ":pk": _s(session_pk(session_id)),
                ":first": _s(event_sk(first)),
                ":last": _s(event_sk(next_offset - 1)),
            },
        )
        events = [self._decode_event(item) for item in items if not self._expired(item)]
        offsets = [event.offset for event in events]
        # Retention expires a session's oldest events first: what is left is the newest ones.
        if offsets != list(range(next_offset - len(offsets), next_offset)):
            missing = sorted(set(range(first, next_offset)) - set(offsets))
            raise SessionIntegrityError(
                f"session {session_id!r}: the META item counts events up to offset "
                f"{next_offset - 1} but EVENT# items {missing[:10]} are missing; restore them "
                "(point-in-time recovery) or repair the META item"
            )
        return events

    async def sessions_in_flight(self, agent_id: str) -> list[SessionPosition]:
        """Sessions of `agent_id` with a journey in flight (`infra.aws.in_flight`)."""
        return list(sessions_in_flight(self._table.ddb, self._table.name, agent_id, self._epoch()))

    async def waiting_for_person(self, agent_id: str | None = None) -> list[WaitingSession]:
        """Sessions handed off to a person, oldest first (`infra.aws.handoff_index`)."""
        return list(
            waiting_sessions(self._table.ddb, self._table.name, self._epoch(), agent_id=agent_id)
        )

    async def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The trace of a committed turn, or None (unknown turn, or expired)."""
        item = self._table.get(session_pk(session_id), f"TRACE#{turn_id}")
        if item is None or self._expired(item):
            return None
        trace: dict[str, Any] = json.loads(self._bodies.decode(item))
        return trace

    async def erased_at(self, channel: str, customer_id: str) -> datetime | None:
        """When `(channel, customer_id)` was last erased: their tombstone (written by
        `infra.aws.erasure`), while it lives; None otherwise. One GetItem."""
        item = self._table.get(erasure_pk(channel, customer_id), ERASED_SK)
        if item is None or self._expired(item):
            return None
        return datetime.fromisoformat(item["erased_at"]["S"])

    # ---- writes

    async def create(self, state: SessionState) -> SessionState:
        """Create the session (meta + its events atomically); if it exists, return the stored one."""
        if len(state.events) > MAX_TRANSACTION_ITEMS - 1:
            raise TurnTooLarge(
                f"session {state.id!r}: {len(state.events)} initial events exceed one "
                f"transaction ({MAX_TRANSACTION_ITEMS - 1}); create it empty, then commit them"
            )
        meta = self._items.meta_update(state, state.events, condition=ABSENT, creating=True)
        items = [
            meta,
            *self._items.event_puts(state.id, state.events),
            *self._items.index_puts(state, {state.customer_id}),
            self._items.summary_put(state),
        ]
        if len(items) > MAX_TRANSACTION_ITEMS:
            raise TurnTooLarge(
                f"session {state.id!r}: its initial events need {len(items)} items, more than "
                f"one transaction ({MAX_TRANSACTION_ITEMS}); create it empty, then commit them"
            )
        try:
            self._table.transact(items)
        except ClientError as error:
            if not _is(error, "TransactionCanceledException"):
                raise
        stored = await self.load(state.id)
        if stored is None:  # cancelled for another reason than "exists": surface it
            raise SessionIntegrityError(f"session {state.id!r} could not be created; retry")
        return stored

    async def ensure(self, state: SessionState) -> bool:
        """Create the session if it does not exist; True when this call created it.

        Unlike `create`, nothing is read back: the webhook only needs the session to exist, and
        reading it would mean reading bodies offloaded to S3, which the webhook may not do."""
        if state.events:
            raise ValueError("ensure() creates empty sessions only; use create() with events")
        update = self._items.meta_update(state, (), condition=ABSENT, creating=True)["Update"]
        try:
            self._table.ddb.update_item(**update)
        except ClientError as error:
            if _is(error, "ConditionalCheckFailedException"):
                return False  # it exists already
            raise
        # Its line in the session list is written by its first turn's commit: the webhook may
        # write no other items than these (template.yaml).
        for put in self._items.index_puts(state, {state.customer_id}):
            self._table.ddb.put_item(**put["Put"])
        return True

    async def commit(self, commit: TurnCommit) -> bool:
        """One TransactWriteItems: meta update on `version = expected`, TURN marker (must not
        exist), the trace and the new events (offsets must be free).

        Returns False if this turn was committed before; raises `SessionConflict` if another turn
        moved the version (or took the event offsets) first."""
        validate_commit(commit)
        state = commit.state
        written = len(commit.new_events) + len(commit.masked_events)
        if written > MAX_EVENTS_PER_COMMIT:
            raise TurnTooLarge(
                f"turn {commit.turn_id!r}: {written} events (new and masked) exceed "
                f"{MAX_EVENTS_PER_COMMIT} per commit; split the turn's events"
            )
        pk = session_pk(state.id)
        if commit.expected_version == 0:
            # A first turn may create the session (or replace one expired), or follow `create()`.
            condition = f"{ABSENT} OR #a_version = :expected"
        else:
            condition = "#a_version = :expected"
        meta = self._items.meta_update(
            state,
            commit.new_events,
            condition=condition,
            expected=commit.expected_version,
        )
        marker_item: Item = {
            **_key(pk, f"TURN#{commit.turn_id}"),
            "version": _n(state.version),
            "committed_at": _s(self._clock.now().isoformat()),
            **self._items.expiry(self._retention.session_idle),
        }
        turn_marker = {
            "Put": {
                "TableName": self._table.name,
                "Item": marker_item,
                "ConditionExpression": ABSENT,
                "ExpressionAttributeValues": {":now": _n(self._epoch())},
            }
        }
        trace_item = self._items.trace_item(state.id, commit.turn_id, commit.trace)
        items = [
            meta,
            turn_marker,
            {"Put": {"TableName": self._table.name, "Item": trace_item}},
            *self._items.event_puts(state.id, commit.new_events),
            # Earlier events with a secret masked replace themselves in the same transaction:
            # the clear text and its mask are never both stored after the commit.
            *self._items.event_puts(state.id, commit.masked_events, rewrite=True),
            # and the traces of their turns, whose recorded prompts quote them
            *(
                {
                    "Put": {
                        "TableName": self._table.name,
                        "Item": self._items.trace_item(state.id, t, trace),
                    }
                }
                for t, trace in commit.masked_traces.items()
            ),
            # Last, so the cancellation reasons of the items above keep their positions.
            *in_flight_writes(self._table.name, commit, self._epoch()),
            *handoff_writes(self._table.name, commit, self._epoch(), self._clock.now().isoformat()),
            *self._items.index_puts(state, new_people(commit)),
            self._items.summary_put(state, commit.new_events),
        ]
        if len(items) > MAX_TRANSACTION_ITEMS:
            raise TurnTooLarge(
                f"turn {commit.turn_id!r}: {len(items)} items exceed one transaction "
                f"({MAX_TRANSACTION_ITEMS}); split the turn's events"
            )
        try:
            self._table.transact(items)
        except ClientError as error:
            if not _is(error, "TransactionCanceledException"):
                raise
            return self._explain_cancellation(error, commit)
        return True

    async def replace_state(self, state: SessionState, *, expected_version: int) -> None:
        """Rewrite the session's state (not its events) if its version is still
        `expected_version`, bumping the version so that a turn computed on the old state
        conflicts and reloads. For administrative changes (erasing a participant)."""
        bumped = state.model_copy(update={"version": expected_version + 1})
        meta = self._items.meta_update(
            bumped, (), condition="#a_version = :expected", expected=expected_version
        )
        # The handed-off sessions' entry copies the state's customer: it follows the state.
        now = self._clock.now()
        handoff = open_handoff_writes(self._table.name, bumped, self._epoch(), now.isoformat())
        try:
            self._table.transact([meta, *handoff])
        except ClientError as error:
            codes = _reason_codes(error)
            if _is(error, "TransactionCanceledException") and codes[:1] in (
                [],
                ["ConditionalCheckFailed"],
            ):
                raise session_conflict(state.id, expected_version, None) from error
            raise

    def _explain_cancellation(self, error: ClientError, commit: TurnCommit) -> bool:
        """False for an idempotent replay; otherwise raise `SessionConflict`."""
        codes = _reason_codes(error)
        pk = session_pk(commit.state.id)
        # Reasons are positional (meta, turn marker, …). Without them, ask the table directly.
        replay = (
            codes[1] == "ConditionalCheckFailed"
            if len(codes) > 1
            else self._table.get(pk, f"TURN#{commit.turn_id}") is not None
        )
        if replay:
            return False
        if codes and not any(c in ("ConditionalCheckFailed", "TransactionConflict") for c in codes):
            raise error  # e.g. validation or throughput: not a concurrency outcome
        reasons = error.response.get("CancellationReasons") or [{}]
        old_version = reasons[0].get("Item", {}).get("version", {}).get("N")
        detail = None
        if "TransactionConflict" in codes:
            detail = "a concurrent transaction was writing this session"
        elif codes and codes[0] != "ConditionalCheckFailed":  # the version matched: offsets taken
            first = commit.new_events[0].offset if commit.new_events else 0
            detail = f"event offsets from {first} are already taken"
        raise session_conflict(
            commit.state.id,
            commit.expected_version,
            int(old_version) if old_version is not None else None,
            detail=detail,
        ) from error

    async def list_sessions(
        self, agent_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> SessionPage:
        """A page of the agent's session summaries: one Query (`engine.sessions.index`)."""
        return list_index(
            self._table.ddb, self._table.name, agent_id,
            limit=limit, cursor=cursor, now_epoch=self._epoch(),
        )  # fmt: skip

    def _epoch(self) -> int:
        return int(self._clock.now().timestamp())

    def _expired(self, item: Item) -> bool:
        return "expires_at" in item and int(item["expires_at"]["N"]) <= self._epoch()
