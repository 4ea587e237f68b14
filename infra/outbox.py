"""The reply outbox: at most one delivery of each turn's reply, whatever crashes and redeliveries.

A turn commits first (its reply is then an event of the session); delivery comes after. Between
the two a Lambda can crash, time out or lose its SQS message to a retry, and the turn is then
*replayed* (the engine returns the stored reply without recomputing anything). The outbox record,
one per turn, says whether that reply already went out:

    SESSION#{session}   OUTBOX#{turn_id}   status PENDING → SENT (or FAILED), channel,
                                            attempts, last_error, message_ids, expires_at

- `open` creates it PENDING if absent (conditional put) and returns what is stored: a redelivered
  message whose reply is SENT sends nothing.
- `mark_sent` flips PENDING → SENT (conditional), after the platform accepted the reply.
- `note_attempt` records a retryable failure; the record stays PENDING and the SQS message fails,
  so a later attempt sends it.
- `mark_failed` flips PENDING → FAILED for a reply the platform refuses for good.

The remaining window is a crash between the platform's accept and `mark_sent`: the next attempt
sends again. No chat platform offers an idempotency key for sends, so that window cannot be closed
on our side; it is one DynamoDB write wide.
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
    from engine.session import Event

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
    )


# --------------------------------------------------------------------------------------------------
# Delivery records


class OutboxStatus(StrEnum):
    PENDING = "PENDING"
    SENT = "SENT"
    FAILED = "FAILED"


@dataclass(frozen=True)
class OutboxEntry:
    session_id: str
    turn_id: str
    status: OutboxStatus
    channel: str
    attempts: int = 0
    message_ids: tuple[str, ...] = ()
    last_error: str | None = None

    @property
    def delivered(self) -> bool:
        """Whether this reply needs no further send (sent, or refused for good)."""
        return self.status is not OutboxStatus.PENDING


def _key(session_id: str, turn_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"SESSION#{session_id}"}, "sk": {"S": f"OUTBOX#{turn_id}"}}


def _entry(session_id: str, turn_id: str, item: dict[str, Any]) -> OutboxEntry:
    return OutboxEntry(
        session_id=session_id,
        turn_id=turn_id,
        status=OutboxStatus(item["status"]["S"]),
        channel=item.get("channel", {}).get("S", ""),
        attempts=int(item.get("attempts", {}).get("N", "0")),
        message_ids=tuple(item.get("message_ids", {}).get("SS", ())),
        last_error=item.get("last_error", {}).get("S"),
    )


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

    async def open(self, session_id: str, turn_id: str, channel: str) -> OutboxEntry:
        """The turn's record, created PENDING if it does not exist yet."""
        item = {
            **_key(session_id, turn_id),
            "status": {"S": OutboxStatus.PENDING.value},
            "channel": {"S": channel},
            "attempts": {"N": "0"},
            "created_at": {"S": self._now()},
            "expires_at": {"N": str(int(self._clock.now().timestamp()) + self._ttl)},
        }
        try:
            self._ddb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            existing = error.response.get("Item") or await self._get(session_id, turn_id)
            if existing is None:  # deleted in between (TTL): a fresh record is right
                return await self.open(session_id, turn_id, channel)
            return _entry(session_id, turn_id, existing)
        return _entry(session_id, turn_id, item)

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
        """PENDING → SENT. False if the record was not PENDING (someone else finished it)."""
        values: dict[str, Any] = {
            ":sent": {"S": OutboxStatus.SENT.value},
            ":at": {"S": self._now()},
        }
        expression = "SET #status = :sent, sent_at = :at"
        ids = [i for i in message_ids if i]
        if ids:
            values[":ids"] = {"SS": sorted(set(ids))}
            expression += ", message_ids = :ids"
        return self._transition(session_id, turn_id, expression, values)

    async def mark_failed(self, session_id: str, turn_id: str, error: str) -> bool:
        """PENDING → FAILED: the platform refused the reply for good; it will not be retried."""
        values = {
            ":failed": {"S": OutboxStatus.FAILED.value},
            ":error": {"S": error[:_MAX_ERROR_CHARS]},
            ":at": {"S": self._now()},
        }
        expression = "SET #status = :failed, last_error = :error, failed_at = :at"
        return self._transition(session_id, turn_id, expression, values)

    async def note_attempt(self, session_id: str, turn_id: str, error: str) -> bool:
        """Count a failed, retryable attempt; the record stays PENDING."""
        values = {":one": {"N": "1"}, ":error": {"S": error[:_MAX_ERROR_CHARS]}}
        expression = "SET last_error = :error ADD attempts :one"
        return self._transition(session_id, turn_id, expression, values)

    def _transition(
        self, session_id: str, turn_id: str, expression: str, values: dict[str, Any]
    ) -> bool:
        names = {"#status": "status"}
        try:
            self._ddb.update_item(
                TableName=self.table,
                Key=_key(session_id, turn_id),
                UpdateExpression=expression,
                ConditionExpression="#status = :pending",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    **values,
                    ":pending": {"S": OutboxStatus.PENDING.value},
                },
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True
