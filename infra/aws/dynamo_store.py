"""DynamoDB single-table adapters: agents, sessions, inbound dedup, context variables.

Keys and access patterns are documented in docs/data-model.md; the short version:

    AGENT#{agent}                  VERSION#{version}   immutable snapshot body
    AGENT#{agent}                  PUBLISHED           pointer to the published version
    SESSION#{session}              META                state without events, `version`, `next_offset`
    SESSION#{session}              EVENT#{offset:010d} one event, as a later turn reads it
    SESSION#{session}              PAYLOAD#{offset:010d} what only the channel shows of that event
                                                       (a reply's options, a view); never read
                                                       by a turn (`engine.history.CHANNEL_PAYLOAD`)
    SESSION#{session}              TURN#{turn_id}      marker: this turn is committed
    SESSION#{session}              TRACE#{turn_id}     the turn's trace
    AGENT#{agent}#INFLIGHT#{shard} SESSION#{session}   a session with a journey in flight
                                                       (`infra.aws.in_flight`)
    CUSTOMER#{channel}#{customer}  SESSION#{session}   index: a session this person took part in
    INBOX#{channel}#{event_id}     INBOX               dedup claim: `owner`, `state` CLAIMED → QUEUED,
                                                       `lease_until`, `expires_at` (TTL)
    VARS#{agent}#{customer}        VAR#{name}          one context variable value

Methods are `async def` because the ports are, but they call sync boto3: a Lambda container serves
one request at a time, and aioboto3 neither works under in-process moto nor is cheap to import.
The low-level client is used (not the resource API): it is thread-safe and skips a Decimal
conversion layer we do not need, since every body is JSON text.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from engine.clock import SystemClock
from engine.errors import AgentNotFound, WaypointError
from engine.history import (
    EVENT_PAGE,
    EVENT_WINDOW,
    channel_payload,
    with_channel_payload,
    without_channel_payload,
)
from engine.inbox import ClaimOutcome
from engine.memory import (
    agent_not_found,
    session_conflict,
    validate_commit,
    version_conflict,
    versioned,
)
from engine.model import AgentSnapshot
from engine.ports import Clock, TurnCommit
from engine.session import Event, EventSource, SessionState
from engine.session_index import SessionPage
from engine.versioning import SessionPosition
from infra.aws.clients import BUCKET_ENV, TABLE_ENV, client, required_env
from infra.aws.handoff_index import WaitingSession, handoff_writes, waiting_sessions
from infra.aws.in_flight import in_flight_writes, sessions_in_flight
from infra.aws.retention import Retention
from infra.aws.session_index import index_put, list_index

Item = dict[str, Any]  # a DynamoDB item in low-level attribute-value form

META = "META"
PUBLISHED = "PUBLISHED"
MAX_TRANSACTION_ITEMS = 100  # DynamoDB's TransactWriteItems limit
# meta update + turn marker + trace + the in-flight index entry (`infra.aws.in_flight`) + the
# customer index entry of a turn that creates its session + the session list's summary
# (`infra.aws.session_index`) + the handed-off sessions' entry (`infra.aws.handoff_index`); a
# turn with several new senders adds one index entry each (and one masking earlier turns one
# trace each) and is refused by the transaction-size check
MAX_EVENTS_PER_COMMIT = MAX_TRANSACTION_ITEMS - 7


class ItemTooLarge(WaypointError):
    """A body does not fit a DynamoDB item even gzipped, and no S3 bucket is configured."""


class TurnTooLarge(WaypointError):
    """A commit has more events than one DynamoDB transaction can hold."""


class PublishContention(WaypointError):
    """Concurrent publishes of one agent kept moving its pointer; publish again."""


class SessionIntegrityError(WaypointError):
    """A session's meta item and its event items disagree; the data was edited by hand."""


# --------------------------------------------------------------------------------------------------
# Keys and attribute values


def _key_part(value: str, what: str) -> str:
    # '#' separates key parts; allowing it inside a non-final part would make keys ambiguous.
    if "#" in value:
        raise ValueError(f"{what} must not contain '#': {value!r}")
    return value


def agent_pk(agent_id: str) -> str:
    return f"AGENT#{_key_part(agent_id, 'agent id')}"


def session_pk(session_id: str) -> str:
    return f"SESSION#{session_id}"


def event_sk(offset: int) -> str:
    return f"EVENT#{offset:010d}"  # zero-padded so the sort key orders events numerically


def payload_sk(offset: int) -> str:
    """The side item of an event's channel payload (outside the window Query's key range)."""
    return f"PAYLOAD#{offset:010d}"


def customer_pk(channel: str, customer_id: str) -> str:
    """The index partition of one person on one channel: the sessions they took part in."""
    return f"CUSTOMER#{_key_part(channel, 'channel')}#{customer_id}"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _key(pk: str, sk: str) -> Item:
    return {"pk": _s(pk), "sk": _s(sk)}


def _reason_codes(error: ClientError) -> list[str]:
    reasons = error.response.get("CancellationReasons") or []
    return [reason.get("Code", "None") for reason in reasons]


def _is(error: ClientError, code: str) -> bool:
    return bool(error.response.get("Error", {}).get("Code") == code)


# --------------------------------------------------------------------------------------------------
# Bodies: inline JSON, gzipped, or offloaded to S3


class ItemBodies:
    """Stores JSON text in an item as readable `body` when small, gzipped `body_gz` (Binary) when
    large, and in S3 with a `body_s3` pointer when even the gzip exceeds the item budget
    (DynamoDB items are capped at 400 KB including keys and attribute names)."""

    INLINE_LIMIT = 32 * 1024
    ITEM_BUDGET = 350 * 1024
    ATTRIBUTES = ("body", "body_gz", "body_s3")

    def __init__(self, bucket: str | None, s3: Any = None):
        self._bucket = bucket
        self._s3 = s3

    @property
    def s3(self) -> Any:
        # Created on first use: most Lambdas never offload, and a client costs cold-start time.
        if self._s3 is None:
            self._s3 = client("s3")
        return self._s3

    def encode(self, text: str, s3_key: str) -> Item:
        """Attributes holding `text`; `s3_key` names the object used if it must be offloaded."""
        raw = text.encode()
        if len(raw) <= self.INLINE_LIMIT:
            return {"body": _s(text)}
        packed = gzip.compress(raw)
        if len(packed) <= self.ITEM_BUDGET:
            return {"body_gz": {"B": packed}}
        if not self._bucket:
            raise ItemTooLarge(
                f"{s3_key}: {len(packed)} bytes gzipped exceed the {self.ITEM_BUDGET}-byte item "
                f"budget; set {BUCKET_ENV} so large bodies are offloaded to S3"
            )
        self.s3.put_object(
            Bucket=self._bucket, Key=s3_key, Body=packed, ContentType="application/gzip"
        )
        return {"body_s3": _s(f"s3://{self._bucket}/{s3_key}")}

    def decode(self, item: Item) -> str:
        """The JSON text stored by `encode`."""
        if "body" in item:
            return str(item["body"]["S"])
        if "body_gz" in item:
            return gzip.decompress(item["body_gz"]["B"]).decode()
        bucket, _, key = item["body_s3"]["S"].removeprefix("s3://").partition("/")
        packed = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return gzip.decompress(packed).decode()


def _set_expression(
    attributes: Item, remove: Sequence[str] = ()
) -> tuple[str, dict[str, str], Item]:
    """An UpdateExpression that sets `attributes` and removes `remove`, with placeholder names
    (so reserved words such as `version` are safe)."""
    names = {f"#a{i}": name for i, name in enumerate([*attributes, *remove])}
    by_name = {name: placeholder for placeholder, name in names.items()}
    values = {f":a{i}": value for i, value in enumerate(attributes.values())}
    expression = "SET " + ", ".join(f"{by_name[name]} = :a{i}" for i, name in enumerate(attributes))
    if remove:
        expression += " REMOVE " + ", ".join(by_name[name] for name in remove)
    return expression, names, values


# --------------------------------------------------------------------------------------------------
# Shared table access


class _Table:
    def __init__(self, table_name: str | None, dynamodb: Any):
        self.name = table_name or required_env(TABLE_ENV, "the DynamoDB state table")
        self.ddb = dynamodb or client("dynamodb")

    def get(self, pk: str, sk: str) -> Item | None:
        response = self.ddb.get_item(TableName=self.name, Key=_key(pk, sk), ConsistentRead=True)
        item: Item | None = response.get("Item")
        return item

    def query(self, key_condition: str, values: Item) -> Iterator[Item]:
        """Every item matching the key condition, in sort-key order, across pages."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def transact(self, items: list[Item]) -> None:
        self.ddb.transact_write_items(TransactItems=items)


# --------------------------------------------------------------------------------------------------
# Agents


class SnapshotCache:
    """Warm-container cache of parsed snapshots keyed by (table, agent, version). Safe forever:
    a published version never changes (publishing other content under it is rejected)."""

    def __init__(self, max_entries: int = 32):
        self._entries: OrderedDict[tuple[str, str, str], AgentSnapshot] = OrderedDict()
        self._max = max_entries

    def get(self, key: tuple[str, str, str]) -> AgentSnapshot | None:
        snapshot = self._entries.get(key)
        if snapshot is not None:
            self._entries.move_to_end(key)
        return snapshot

    def put(self, key: tuple[str, str, str], snapshot: AgentSnapshot) -> None:
        self._entries[key] = snapshot
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


WARM_SNAPSHOTS = SnapshotCache()  # module level: survives across invocations of a warm Lambda


class DynamoAgentStore:
    """`AgentStore` port on DynamoDB. A turn costs one consistent GetItem of the pointer; the
    snapshot itself is read and parsed once per warm container and version."""

    def __init__(
        self,
        table_name: str | None = None,
        *,
        dynamodb: Any = None,
        s3: Any = None,
        bucket: str | None = None,
        cache: SnapshotCache | None = None,
        clock: Clock | None = None,
        max_publish_attempts: int = 5,
    ):
        self._table = _Table(table_name, dynamodb)
        self._bodies = ItemBodies(bucket or os.environ.get(BUCKET_ENV), s3)
        self._cache = cache if cache is not None else WARM_SNAPSHOTS
        self._clock = clock or SystemClock()
        self._max_publish_attempts = max_publish_attempts

    async def publish(self, snapshot: AgentSnapshot) -> str:
        """Write the version item and flip the `PUBLISHED` pointer in ONE transaction.

        Same version + same content is idempotent; same version + other content raises
        `InvalidAgentDefinition`. The pointer write is conditional on the revision read just
        before, so concurrent publishes serialize (the loser re-reads and retries)."""
        snapshot = versioned(snapshot)
        pk = agent_pk(snapshot.id)
        now = self._clock.now().isoformat()
        body = self._bodies.encode(
            snapshot.model_dump_json(), f"agents/{snapshot.id}/{snapshot.version}/snapshot.json.gz"
        )
        version_put = {
            "Put": {
                "TableName": self._table.name,
                "Item": {
                    **_key(pk, f"VERSION#{snapshot.version}"),
                    "content_hash": _s(snapshot.content_hash()),
                    "published_at": _s(now),
                    **body,
                },
                "ConditionExpression": "attribute_not_exists(pk) OR content_hash = :hash",
                "ExpressionAttributeValues": {":hash": _s(snapshot.content_hash())},
            }
        }
        for _ in range(self._max_publish_attempts):
            pointer = self._table.get(pk, PUBLISHED)
            revision = int(pointer["revision"]["N"]) if pointer else 0
            pointer_item: Item = {
                **_key(pk, PUBLISHED),
                "version": _s(snapshot.version),
                "revision": _n(revision + 1),
                "published_at": _s(now),
            }
            if pointer:
                pointer_item["previous_version"] = pointer["version"]
            pointer_put: Item = {"TableName": self._table.name, "Item": pointer_item}
            if pointer:
                pointer_put["ConditionExpression"] = "revision = :rev"
                pointer_put["ExpressionAttributeValues"] = {":rev": _n(revision)}
            else:
                pointer_put["ConditionExpression"] = "attribute_not_exists(pk)"
            try:
                self._table.transact([version_put, {"Put": pointer_put}])
            except ClientError as error:
                if not _is(error, "TransactionCanceledException"):
                    raise
                codes = _reason_codes(error)
                if codes and codes[0] == "ConditionalCheckFailed":
                    raise version_conflict(snapshot.id, snapshot.version) from error
                continue  # the pointer moved under us (or a transaction conflict): re-read
            return snapshot.version
        raise PublishContention(
            f"agent {snapshot.id!r}: the published pointer kept changing during "
            f"{self._max_publish_attempts} attempts; another publisher is racing — publish again"
        )

    async def rollback(self, agent_id: str, version: str | None = None) -> tuple[str, str]:
        """Point `PUBLISHED` back at `version` (default: the version published before the
        current one) in one conditional write; returns (from, to). The version must be stored.
        Sessions pinned to the version rolled away from stay on it until their journeys end."""
        pk = agent_pk(agent_id)
        for _ in range(self._max_publish_attempts):
            pointer = self._table.get(pk, PUBLISHED)
            if pointer is None:
                raise agent_not_found(agent_id, None)
            current = str(pointer["version"]["S"])
            target = version or (pointer.get("previous_version") or {}).get("S")
            if not target:
                raise AgentNotFound(
                    f"agent {agent_id!r}: no earlier published version to roll back to; name "
                    "one (`waypoint rollback AGENT VERSION`)"
                )
            if self._table.get(pk, f"VERSION#{target}") is None:
                known = ", ".join(await self.versions(agent_id))
                raise AgentNotFound(
                    f"agent {agent_id!r} has no version {target!r} (stored versions: {known})"
                )
            revision = int(pointer["revision"]["N"])
            item: Item = {
                **_key(pk, PUBLISHED),
                "version": _s(target),
                "previous_version": _s(current),
                "revision": _n(revision + 1),
                "published_at": _s(self._clock.now().isoformat()),
            }
            try:
                self._table.ddb.put_item(
                    TableName=self._table.name,
                    Item=item,
                    ConditionExpression="revision = :rev",
                    ExpressionAttributeValues={":rev": _n(revision)},
                )
            except ClientError as error:
                if _is(error, "ConditionalCheckFailedException"):
                    continue  # a publish raced us: re-read the pointer
                raise
            return current, target
        raise PublishContention(
            f"agent {agent_id!r}: the published pointer kept changing during rollback; try again"
        )

    async def published_version(self, agent_id: str) -> str | None:
        """The published version (one consistent GetItem), or None if never published."""
        pointer = self._table.get(agent_pk(agent_id), PUBLISHED)
        return str(pointer["version"]["S"]) if pointer else None

    async def versions(self, agent_id: str) -> list[str]:
        """Every stored version of the agent, in sort-key order."""
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": _s(agent_pk(agent_id)), ":prefix": _s("VERSION#")},
        )
        return [item["sk"]["S"].removeprefix("VERSION#") for item in items]

    async def get(self, agent_id: str, version: str | None = None) -> AgentSnapshot:
        """The given version, or the published one when `version` is None. Raises AgentNotFound."""
        if "#" in agent_id:  # no agent can be stored under such an id (see `_key_part`)
            raise agent_not_found(agent_id, version)
        resolved = version if version is not None else await self.published_version(agent_id)
        if resolved is None:
            raise agent_not_found(agent_id, None)
        cache_key = (self._table.name, agent_id, resolved)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        item = self._table.get(agent_pk(agent_id), f"VERSION#{resolved}")
        if item is None:
            raise agent_not_found(agent_id, version if version is not None else resolved)
        snapshot = AgentSnapshot.model_validate_json(self._bodies.decode(item))
        self._cache.put(cache_key, snapshot)
        return snapshot


# --------------------------------------------------------------------------------------------------
# Sessions


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
        self._trace_ttl = (
            trace_ttl_seconds if trace_ttl_seconds is not None else self._retention.traces
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

    # ---- writes

    async def create(self, state: SessionState) -> SessionState:
        """Create the session (meta + its events atomically); if it exists, return the stored one."""
        if len(state.events) > MAX_TRANSACTION_ITEMS - 1:
            raise TurnTooLarge(
                f"session {state.id!r}: {len(state.events)} initial events exceed one "
                f"transaction ({MAX_TRANSACTION_ITEMS - 1}); create it empty, then commit them"
            )
        meta = self._meta_update(state, state.events, condition=_ABSENT, creating=True)
        items = [
            meta,
            *self._event_puts(state.id, state.events),
            *self._index_puts(state, {state.customer_id}),
            self._summary_put(state),
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
        update = self._meta_update(state, (), condition=_ABSENT, creating=True)["Update"]
        try:
            self._table.ddb.update_item(**update)
        except ClientError as error:
            if _is(error, "ConditionalCheckFailedException"):
                return False  # it exists already
            raise
        # Its line in the session list is written by its first turn's commit: the webhook may
        # write no other items than these (template.yaml).
        for put in self._index_puts(state, {state.customer_id}):
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
            condition = f"{_ABSENT} OR #a_version = :expected"
        else:
            condition = "#a_version = :expected"
        meta = self._meta_update(
            state,
            commit.new_events,
            condition=condition,
            expected=commit.expected_version,
        )
        marker_item: Item = {
            **_key(pk, f"TURN#{commit.turn_id}"),
            "version": _n(state.version),
            "committed_at": _s(self._clock.now().isoformat()),
            **self._expiry(self._retention.session_idle),
        }
        turn_marker = {
            "Put": {
                "TableName": self._table.name,
                "Item": marker_item,
                "ConditionExpression": _ABSENT,
                "ExpressionAttributeValues": {":now": _n(self._epoch())},
            }
        }
        trace_item = self._trace_item(state.id, commit.turn_id, commit.trace)
        items = [
            meta,
            turn_marker,
            {"Put": {"TableName": self._table.name, "Item": trace_item}},
            *self._event_puts(state.id, commit.new_events),
            # Earlier events with a secret masked replace themselves in the same transaction:
            # the clear text and its mask are never both stored after the commit.
            *self._event_puts(state.id, commit.masked_events, rewrite=True),
            # and the traces of their turns, whose recorded prompts quote them
            *(
                {
                    "Put": {
                        "TableName": self._table.name,
                        "Item": self._trace_item(state.id, t, trace),
                    }
                }
                for t, trace in commit.masked_traces.items()
            ),
            # Last, so the cancellation reasons of the items above keep their positions.
            *in_flight_writes(self._table.name, commit, self._epoch()),
            *handoff_writes(self._table.name, commit, self._epoch(), self._clock.now().isoformat()),
            *self._index_puts(state, _people(commit)),
            self._summary_put(state, commit.new_events),
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
        update = self._meta_update(
            bumped, (), condition="#a_version = :expected", expected=expected_version
        )["Update"]
        try:
            self._table.ddb.update_item(**update)
        except ClientError as error:
            if _is(error, "ConditionalCheckFailedException"):
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

    def _meta_update(
        self,
        state: SessionState,
        new_events: Sequence[Event],
        *,
        condition: str,
        expected: int | None = None,
        creating: bool = False,
    ) -> Item:
        # Defaults left out: an empty field costs read bytes on every turn and decodes the same.
        body = self._bodies.encode(
            state.model_dump_json(exclude={"events"}, exclude_defaults=True),
            f"sessions/{state.id}/state.json.gz",
        )
        attributes: Item = {
            "version": _n(state.version),
            "agent_id": _s(state.agent_id),
            "customer_id": _s(state.customer_id),
            "updated_at": _s(self._clock.now().isoformat()),
            **body,
            # Every write pushes an idle session's expiry back.
            **self._expiry(self._retention.session_idle),
        }
        if new_events:
            attributes["next_offset"] = _n(new_events[-1].offset + 1)
        elif creating:  # over an expired session's META too: its history does not carry over
            attributes["next_offset"] = _n(0)
        stale = [name for name in ItemBodies.ATTRIBUTES if name not in body]
        expression, names, values = _set_expression(attributes, stale)
        if "#a_version" in condition:  # DynamoDB rejects unused placeholder names
            names["#a_version"] = "version"
        if expected is not None:
            values[":expected"] = _n(expected)
        if ":now" in condition:
            values[":now"] = _n(self._epoch())
        return {
            "Update": {
                "TableName": self._table.name,
                "Key": _key(session_pk(state.id), META),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _event_puts(
        self, session_id: str, events: Sequence[Event], *, rewrite: bool = False
    ) -> list[Item]:
        pk = session_pk(session_id)
        now = self._epoch()
        puts = []
        for event in events:
            payload = channel_payload(event)
            if payload:  # beside the event: the window Query never reads (or pays for) it
                puts.append(self._payload_put(session_id, event.offset, payload))
            put: Item = {
                "TableName": self._table.name,
                "Item": {
                    **_key(pk, event_sk(event.offset)),
                    **self._bodies.encode(
                        without_channel_payload(event).model_dump_json(),
                        f"sessions/{session_id}/events/{event.offset:010d}.json.gz",
                    ),
                    **self._expiry(self._retention.events),
                },
                # A new event may take the offset of an expired one (of a session that expired
                # and started afresh); a rewrite replaces a live one.
                "ConditionExpression": "attribute_exists(pk)" if rewrite else _ABSENT,
            }
            if not rewrite:
                put["ExpressionAttributeValues"] = {":now": _n(now)}
            puts.append({"Put": put})
        return puts

    def _payload_put(self, session_id: str, offset: int, payload: dict[str, Any]) -> Item:
        return {
            "Put": {
                "TableName": self._table.name,
                "Item": {
                    **_key(session_pk(session_id), payload_sk(offset)),
                    **self._bodies.encode(
                        json.dumps(payload, default=str),
                        f"sessions/{session_id}/payloads/{offset:010d}.json.gz",
                    ),
                    **self._expiry(self._retention.events),
                },
            }
        }

    def _index_puts(self, state: SessionState, people: set[str]) -> list[Item]:
        """The customer index entries of `people` for this session (idempotent puts), so that
        erasing one person finds every session they took part in."""
        return [
            {
                "Put": {
                    "TableName": self._table.name,
                    "Item": {
                        **_key(customer_pk(state.channel, person), f"SESSION#{state.id}"),
                        "session_id": _s(state.id),
                        **self._expiry(self._retention.session_idle),
                    },
                }
            }
            for person in sorted(people)
            if person
        ]

    def _trace_item(self, session_id: str, turn_id: str, trace: Mapping[str, Any]) -> Item:
        item: Item = {
            **_key(session_pk(session_id), f"TRACE#{turn_id}"),
            **self._bodies.encode(
                json.dumps(trace, default=str), f"sessions/{session_id}/traces/{turn_id}.json.gz"
            ),
        }
        if self._trace_ttl is not None:
            item["expires_at"] = _n(self._epoch() + self._trace_ttl)
        return item

    def _summary_put(self, state: SessionState, new_events: Sequence[Event] = ()) -> Item:
        """The session's line in its agent's session list (`infra.aws.session_index`)."""
        expiry = self._expiry(self._retention.session_idle)
        return index_put(self._table.name, state, expiry, new_events)

    async def list_sessions(
        self, agent_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> SessionPage:
        """A page of the agent's session summaries: one Query (`engine.session_index`)."""
        return list_index(
            self._table.ddb, self._table.name, agent_id,
            limit=limit, cursor=cursor, now_epoch=self._epoch(),
        )  # fmt: skip

    def _expiry(self, ttl: int | None) -> Item:
        return {"expires_at": _n(self._epoch() + ttl)} if ttl is not None else {}

    def _epoch(self) -> int:
        return int(self._clock.now().timestamp())

    def _expired(self, item: Item) -> bool:
        return "expires_at" in item and int(item["expires_at"]["N"]) <= self._epoch()


_ABSENT = "attribute_not_exists(pk) OR expires_at <= :now"  # TTL deletes lazily: expired = absent


def _people(commit: TurnCommit) -> set[str]:
    """Who this turn adds to the session's index: the senders of its customer messages other
    than the session's customer (indexed when the session was created), and the customer too
    when the turn may be creating the session."""
    state = commit.state
    people = {
        str(e.data["sender"])
        for e in commit.new_events
        if e.source is EventSource.CUSTOMER and e.data.get("sender")
    } - {state.customer_id}
    if commit.expected_version == 0:
        people.add(state.customer_id)
    return people


# --------------------------------------------------------------------------------------------------
# Inbound dedup and context variables


CLAIMED = "CLAIMED"
QUEUED = "QUEUED"
_INBOX_NAMES = {"#state": "state", "#owner": "owner"}  # both DynamoDB reserved words


class DynamoInboxStore:
    """Inbound event dedup: one conditional write per (channel, event id), with a TTL.

    A claim belongs to an `owner` (one webhook request) and is CLAIMED until that owner has
    queued the message and marked it QUEUED. The claim's condition lets the same owner write it
    again — botocore retries a PutItem whose response was lost, and that retry must not read as
    a duplicate of itself — and lets another owner take over a CLAIMED item whose lease ran out
    (the first request died between the claim and the enqueue). A QUEUED claim is a duplicate
    until it expires. Items written before claims had a state read as QUEUED.

    DynamoDB deletes expired items lazily (moto never does), so every read and the claim's
    condition treat `expires_at <= now` as absent."""

    def __init__(
        self, table_name: str | None = None, *, dynamodb: Any = None, clock: Clock | None = None
    ):
        self._table = _Table(table_name, dynamodb)
        self._clock = clock or SystemClock()

    def _now(self) -> int:
        return int(self._clock.now().timestamp())

    @staticmethod
    def _pk(channel: str, event_id: str) -> str:
        return f"INBOX#{_key_part(channel, 'channel')}#{event_id}"

    async def claim(
        self, channel: str, event_id: str, ttl_seconds: int, *, owner: str, lease_seconds: int
    ) -> ClaimOutcome:
        """OURS the first time, for the same owner again, over an expired claim, or over a lease
        that ran out before the message was queued; QUEUED for a duplicate; IN_FLIGHT while
        another owner's live claim has not been queued yet."""
        now = self._now()
        key = _key(self._pk(channel, event_id), "INBOX")
        try:
            self._table.ddb.put_item(
                TableName=self._table.name,
                Item={
                    **key,
                    "owner": _s(owner),
                    "state": _s(CLAIMED),
                    "lease_until": _n(now + lease_seconds),
                    "expires_at": _n(now + ttl_seconds),
                    "claimed_at": _n(now),
                },
                ConditionExpression=(
                    "attribute_not_exists(pk) OR expires_at <= :now OR "
                    "(#state = :claimed AND (#owner = :me OR lease_until <= :now))"
                ),
                ExpressionAttributeNames=_INBOX_NAMES,
                ExpressionAttributeValues={
                    ":now": _n(now),
                    ":claimed": _s(CLAIMED),
                    ":me": _s(owner),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not _is(error, "ConditionalCheckFailedException"):
                raise
            held = error.response.get("Item") or self._table.get(key["pk"]["S"], "INBOX")
            if held is None:  # released in between: claim it afresh
                return await self.claim(
                    channel, event_id, ttl_seconds, owner=owner, lease_seconds=lease_seconds
                )
            state = held.get("state", {}).get("S", QUEUED)
            return ClaimOutcome.IN_FLIGHT if state == CLAIMED else ClaimOutcome.QUEUED
        return ClaimOutcome.OURS

    async def mark_queued(self, channel: str, event_id: str, owner: str) -> bool:
        """CLAIMED → QUEUED, if `owner` still holds the claim (False if another took it over)."""
        try:
            self._table.ddb.update_item(
                TableName=self._table.name,
                Key=_key(self._pk(channel, event_id), "INBOX"),
                UpdateExpression="SET #state = :queued REMOVE lease_until",
                ConditionExpression="#owner = :me",
                ExpressionAttributeNames=_INBOX_NAMES,
                ExpressionAttributeValues={":queued": _s(QUEUED), ":me": _s(owner)},
            )
        except ClientError as error:
            if _is(error, "ConditionalCheckFailedException"):
                return False
            raise
        return True

    async def is_claimed(self, channel: str, event_id: str) -> bool:
        """Whether an unexpired claim exists."""
        item = self._table.get(self._pk(channel, event_id), "INBOX")
        return item is not None and int(item["expires_at"]["N"]) > self._now()

    async def release(self, channel: str, event_id: str, owner: str) -> None:
        """Drop `owner`'s unqueued claim, e.g. when the event could not be enqueued and the
        channel will retry. Another owner's claim, or a queued one, is left alone."""
        try:
            self._table.ddb.delete_item(
                TableName=self._table.name,
                Key=_key(self._pk(channel, event_id), "INBOX"),
                ConditionExpression="#owner = :me AND #state = :claimed",
                ExpressionAttributeNames=_INBOX_NAMES,
                ExpressionAttributeValues={":me": _s(owner), ":claimed": _s(CLAIMED)},
            )
        except ClientError as error:
            if not _is(error, "ConditionalCheckFailedException"):
                raise


class DynamoVariableStore:
    """Context variable values per (agent, customer), one item per variable so that concurrent
    writers of different variables never overwrite each other."""

    def __init__(self, table_name: str | None = None, *, dynamodb: Any = None):
        self._table = _Table(table_name, dynamodb)

    @staticmethod
    def _pk(agent_id: str, customer_id: str) -> str:
        return f"VARS#{_key_part(agent_id, 'agent id')}#{customer_id}"

    async def get_variables(self, agent_id: str, customer_id: str) -> dict[str, Any]:
        """All stored values for this customer of this agent (name → value); one Query."""
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": _s(self._pk(agent_id, customer_id)), ":prefix": _s("VAR#")},
        )
        return {item["sk"]["S"][4:]: json.loads(item["value"]["S"]) for item in items}

    async def set_variable(self, agent_id: str, customer_id: str, name: str, value: Any) -> None:
        """Store one JSON value, replacing the previous one."""
        self._table.ddb.put_item(
            TableName=self._table.name,
            Item={
                **_key(self._pk(agent_id, customer_id), f"VAR#{name}"),
                "value": _s(json.dumps(value)),
            },
        )

    async def delete_variable(self, agent_id: str, customer_id: str, name: str) -> None:
        """Forget one value; absent names are ignored."""
        self._table.ddb.delete_item(
            TableName=self._table.name, Key=_key(self._pk(agent_id, customer_id), f"VAR#{name}")
        )


def clear_warm_caches() -> None:
    """Forget cached snapshots (tests; a real container never needs to)."""
    WARM_SNAPSHOTS.clear()


__all__ = [
    "WARM_SNAPSHOTS",
    "DynamoAgentStore",
    "DynamoInboxStore",
    "DynamoSessionStore",
    "DynamoVariableStore",
    "ItemBodies",
    "ItemTooLarge",
    "PublishContention",
    "SessionIntegrityError",
    "SnapshotCache",
    "TurnTooLarge",
    "clear_warm_caches",
]
