"""Erasing everything stored about one customer (a data-subject request).

"One customer" is a person on a channel: `(channel, customer_id)` as the channel names them —
a phone number on Twilio, a user id on Slack, the `customer_id` given to `POST /sessions` on the
API channel. Every session a person takes part in is indexed under them
(`CUSTOMER#{channel}#{customer}` → `SESSION#{session}`, written when the session is created and
when they first write in someone else's group session), so erasure needs no scan:

- a session that is theirs (its customer, and nobody else wrote in it) is deleted whole: META,
  events, turn markers, traces, outbox records, the bodies offloaded to S3 under
  `sessions/{id}/`, the inbox claims of its messages, its entries in the handed-off sessions'
  index and the support threads' (`SUPPORT#…`) mapping; their context variables for the
  session's agent go too;
- a group session they opened and others wrote in is the others' conversation too: it is
  redacted like the next case, and its customer becomes `erased`;
- in a group session they only took part in, their messages, and the agent's replies and tool
  events of the turns that answered them (with their channel payloads), are overwritten with an
  erased marker (same offset: the conversation's order stays intact for the others), the
  traces of every turn from their first message on are deleted (a turn's recorded prompts quote
  the conversation, not only the turns that answered them), and what the session's state holds
  about them (their principal, their picks, their evidence) is removed under the session's
  version, so a turn racing the erasure reloads instead of writing it back;
- the index entries themselves.

First of all, a tombstone `ERASED#{digest}` records when (`erased_at`; it expires after
`ERASURE_TOMBSTONE_DAYS`): a message of theirs still on the turn queue must not be written back
into a session created afresh (the webhook and the worker copy it into the new session's
`erased_senders`), and a redacted group session records the same in its state. It goes first: a
call cut short never leaves a deleted session without it; calling again moves it to that call's
time (anything they wrote before the last call is dropped).

A session may hold thousands of events and traces. Items are deleted 25 per BatchWriteItem
(DynamoDB's limit), and what DynamoDB leaves unprocessed (throttling) is sent again with backoff.
One call works for at most `time_budget` seconds (default 20: the management function times out
at 29); past it, or when DynamoDB keeps leaving items unprocessed, the report says
`complete=False` and the API answers 202 "erasure continues: call again". Calling again is safe:
index entries go last, and a session's META last of its items, so whatever is left is found
again the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine.errors import SessionConflict
from engine.handoff import SUPPORT_THREAD
from engine.privacy.erasure import (
    ERASED,
    ERASURE_TOMBSTONE_DAYS,
    erased_copy,
    is_erased,
    is_theirs,
    others_wrote,
    their_part,
    turns_that_may_quote,
    without_person,
)
from engine.privacy.retention import DAY
from engine.sessions.session import Event, EventSource
from infra.aws.dynamo_sessions import DynamoSessionStore
from infra.aws.dynamo_table import (
    ERASED_SK,
    META,
    Item,
    _key,
    _s,
    customer_pk,
    erasure_pk,
    payload_sk,
    session_pk,
)
from infra.aws.handoff_index import handoff_key, support_thread_key
from infra.aws.in_flight import shard_of, shard_pk
from infra.aws.session_index import index_key

_S3_BATCH = 1000  # DeleteObjects' limit
_WRITE_BATCH = 25  # BatchWriteItem's limit
_READ_BATCH = 100  # BatchGetItem's limit
_UNPROCESSED_ROUNDS = 8  # sends of what DynamoDB left unprocessed, before "call again"
DEFAULT_TIME_BUDGET_SECONDS = 20.0
_CONFLICT_RETRIES = 5


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
    # False: the call stopped before the end (time budget, or DynamoDB throttling); call again.
    complete: bool = True
    detail: str | None = None


class _Interrupted(Exception):
    """This call must stop here; what is left is found again by the next call."""


class CustomerErasure:
    """Erases one customer from the state table and the bucket (see the module docstring)."""

    def __init__(
        self,
        sessions: DynamoSessionStore,
        *,
        time_budget: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = sessions
        self._table = sessions._table
        self._bodies = sessions._bodies
        # Read at call time, so a deployment (or a test) can set the module's default.
        self._budget = time_budget if time_budget is not None else DEFAULT_TIME_BUDGET_SECONDS
        self._clock = clock
        self._sleep = sleep
        self._deadline = 0.0

    async def erase(self, channel: str, customer_id: str) -> ErasureReport:
        """Erase what is stored about `(channel, customer_id)`, or as much as fits one call
        (`ErasureReport.complete`); idempotent, so an incomplete erasure is simply called again."""
        report = ErasureReport(channel, customer_id)
        self._deadline = self._clock() + self._budget
        try:
            await self._erase(channel, customer_id, report)
        except _Interrupted as stop:
            report.complete = False
            report.detail = f"erasure continues: {stop}; call again to finish"
        return report

    async def _erase(self, channel: str, customer_id: str, report: ErasureReport) -> None:
        now = self._store._clock.now()
        self._write_tombstone(channel, customer_id, now)
        index = list(
            self._table.query("pk = :pk", {":pk": {"S": customer_pk(channel, customer_id)}})
        )
        for entry in index:
            self._check_time()
            session_id = entry["session_id"]["S"]
            meta = self._table.get(session_pk(session_id), META)
            if meta is None:
                continue
            owner = meta.get("customer_id", {}).get("S") == customer_id
            if owner and not self._others_wrote_in(session_id, customer_id):
                self._delete_session(session_id, channel, meta, report)
                report.sessions_deleted.append(session_id)
            else:
                await self._redact_participant(session_id, channel, customer_id, report, owner, now)
                report.sessions_redacted.append(session_id)
        self._delete_keys([{"pk": e["pk"], "sk": e["sk"]} for e in index], report)

    def _write_tombstone(self, channel: str, customer_id: str, now: datetime) -> None:
        """When they were erased, under their digest (`engine.privacy.erasure.person_digest`)."""
        item = {
            **_key(erasure_pk(channel, customer_id), ERASED_SK),
            "erased_at": _s(now.isoformat()),
            **self._store._items.expiry(ERASURE_TOMBSTONE_DAYS * DAY),
        }
        self._table.ddb.put_item(TableName=self._table.name, Item=item)

    def _check_time(self) -> None:
        if self._clock() >= self._deadline:
            raise _Interrupted(f"this call's {self._budget:g} s budget is spent")

    def _others_wrote_in(self, session_id: str, person: str) -> bool:
        """Whether anyone else wrote in a session `person` opened (a group chat: it is the
        others' conversation too, so only `person`'s part of it is erased)."""
        items = self._table.query(
            "pk = :pk AND begins_with(sk, :events)",
            {":pk": {"S": session_pk(session_id)}, ":events": {"S": "EVENT#"}},
        )
        return others_wrote(self._events(list(items)), person)

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
        # Its entry in the index of handed-off sessions (it names the customer), and the items
        # mapping its support threads to it (each thread recorded by an event of the session).
        threads = [
            support_thread_key(str(e.data.get("channel")), str(e.data.get("thread_ts")))
            for e in self._events(items)
            if e.data.get("status") == SUPPORT_THREAD
        ]
        self._delete_keys([handoff_key(session_id), *threads], report)
        self._delete_objects(f"sessions/{session_id}/", report)
        # META last, alone: while anything remains, the session is still found through its
        # index (a batch is not atomic, so META never shares one with other items).
        keys = [{"pk": i["pk"], "sk": i["sk"]} for i in items]
        self._delete_keys([k for k in keys if k["sk"]["S"] != META], report)
        self._delete_keys([k for k in keys if k["sk"]["S"] == META], report)

    # ---- someone else's group session: only what is theirs

    async def _redact_participant(
        self,
        session_id: str,
        channel: str,
        person: str,
        report: ErasureReport,
        opener: bool,
        now: datetime,
    ) -> None:
        pk = session_pk(session_id)
        items = list(
            self._table.query(
                "pk = :pk AND begins_with(sk, :events)",
                {":pk": {"S": pk}, ":events": {"S": "EVENT#"}},
            )
        )
        events = self._events(items)
        theirs = [e for e in events if is_theirs(e, person, opener)]
        part = their_part(events, person, opener)  # their messages and the answers to them
        # What is found through their messages goes before the messages are overwritten: a
        # call that stops midway leaves them as they were, so the next call finds it all again.
        turns = turns_that_may_quote(events, person, opener)
        traces = {f"TRACE#{t}" for t in turns}
        self._delete_keys(self._stored_keys(pk, "TRACE#", traces), report)
        trace_keys = {f"sessions/{session_id}/traces/{t}.json.gz" for t in turns}
        self._delete_objects(f"sessions/{session_id}/traces/", report, only=trace_keys)
        claims = [self._claim_key(channel, e) for e in theirs]
        self._delete_keys([k for k in claims if k is not None], report, claims=True)
        # The channel payloads of the replies (a selector's options name their accounts).
        payloads = {payload_sk(e.offset) for e in part}
        self._delete_keys(self._stored_keys(pk, "PAYLOAD#", payloads), report)
        for event in part:
            self._check_time()
            put = self._store._items.event_puts(session_id, [erased_copy(event)], rewrite=True)[0][
                "Put"
            ]
            self._table.ddb.put_item(**put)
        # Then the S3 bodies of the erased events, found by the markers' offsets: a call that
        # stops before this point leaves them to the next (an event whose body went first could
        # no longer be read — by the next call, or by the others' turns).
        erased = {e.offset for e in events if is_erased(e)} | {e.offset for e in part}
        for kind in ("events", "payloads"):
            bodies = {f"sessions/{session_id}/{kind}/{offset:010d}.json.gz" for offset in erased}
            self._delete_objects(f"sessions/{session_id}/{kind}/", report, only=bodies)
        if opener:  # their context variables for this agent go with them
            meta = self._table.get(pk, META) or {}
            agent = meta.get("agent_id", {}).get("S")
            if agent:
                variables = self._table.query("pk = :pk", {":pk": {"S": f"VARS#{agent}#{person}"}})
                self._delete_keys([{"pk": v["pk"], "sk": v["sk"]} for v in variables], report)
        await self._forget_in_state(session_id, person, opener, now)

    async def _forget_in_state(
        self, session_id: str, person: str, opener: bool, now: datetime
    ) -> None:
        for _ in range(_CONFLICT_RETRIES):
            state = await self._store.load(session_id)
            if state is None:
                return
            cleaned = without_person(state, person, opener, now)
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
        """Delete `keys` 25 per BatchWriteItem. Items read from the table are counted as they
        go; inbox claims (their keys are derived from messages) only those that exist."""
        unique = list({(k["pk"]["S"], k["sk"]["S"]): k for k in keys}.values())
        if claims:
            unique = self._existing(unique)
        for start in range(0, len(unique), _WRITE_BATCH):
            self._check_time()
            batch = unique[start : start + _WRITE_BATCH]
            self._batch_write([{"DeleteRequest": {"Key": k}} for k in batch])
            if claims:
                report.inbox_claims_deleted += len(batch)
            else:
                report.items_deleted += len(batch)

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        table = self._table.name
        for attempt in range(_UNPROCESSED_ROUNDS):
            response = self._table.ddb.batch_write_item(RequestItems={table: requests})
            requests = response.get("UnprocessedItems", {}).get(table, [])
            if not requests:
                return
            self._sleep(min(0.05 * 2**attempt, 1.0))  # throttled: back off, send the rest
        raise _Interrupted(
            f"DynamoDB left {len(requests)} deletes unprocessed {_UNPROCESSED_ROUNDS} times"
        )

    def _stored_keys(self, pk: str, prefix: str, wanted: Collection[str]) -> list[Item]:
        """The keys of the items of partition `pk` whose sort key (starting with `prefix`) is
        in `wanted`: only what is there, so a call that resumes deletes nothing twice."""
        if not wanted:
            return []
        stored = self._table.query(
            "pk = :pk AND begins_with(sk, :prefix)",
            {":pk": {"S": pk}, ":prefix": {"S": prefix}},
            projection="pk, sk",
        )
        return [k for k in stored if k["sk"]["S"] in wanted]

    def _existing(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Those of `keys` that name an item (BatchGetItem, 100 keys per call)."""
        table = self._table.name
        found: list[dict[str, Any]] = []
        for start in range(0, len(keys), _READ_BATCH):
            self._check_time()
            wanted: dict[str, Any] = {
                table: {"Keys": keys[start : start + _READ_BATCH], "ProjectionExpression": "pk, sk"}
            }
            for attempt in range(_UNPROCESSED_ROUNDS):
                response = self._table.ddb.batch_get_item(RequestItems=wanted)
                found += response.get("Responses", {}).get(table, [])
                wanted = response.get("UnprocessedKeys") or {}
                if not wanted:
                    break
                self._sleep(min(0.05 * 2**attempt, 1.0))
            else:
                raise _Interrupted("DynamoDB kept leaving inbox claims unread")
        return [{"pk": item["pk"], "sk": item["sk"]} for item in found]

    def _delete_objects(
        self, prefix: str, report: ErasureReport, only: Collection[str] | None = None
    ) -> None:
        """Delete the objects under `prefix` (those named in `only`, when given: one listing
        instead of a request per key)."""
        bucket = self._bodies._bucket
        if not bucket or (only is not None and not only):
            return
        s3 = self._bodies.s3
        token: dict[str, str] = {}
        while True:
            self._check_time()
            page = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **token)
            keys = [
                {"Key": o["Key"]}
                for o in page.get("Contents", [])
                if only is None or o["Key"] in only
            ]
            for start in range(0, len(keys), _S3_BATCH):
                s3.delete_objects(
                    Bucket=bucket, Delete={"Objects": keys[start : start + _S3_BATCH]}
                )
                report.objects_deleted += len(keys[start : start + _S3_BATCH])
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}


__all__ = ["ERASED", "CustomerErasure", "ErasureReport"]
