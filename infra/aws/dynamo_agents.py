"""The `AgentStore` port on DynamoDB: immutable version items, the `PUBLISHED` pointer that
publish and rollback move, and the warm-container cache of parsed snapshots. Keys and bodies:
`infra.aws.dynamo_table`."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from botocore.exceptions import ClientError

from engine.clock import SystemClock
from engine.errors import AgentNotFound, WaypointError
from engine.memory.stores import agent_not_found, version_conflict, versioned
from engine.model import AgentSnapshot
from engine.ports import Clock
from infra.aws.clients import BUCKET_ENV
from infra.aws.dynamo_table import (
    PUBLISHED,
    Item,
    ItemBodies,
    _is,
    _key,
    _n,
    _reason_codes,
    _s,
    _Table,
    agent_pk,
)


class PublishContention(WaypointError):
    """Concurrent publishes of one agent kept moving its pointer; publish again."""


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


def clear_warm_caches() -> None:
    """Forget cached snapshots (tests; a real container never needs to)."""
    WARM_SNAPSHOTS.clear()
