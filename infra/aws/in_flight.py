"""The index of sessions with a journey in flight, per agent: what a publish may strand.

`waypoint publish` / `POST /agents` must say how many sessions are in a journey or at a step the
new version removes, before it flips the pointer. Scanning the table would read every event of
every session; instead each turn's commit maintains one small item per session in flight, in
the same transaction as the turn (so the index is never ahead of or behind the session):

    AGENT#{agent}#INFLIGHT#{shard}   SESSION#{session}   agent_version, journeys (JSON), expires_at

A session leaving its last journey overwrites its item with an empty tombstone (`journeys` =
`{}`) that TTL deletes a day later — a Put, so turns need no DeleteItem permission. The 16
shards (by a hash of the session id) spread a busy agent's writes over 16 partition keys; a
publish reads them with paginated Queries, so its cost grows with the sessions in flight now,
never with the table. Entries of sessions abandoned mid-journey expire after
`IN_FLIGHT_TTL_SECONDS` (30 days): such a session is then no longer counted, though it stays
pinned (`engine.versioning.pinning`) if the customer ever comes back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from engine.ports import TurnCommit
from engine.versioning.pinning import SessionPosition, session_position

Item = dict[str, Any]

SHARDS = 16
IN_FLIGHT_TTL_SECONDS = 30 * 24 * 3600
TOMBSTONE_TTL_SECONDS = 24 * 3600


def shard_pk(agent_id: str, shard: int) -> str:
    return f"AGENT#{agent_id}#INFLIGHT#{shard:02d}"


def shard_of(session_id: str) -> int:
    return int(hashlib.sha256(session_id.encode()).hexdigest()[:8], 16) % SHARDS


def in_flight_writes(table: str, commit: TurnCommit, now_epoch: int) -> list[Item]:
    """The transaction item that keeps the index true after `commit` (none when the session
    was not and is not in flight: most turns of most sessions)."""
    state = commit.state
    position = session_position(state)
    if position is None and not commit.in_flight_before:
        return []
    journeys = position.journeys if position is not None else {}
    ttl = IN_FLIGHT_TTL_SECONDS if position is not None else TOMBSTONE_TTL_SECONDS
    item: Item = {
        "pk": {"S": shard_pk(state.agent_id, shard_of(state.id))},
        "sk": {"S": f"SESSION#{state.id}"},
        "agent_version": {"S": state.agent_version or ""},
        "journeys": {"S": json.dumps(journeys, sort_keys=True)},
        "expires_at": {"N": str(now_epoch + ttl)},
    }
    return [{"Put": {"TableName": table, "Item": item}}]


def sessions_in_flight(
    ddb: Any, table: str, agent_id: str, now_epoch: int
) -> Iterator[SessionPosition]:
    """Every session of `agent_id` with a journey in flight (paginated Queries, 16 shards)."""
    for shard in range(SHARDS):
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": shard_pk(agent_id, shard)}},
        }
        while True:
            page = ddb.query(**kwargs)
            for item in page.get("Items", []):
                journeys = json.loads(item["journeys"]["S"])
                if not journeys or int(item["expires_at"]["N"]) <= now_epoch:
                    continue  # a tombstone, or expired but not yet deleted by TTL
                yield SessionPosition(
                    session_id=item["sk"]["S"].removeprefix("SESSION#"),
                    agent_version=item["agent_version"]["S"],
                    journeys=journeys,
                )
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
