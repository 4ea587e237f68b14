"""The reply outbox: one delivery of each turn's reply at a time, a bounded number of tries, and
a record of the outcome, whatever crashes, redeliveries and concurrent workers do.

A turn commits first (its reply is then an event of the session); delivery comes after. Between
the two a Lambda can crash, time out or lose its SQS message to a retry, and the turn is then
*replayed* (the engine returns the stored reply without recomputing anything). The outbox record,
one per turn, says whether that reply already went out and who is sending it:

    SESSION#{session}   OUTBOX#{turn_id}   status PENDING → SENDING → SENT (or FAILED), owner,
                                            lease_until, channel, attempts, last_error,
                                            message_ids, expires_at

- `take` is the one write before a send: it creates the record or takes it (PENDING, or SENDING
  whose lease ran out) as SENDING for this delivery (`owner`, `lease_until`) and counts the
  attempt. A second delivery of the same turn meanwhile finds it SENDING under a live lease
  (`LeaseOutcome.BUSY`) and must not send; one finding it SENT or FAILED has nothing to do.
- `mark_sent` records the platform's acceptance (SENDING → SENT).
- `release` gives a retryable failure back (SENDING → PENDING, the error kept) so a later attempt
  can take it; `mark_failed` ends it (FAILED) when the platform refuses for good or the attempts
  are used up.

The remaining window is a crash between the platform's accept and `mark_sent`: once the lease
runs out, the next attempt sends again. No chat platform offers an idempotency key for sends, so
that window cannot be closed on our side; it is one DynamoDB write wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from engine.clock import SystemClock
from infra.channels.base import OutboundReply, ReplyOption

if TYPE_CHECKING:
    from engine.ports import Clock
    from engine.sessions.session import Event

OUTBOX_TTL_SECONDS = 30 * 24 * 3600  # > SQS retention (4 d) + DLQ retention (14 d) + redrive
_MAX_ERROR_CHARS = 500


# --------------------------------------------------------------------------------------------------
# What a reply event sends


def reply_options(event: Event) -> list[ReplyOption]:
    """A selector's options on a reply event (`data["options"]`) as channel buttons."""
    options: list[ReplyOption] = []
    for raw in event.data.get("options") or ():
        if not isinstance(raw, dict):
            continue
        option_id, label = str(raw.get("id") or "").strip(), str(raw.get("label") or "").strip()
        if option_id and label:
            options.append(ReplyOption(id=option_id, label=label))
    return options


def outbound_reply(event: Event, reply_to: dict[str, Any]) -> OutboundReply | None:
    """What to send for an agent reply event; None when it has nothing to say."""
    options = reply_options(event)
    text = event.text or ""
    if not text.strip() and not options:
        return None
    view = event.data.get("view")
    return OutboundReply(
        text=text,
        options=options,
        view=view if isinstance(view, dict) else None,
        reply_to=reply_to,
        id=event.id,
        language=str(event.data.get("language") or "en"),
    )


# --------------------------------------------------------------------------------------------------
# Delivery records


class OutboxStatus(StrEnum):
    PENDING = "PENDING"
    SENDING = "SENDING"
    SENT = "SENT"
    FAILED = "FAILED"


class LeaseOutcome(StrEnum):
    TAKEN = "taken"  # this delivery holds the record: send, then mark it
    BUSY = "busy"  # another delivery is sending it under a live lease: do not send
    DONE = "done"  # SENT, or FAILED for good: nothing to send


@dataclass(frozen=True)
class OutboxEntry:
    session_id: str
    turn_id: str
    status: OutboxStatus
    channel: str
    attempts: int = 0
    message_ids: tuple[str, ...] = ()
    last_error: str | None = None
    owner: str | None = None
    lease_until: int | None = None  # epoch seconds

    @property
    def delivered(self) -> bool:
        """Whether this reply needs no further send (sent, or given up for good)."""
        return self.status in (OutboxStatus.SENT, OutboxStatus.FAILED)


@dataclass(frozen=True)
class Lease:
    """What `take` found: the outcome and the record as it stands after the attempt."""

    outcome: LeaseOutcome
    entry: OutboxEntry


def _key(session_id: str, turn_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": f"OUTBOX#{turn_id}"}}


def _entry(session_id: str, turn_id: str, item: dict[str, Any]) -> OutboxEntry:
    lease_until = item.get("lease_until", {}).get("N")
    return OutboxEntry(
        session_id=session_id,
        turn_id=turn_id,
        status=OutboxStatus(item["status"]["S"]),
        channel=item.get("channel", {}).get("S", ""),
        attempts=int(item.get("attempts", {}).get("N", "0")),
        message_ids=tuple(item.get("message_ids", {}).get("SS", ())),
        last_error=item.get("last_error", {}).get("S"),
        owner=item.get("owner", {}).get("S"),
        lease_until=int(lease_until) if lease_until is not None else None,
    )


_NAMES = {"#status": "status", "#owner": "owner"}  # both DynamoDB reserved words


class DynamoOutbox:
    """Outbox records in the state table, under the session's partition."""

    def __init__(
        self,
        table_name: str | None = None,
        *,
        dynamodb: Any = None,
        clock: Clock | None = None,
        ttl_seconds: int = OUTBOX_TTL_SECONDS,
    ) -> None:
        from infra.aws.clients import TABLE_ENV, client, required_env  # boto3: on first use

        self.table = table_name or required_env(TABLE_ENV, "the DynamoDB state table")
        self._ddb = dynamodb or client("dynamodb")
        self._clock = clock or SystemClock()
        self._ttl = ttl_seconds

    def _now(self) -> str:
        return self._clock.now().isoformat()

    def _epoch(self) -> int:
        return int(self._clock.now().timestamp())

    async def take(
        self, session_id: str, turn_id: str, channel: str, *, owner: str, lease_seconds: int
    ) -> Lease:
        """Take the turn's record for one send attempt (created if absent): TAKEN when it was
        PENDING, SENDING under an expired lease, or already this owner's (a retried write whose
        response was lost); BUSY under another delivery's live lease; DONE once SENT or FAILED."""
        now = self._epoch()
        try:
            response = self._ddb.update_item(
                TableName=self.table,
                Key=_key(session_id, turn_id),
                UpdateExpression=(
                    "SET #status = :sending, #owner = :me, lease_until = :until, "
                    "channel = if_not_exists(channel, :channel), "
                    "created_at = if_not_exists(created_at, :at), "
                    "expires_at = if_not_exists(expires_at, :expires) "
                    "ADD attempts :one"
                ),
                ConditionExpression=(
                    "attribute_not_exists(pk) OR #status = :pending OR "
                    "(#status = :sending AND (#owner = :me OR lease_until <= :now))"
                ),
                ExpressionAttributeNames=_NAMES,
                ExpressionAttributeValues={
                    ":sending": {"S": OutboxStatus.SENDING.value},
                    ":pending": {"S": OutboxStatus.PENDING.value},
                    ":me": {"S": owner},
                    ":until": {"N": str(now + lease_seconds)},
                    ":now": {"N": str(now)},
                    ":channel": {"S": channel},
                    ":at": {"S": self._now()},
                    ":expires": {"N": str(now + self._ttl)},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            held = error.response.get("Item") or await self._get(session_id, turn_id)
            if held is None:  # deleted in between (TTL): a fresh record is right
                return await self.take(
                    session_id, turn_id, channel, owner=owner, lease_seconds=lease_seconds
                )
            entry = _entry(session_id, turn_id, held)
            outcome = LeaseOutcome.DONE if entry.delivered else LeaseOutcome.BUSY
            return Lease(outcome, entry)
        return Lease(LeaseOutcome.TAKEN, _entry(session_id, turn_id, response["Attributes"]))

    async def release_leases_of_a_stopped_process(self) -> int:
        """Every SENDING record back to PENDING, its lease dropped; returns how many. Only for a
        table whose senders are all known to be gone: the local served stack restored after its
        one process stopped (`waypoint serve --data`; one process owns a data directory). Its
        poller retries a failed record within seconds, so waiting out a dead sender's 60 s lease
        would use up the queue's receives and dead-letter the reply instead of sending it.
        Scans the table (a local one, small)."""
        released = 0
        pages = self._ddb.get_paginator("scan").paginate(
            TableName=self.table,
            FilterExpression="begins_with(sk, :outbox) AND #status = :sending",
            ExpressionAttributeNames=_NAMES,
            ExpressionAttributeValues={
                ":outbox": {"S": "OUTBOX#"},
                ":sending": {"S": OutboxStatus.SENDING.value},
            },
            ProjectionExpression="pk, sk, #owner, #status",
        )
        for page in pages:
            for item in page.get("Items", []):
                session_id = item["pk"]["S"].removeprefix("SESSION#")
                turn_id = item["sk"]["S"].removeprefix("OUTBOX#")
                owner = item.get("owner", {}).get("S", "")
                error = "its sender stopped before confirming the send"
                released += await self.release(session_id, turn_id, owner, error)
        return released

    async def get(self, session_id: str, turn_id: str) -> OutboxEntry | None:
        item = await self._get(session_id, turn_id)
        return _entry(session_id, turn_id, item) if item is not None else None

    async def _get(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        response = self._ddb.get_item(
            TableName=self.table, Key=_key(session_id, turn_id), ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    async def mark_sent(self, session_id: str, turn_id: str, message_ids: Sequence[str]) -> bool:
        """→ SENT, after the platform accepted the reply. Whoever holds the lease now, the
        platform has it: only an existing SENT mark is left alone (False)."""
        values: dict[str, Any] = {
            ":sent": {"S": OutboxStatus.SENT.value},
            ":at": {"S": self._now()},
        }
        expression = "SET #status = :sent, sent_at = :at"
        ids = [i for i in message_ids if i]
        if ids:
            values[":ids"] = {"SS": sorted(set(ids))}
            expression += ", message_ids = :ids"
        expression += " REMOVE lease_until"
        return self._update(
            session_id, turn_id, expression, values, "attribute_exists(pk) AND #status <> :sent"
        )

    async def mark_failed(self, session_id: str, turn_id: str, error: str) -> bool:
        """→ FAILED: refused for good, or out of attempts; it will not be retried. False if the
        record is already SENT or FAILED."""
        values = {
            ":failed": {"S": OutboxStatus.FAILED.value},
            ":error": {"S": error[:_MAX_ERROR_CHARS]},
            ":at": {"S": self._now()},
            ":sent": {"S": OutboxStatus.SENT.value},
        }
        expression = (
            "SET #status = :failed, last_error = :error, failed_at = :at REMOVE lease_until"
        )
        condition = "attribute_exists(pk) AND #status <> :sent AND #status <> :failed"
        return self._update(session_id, turn_id, expression, values, condition)

    async def release(self, session_id: str, turn_id: str, owner: str, error: str) -> bool:
        """SENDING → PENDING after a failed, retryable attempt, if `owner` still holds it; the
        error is kept for the operator."""
        values = {
            ":pending": {"S": OutboxStatus.PENDING.value},
            ":sending": {"S": OutboxStatus.SENDING.value},
            ":error": {"S": error[:_MAX_ERROR_CHARS]},
            ":me": {"S": owner},
        }
        expression = "SET #status = :pending, last_error = :error REMOVE lease_until, #owner"
        condition = "#status = :sending AND #owner = :me"
        return self._update(session_id, turn_id, expression, values, condition)

    def _update(
        self,
        session_id: str,
        turn_id: str,
        expression: str,
        values: dict[str, Any],
        condition: str,
    ) -> bool:
        names = {name: attr for name, attr in _NAMES.items() if name in expression + condition}
        try:
            self._ddb.update_item(
                TableName=self.table,
                Key=_key(session_id, turn_id),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True
