"""The items a DynamoDB session write puts (`dynamo_sessions.DynamoSessionStore`): the META
update, the event items and their channel payloads beside them, the customer index entries, the
traces and the session list's summary line — each with the expiry its retention gives it. Built
here, written by the store's transactions (and by erasure's rewrites, `infra.aws.erasure`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.ports import Clock, TurnCommit
from engine.sessions.history import channel_payload, without_channel_payload
from engine.sessions.session import Event, EventSource, SessionState
from infra.aws.dynamo_table import (
    META,
    Item,
    ItemBodies,
    _key,
    _n,
    _s,
    _set_expression,
    customer_pk,
    event_sk,
    payload_sk,
    session_pk,
)
from infra.aws.retention import Retention
from infra.aws.session_index import index_put

ABSENT = "attribute_not_exists(pk) OR expires_at <= :now"  # TTL deletes lazily: expired = absent


class SessionItems:
    """Builds one session store's write items: the table they go to, how bodies are stored, and
    when each kind of item expires."""

    def __init__(
        self,
        table_name: str,
        bodies: ItemBodies,
        clock: Clock,
        retention: Retention,
        trace_ttl: int | None,
    ):
        self._table_name = table_name
        self._bodies = bodies
        self._clock = clock
        self._retention = retention
        self._trace_ttl = trace_ttl

    def meta_update(
        self,
        state: SessionState,
        new_events: Sequence[Event],
        *,
        condition: str,
        expected: int | None = None,
        creating: bool = False,
    ) -> Item:
        """The META item's conditional update: the state without its events, `version`, and
        `next_offset` when events are added (or the session is created)."""
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
            **self.expiry(self._retention.session_idle),
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
                "TableName": self._table_name,
                "Key": _key(session_pk(state.id), META),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def event_puts(
        self, session_id: str, events: Sequence[Event], *, rewrite: bool = False
    ) -> list[Item]:
        """One put per event (on a free offset, or over a live one when `rewrite`), each
        preceded by its channel payload's put when it has one."""
        pk = session_pk(session_id)
        now = self._epoch()
        puts = []
        for event in events:
            payload = channel_payload(event)
            if payload:  # beside the event: the window Query never reads (or pays for) it
                puts.append(self.payload_put(session_id, event.offset, payload))
            put: Item = {
                "TableName": self._table_name,
                "Item": {
                    **_key(pk, event_sk(event.offset)),
                    **self._bodies.encode(
                        without_channel_payload(event).model_dump_json(),
                        f"sessions/{session_id}/events/{event.offset:010d}.json.gz",
                    ),
                    **self.expiry(self._retention.events),
                },
                # A new event may take the offset of an expired one (of a session that expired
                # and started afresh); a rewrite replaces a live one.
                "ConditionExpression": "attribute_exists(pk)" if rewrite else ABSENT,
            }
            if not rewrite:
                put["ExpressionAttributeValues"] = {":now": _n(now)}
            puts.append({"Put": put})
        return puts

    def payload_put(self, session_id: str, offset: int, payload: dict[str, Any]) -> Item:
        """The put of an event's channel payload, the side item a turn never reads."""
        return {
            "Put": {
                "TableName": self._table_name,
                "Item": {
                    **_key(session_pk(session_id), payload_sk(offset)),
                    **self._bodies.encode(
                        json.dumps(payload, default=str),
                        f"sessions/{session_id}/payloads/{offset:010d}.json.gz",
                    ),
                    **self.expiry(self._retention.events),
                },
            }
        }

    def index_puts(self, state: SessionState, people: set[str]) -> list[Item]:
        """The customer index entries of `people` for this session (idempotent puts), so that
        erasing one person finds every session they took part in."""
        return [
            {
                "Put": {
                    "TableName": self._table_name,
                    "Item": {
                        **_key(customer_pk(state.channel, person), f"SESSION#{state.id}"),
                        "session_id": _s(state.id),
                        **self.expiry(self._retention.session_idle),
                    },
                }
            }
            for person in sorted(people)
            if person
        ]

    def trace_item(self, session_id: str, turn_id: str, trace: Mapping[str, Any]) -> Item:
        """The TRACE item of a turn (expiring after the traces' retention, if any)."""
        item: Item = {
            **_key(session_pk(session_id), f"TRACE#{turn_id}"),
            **self._bodies.encode(
                json.dumps(trace, default=str), f"sessions/{session_id}/traces/{turn_id}.json.gz"
            ),
        }
        if self._trace_ttl is not None:
            item["expires_at"] = _n(self._epoch() + self._trace_ttl)
        return item

    def summary_put(self, state: SessionState, new_events: Sequence[Event] = ()) -> Item:
        """The session's line in its agent's session list (`infra.aws.session_index`)."""
        expiry = self.expiry(self._retention.session_idle)
        return index_put(self._table_name, state, expiry, new_events)

    def expiry(self, ttl: int | None) -> Item:
        """The `expires_at` attribute `ttl` seconds from now (none when `ttl` is None)."""
        return {"expires_at": _n(self._epoch() + ttl)} if ttl is not None else {}

    def _epoch(self) -> int:
        return int(self._clock.now().timestamp())


def new_people(commit: TurnCommit) -> set[str]:
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
