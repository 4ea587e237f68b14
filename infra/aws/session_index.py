"""The DynamoDB side of `engine.sessions.index`: one item per session under its agent's
partition, `pk = SESSIONS#{agent}`, `sk = SESSION#{session}`, holding the summary as JSON.

It is written in the same transaction as the turn (`DynamoSessionStore.commit`) and with the
session's creation, so the list never shows a session ahead of or behind its state; a listing
is one Query page (never a Scan). It expires with the session (the idle retention), and erasing
a customer's session deletes it (`infra.aws.erasure`).

One partition per agent: its writes are bounded by DynamoDB's per-partition throughput (about a
thousand turns a second for one agent), far above what one Lambda-backed agent serves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.sessions.index import SessionPage, SessionSummary, newest_first, summarize_session
from engine.sessions.session import Event, SessionState

Item = dict[str, Any]
_SK_PREFIX = "SESSION#"


def index_pk(agent_id: str) -> str:
    return f"SESSIONS#{agent_id}"


def index_key(agent_id: str, session_id: str) -> Item:
    """The key of a session's index item (erasure deletes it with the session)."""
    return {"pk": {"S": index_pk(agent_id)}, "sk": {"S": f"{_SK_PREFIX}{session_id}"}}


def index_put(
    table: str, state: SessionState, expiry: Item, new_events: Sequence[Event] = ()
) -> Item:
    """The transaction item writing `state`'s summary (an idempotent overwrite)."""
    summary = summarize_session(state, new_events)
    item: Item = {
        **index_key(state.agent_id, state.id),
        "summary": {"S": summary.model_dump_json()},
        **expiry,
    }
    return {"Put": {"TableName": table, "Item": item}}


def list_index(
    ddb: Any, table: str, agent_id: str, *, limit: int, cursor: str | None, now_epoch: int
) -> SessionPage:
    """One Query page of the agent's index, skipping items past their TTL (not yet deleted)."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {
            ":pk": {"S": index_pk(agent_id)},
            ":prefix": {"S": _SK_PREFIX},
        },
        "Limit": max(1, limit),
    }
    if cursor is not None:
        kwargs["ExclusiveStartKey"] = index_key(agent_id, cursor)
    page = ddb.query(**kwargs)
    summaries = [
        SessionSummary.model_validate_json(item["summary"]["S"])
        for item in page.get("Items", [])
        if "expires_at" not in item or int(item["expires_at"]["N"]) > now_epoch
    ]
    last = page.get("LastEvaluatedKey")
    next_cursor = last["sk"]["S"].removeprefix(_SK_PREFIX) if last else None
    return SessionPage(sessions=newest_first(summaries), cursor=next_cursor)
