"""Erasing everything stored about one customer (a data-subject request).

"One customer" is a person on a channel: `(channel, customer_id)` as the channel names them —
a phone number on Twilio, a user id on Slack, the `customer_id` given to `POST /sessions` on the
API channel. Every session a person takes part in is indexed under them
(`CUSTOMER#{channel}#{customer}` → `SESSION#{session}`, written when the session is created and
when they first write in someone else's group session), so erasure needs no scan:

- a session that is theirs (its customer, and nobody else wrote in it) is deleted whole: META,
  events, turn markers, traces, outbox records, the bodies offloaded to S3 under
  `sessions/{id}/`, and the inbox claims of its messages; their context variables for the
  session's agent go too;
- a group session they opened and others wrote in is the others' conversation too: it is
  redacted like the next case, and its customer becomes `erased`;
- in a group session they only took part in, their messages are overwritten with an erased
  marker (same offset: the conversation's order stays intact for the others), the traces of the
  turns that answered them are deleted, and what the session's state holds about them (their
  principal, their picks, their evidence) is removed under the session's version, so a turn
  racing the erasure reloads instead of writing it back;
- the index entries themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import SessionConflict
from engine.session import Event, EventKind, EventSource, SessionState
from infra.aws.dynamo_store import (
    META,
    DynamoSessionStore,
    Item,
    customer_pk,
    session_pk,
)
from infra.aws.handoff_index import handoff_key
from infra.aws.in_flight import shard_of, shard_pk
from infra.aws.session_index import index_key

_S3_BATCH = 1000  # DeleteObjects' limit
_CONFLICT_RETRIES = 5
ERASED = "erased"  # the customer of a group session whose opener was erased


@dataclass
class ErasureReport:
    """What one erasure removed."""

    channel: str
    customer_id: str
    sessions_deleted: list[str] = field(default_factory=list)
    sessions_redacted: list[str] = field(default_factory=list)
    items_deleted: int = 0
    objects_deleted: int = 0
    inbox_claims_deleted: int = 0


class CustomerErasure:
    """Erases one customer from the state table and the bucket (see the module docstring)."""

    def __init__(self, sessions: DynamoSessionStore) -> None:
        self._store = sessions
        self._table = sessions._table
        self._bodies = sessions._bodies

    async def erase(self, channel: str, customer_id: str) -> ErasureReport:
        report = ErasureReport(channel, customer_id)
        index = list(
            self._table.query("pk = :pk", {":pk": {"S": customer_pk(channel, customer_id)}})
        )
        for entry in index:
            session_id = entry["session_id"]["S"]
            meta = self._table.get(session_pk(session_id), META)
            if meta is None:
                continue
            owner = meta.get("customer_id", {}).get("S") == customer_id
            if owner and not self._others_wrote_in(session_id, customer_id):
                self._delete_session(session_id, channel, meta, report)
                report.sessions_deleted.append(session_id)
            else:
                await self._redact_participant(session_id, channel, customer_id, report, owner)
                report.sessions_redacted.append(session_id)
        self._delete_keys([{"pk": e["pk"], "sk": e["sk"]} for e in index], report)
        return report

    def _others_wrote_in(self, session_id: str, person: str) -> bool:
        """Whether anyone else wrote in a session `person` opened (a group chat: it is the
        others' conversation too, so only `person`'s part of it is erased)."""
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :events)",
            {":pk": {"S": session_pk(session_id)}, ":events": {"S": "EVENT#"}},
        )
        return any(
            (sender := _sender(event)) is not None and sender != person
            for event in self._events(list(items))
        )

    # ---- a session of their own: everything goes

    def _delete_session(
        self, session_id: str, channel: str, meta: Item, report: ErasureReport
    ) -> None:
        items = list(self._table.query("pk = :pk", {":pk": {"S": session_pk(session_id)}}))
        claims = [
            self._claim_key(channel, event)
            for event in self._events(items)
            if event.source is EventSource.CUSTOMER
        ]
        self._delete_keys([k for k in claims if k is not None], report, claims=True)
        agent = meta.get("agent_id", {}).get("S")
        customer = meta.get("customer_id", {}).get("S")
        if agent and customer:
            variables = self._table.query("pk = :pk", {":pk": {"S": f"VARS#{agent}#{customer}"}})
            self._delete_keys([{"pk": v["pk"], "sk": v["sk"]} for v in variables], report)
        if agent:  # its entry in the index of sessions in flight, so a publish no longer counts it
            in_flight = {"pk": {"S": shard_pk(agent, shard_of(session_id))}}
            self._delete_keys([{**in_flight, "sk": {"S": f"SESSION#{session_id}"}}], report)
            # and its line in the agent's session list
            self._delete_keys([index_key(agent, session_id)], report)
        # Its entry in the index of handed-off sessions (it names the customer).
        self._delete_keys([handoff_key(session_id)], report)
        self._delete_objects(f"sessions/{session_id}/", report)
        # META last: while anything remains, the session is still found through its index.
        keys = [{"pk": i["pk"], "sk": i["sk"]} for i in items]
        keys.sort(key=lambda k: k["sk"]["S"] == META)
        self._delete_keys(keys, report)

    # ---- someone else's group session: only what is theirs

    async def _redact_participant(
        self, session_id: str, channel: str, person: str, report: ErasureReport, opener: bool
    ) -> None:
        pk = session_pk(session_id)
        items = list(
            self._table.query(
                "pk = :pk AND begins_with(sk, :events)",
                {":pk": {"S": pk}, ":events": {"S": "EVENT#"}},
            )
        )
        theirs = [e for e in self._events(items) if _is_theirs(e, person, opener)]
        turns = {e.turn_id for e in theirs if e.turn_id}
        for event in theirs:
            erased = event.model_copy(update={"text": None, "data": {"erased": True}})
            put = self._store._event_puts(session_id, [erased], rewrite=True)[0]["Put"]
            self._table.ddb.put_item(**put)
        claims = [self._claim_key(channel, e) for e in theirs]
        self._delete_keys([k for k in claims if k is not None], report, claims=True)
        traces = [{"pk": {"S": pk}, "sk": {"S": f"TRACE#{t}"}} for t in sorted(turns)]
        self._delete_keys(traces, report)
        for turn in sorted(turns):
            self._delete_objects(f"sessions/{session_id}/traces/{turn}.json.gz", report)
        for event in theirs:
            self._delete_objects(
                f"sessions/{session_id}/events/{event.offset:010d}.json.gz", report
            )
        if opener:  # their context variables for this agent go with them
            meta = self._table.get(pk, META) or {}
            agent = meta.get("agent_id", {}).get("S")
            if agent:
                variables = self._table.query("pk = :pk", {":pk": {"S": f"VARS#{agent}#{person}"}})
                self._delete_keys([{"pk": v["pk"], "sk": v["sk"]} for v in variables], report)
        await self._forget_in_state(session_id, person, opener)

    async def _forget_in_state(self, session_id: str, person: str, opener: bool) -> None:
        for _ in range(_CONFLICT_RETRIES):
            state = await self._store.load(session_id)
            if state is None:
                return
            cleaned = _without(state, person, opener)
            if cleaned.customer_id == person:  # they opened the group: it stays the others'
                cleaned = cleaned.model_copy(update={"customer_id": ERASED})
            if cleaned == state:
                return
            try:
                await self._store.replace_state(cleaned, expected_version=state.version)
            except SessionConflict:
                continue
            return
        raise SessionConflict(
            f"session {session_id!r} kept changing while a participant was erased from it; "
            "erase again"
        )

    # ---- shared

    def _events(self, items: list[Item]) -> list[Event]:
        return [
            Event.model_validate_json(self._bodies.decode(i))
            for i in items
            if i["sk"]["S"].startswith("EVENT#")
        ]

    @staticmethod
    def _claim_key(channel: str, event: Event) -> dict[str, Any] | None:
        """The inbox claim of a channel message (`INBOX#{channel}#{account}:{event}`)."""
        dedup = str(event.data.get("channel_event_id") or "")
        prefix = f"{channel}:"
        if not dedup.startswith(prefix):
            return None
        return {"pk": {"S": f"INBOX#{channel}#{dedup[len(prefix) :]}"}, "sk": {"S": "INBOX"}}

    def _delete_keys(
        self, keys: list[dict[str, Any]], report: ErasureReport, *, claims: bool = False
    ) -> None:
        # One DeleteItem per item: the functions are granted no batch writes (test_template).
        for key in keys:
            gone = self._table.ddb.delete_item(
                TableName=self._table.name, Key=key, ReturnValues="ALL_OLD"
            )
            if "Attributes" not in gone:
                continue  # nothing there (an unclaimed message, a second erasure)
            if claims:
                report.inbox_claims_deleted += 1
            else:
                report.items_deleted += 1

    def _delete_objects(self, prefix: str, report: ErasureReport) -> None:
        bucket = self._bodies._bucket
        if not bucket:
            return
        s3 = self._bodies.s3
        token: dict[str, str] = {}
        while True:
            page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **token)
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for start in range(0, len(keys), _S3_BATCH):
                s3.delete_objects(
                    Bucket=bucket, Delete={"Objects": keys[start : start + _S3_BATCH]}
                )
                report.objects_deleted += len(keys[start : start + _S3_BATCH])
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}


def _sender(event: Event) -> str | None:
    if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
        return None
    sender = event.data.get("sender")
    return str(sender) if sender else None


def _is_theirs(event: Event, person: str, opener: bool) -> bool:
    """A message `person` wrote (the opener's messages from before senders were recorded carry
    no sender: they are the session customer's)."""
    if event.kind is not EventKind.MESSAGE or event.source is not EventSource.CUSTOMER:
        return False
    sender = _sender(event)
    return sender == person or (opener and sender is None)


def _without(state: SessionState, person: str, opener: bool) -> SessionState:
    """The session's state with nothing left of `person`."""

    def theirs(event: Event) -> bool:
        return _is_theirs(event, person, opener) or str(event.data.get("sender") or "") == person

    return state.model_copy(
        update={
            "principals": {k: v for k, v in state.principals.items() if k != person},
            "collected": tuple(c for c in state.collected if c.sender != person),
            "kept_evidence": tuple(e for e in state.kept_evidence if not theirs(e)),
            "completed_by": {
                j: tuple(s for s in senders if s != person)
                for j, senders in state.completed_by.items()
            },
            "pending_interrupt": (
                None
                if state.pending_interrupt and state.pending_interrupt.sender == person
                else state.pending_interrupt
            ),
            "pending_confirmation": (
                None
                if state.pending_confirmation and state.pending_confirmation.sender == person
                else state.pending_confirmation
            ),
        }
    )
