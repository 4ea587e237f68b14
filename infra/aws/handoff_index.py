"""The index of sessions handed off to a person: what an inbox lists, without a scan.

Every commit of a session in `human` mode (the handoff itself, each customer message meanwhile,
a person taking it or writing) puts one small item in the same transaction, so the list is never
ahead of or behind the sessions; the commit that hands a session back overwrites it with a
tombstone (`open` = false) that TTL deletes a day later — a Put, so turns need no DeleteItem.

    HANDOFFS   SESSION#{session}   agent_id, channel, customer_id, reason, trigger, since,
                                   assignee, ticket_id, updated_at, open, expires_at

One partition holds them all: handed-off sessions are few (people answer them) and a sweep or an
inbox reads them with one paginated Query. Entries of sessions nobody handed back expire after
`HANDOFF_TTL_SECONDS` (the index forgets them; the session keeps its mode).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.handoff import MODE_CHANGED
from engine.ports import TurnCommit
from engine.sessions.session import SessionMode, SessionState

Item = dict[str, Any]

HANDOFFS_PK = "HANDOFFS"
HANDOFF_TTL_SECONDS = 30 * 24 * 3600
TOMBSTONE_TTL_SECONDS = 24 * 3600


@dataclass(frozen=True)
class WaitingSession:
    """One handed-off session as the index lists it."""

    session_id: str
    agent_id: str
    channel: str
    customer_id: str
    reason: str
    trigger: str
    since: str
    assignee: str | None
    ticket_id: str | None
    updated_at: str

    @property
    def status(self) -> str:
        """`waiting` (no one has it), `taken` (a person has it), or `ticket` (no one came)."""
        if self.assignee:
            return "taken"
        return "ticket" if self.ticket_id else "waiting"


def handoff_key(session_id: str) -> Item:
    """The index item's key of a session."""
    return {"pk": {"S": HANDOFFS_PK}, "sk": {"S": f"SESSION#{session_id}"}}


def support_thread_key(channel: str, thread_ts: str) -> Item:
    """The key of the item mapping a support thread (`infra.handoff_slack`) to its session."""
    return {"pk": {"S": f"SUPPORT#{channel}#{thread_ts}"}, "sk": {"S": "THREAD"}}


def handoff_writes(table: str, commit: TurnCommit, now_epoch: int, now_iso: str) -> list[Item]:
    """The transaction item that keeps the index true after `commit` (none for a session that
    is and was with the agent: nearly every commit)."""
    state = commit.state
    handed_back = any(
        e.data.get("status") == MODE_CHANGED and e.data.get("mode") == SessionMode.AUTO.value
        for e in commit.new_events
    )
    if state.mode is not SessionMode.HUMAN or state.handoff is None:
        if not handed_back:
            return []
        tombstone = {
            **handoff_key(state.id),
            "open": {"BOOL": False},
            "expires_at": _n(now_epoch + TOMBSTONE_TTL_SECONDS),
        }
        return [{"Put": {"TableName": table, "Item": tombstone}}]
    return open_handoff_writes(table, state, now_epoch, now_iso)


def open_handoff_writes(
    table: str, state: SessionState, now_epoch: int, now_iso: str
) -> list[Item]:
    """The index item of a session with a person, as its state now says (none when it is with
    the agent): also rewritten when the state is rewritten outside a turn (erasing its
    customer renames them)."""
    if state.mode is not SessionMode.HUMAN or state.handoff is None:
        return []
    key = handoff_key(state.id)
    handoff = state.handoff
    item: Item = {
        **key,
        "open": {"BOOL": True},
        "agent_id": {"S": state.agent_id},
        "channel": {"S": state.channel},
        "customer_id": {"S": state.customer_id},
        "reason": {"S": handoff.reason[:500] or "-"},
        "trigger": {"S": handoff.trigger},
        "since": {"S": handoff.since.isoformat()},
        "updated_at": {"S": now_iso},
        "expires_at": _n(now_epoch + HANDOFF_TTL_SECONDS),
    }
    if handoff.assignee:
        item["assignee"] = {"S": handoff.assignee}
    if handoff.ticket_id:
        item["ticket_id"] = {"S": handoff.ticket_id}
    return [{"Put": {"TableName": table, "Item": item}}]


def waiting_sessions(
    ddb: Any, table: str, now_epoch: int, *, agent_id: str | None = None
) -> Iterator[WaitingSession]:
    """Every open handoff (of `agent_id`, when given), oldest first."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": HANDOFFS_PK}},
    }
    found: list[WaitingSession] = []
    while True:
        page = ddb.query(**kwargs)
        for item in page.get("Items", []):
            if not item.get("open", {}).get("BOOL") or int(item["expires_at"]["N"]) <= now_epoch:
                continue  # a tombstone, or expired but not yet deleted by TTL
            if agent_id is not None and item["agent_id"]["S"] != agent_id:
                continue
            found.append(
                WaitingSession(
                    session_id=item["sk"]["S"].removeprefix("SESSION#"),
                    agent_id=item["agent_id"]["S"],
                    channel=item["channel"]["S"],
                    customer_id=item["customer_id"]["S"],
                    reason=item["reason"]["S"],
                    trigger=item["trigger"]["S"],
                    since=item["since"]["S"],
                    assignee=item.get("assignee", {}).get("S"),
                    ticket_id=item.get("ticket_id", {}).get("S"),
                    updated_at=item["updated_at"]["S"],
                )
            )
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    yield from sorted(found, key=lambda w: w.since)


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}
