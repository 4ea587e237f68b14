"""Inbound event dedup on DynamoDB: one claim item per (channel, event id), with a lease and a
TTL (`INBOX#{channel}#{event_id}` / `INBOX`; keys: `infra.aws.dynamo_table`)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from engine.clock import SystemClock
from engine.ports import Clock
from engine.sessions.inbox import ClaimOutcome
from infra.aws.dynamo_table import _is, _key, _key_part, _n, _s, _Table

CLAIMED = "CLAIMED"
QUEUED = "QUEUED"
_INBOX_NAMES = {"#state": "state", "#owner": "owner"}  # both DynamoDB reserved words
ONE_MOMENT_AT = "one_moment_at"  # when the event's "one moment" line went out (epoch seconds)


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

    async def note_one_moment(self, channel: str, event_id: str, ttl_seconds: int) -> bool:
        """True for the first caller only (`one_moment_at` written under the condition that it
        is not there yet): two deliveries of a message never both send its "one moment" line.
        A missing claim is created, without a state (it reads as QUEUED, which the message is)
        and with `ttl_seconds` to live; an existing claim keeps its own expiry."""
        now = self._now()
        try:
            self._table.ddb.update_item(
                TableName=self._table.name,
                Key=_key(self._pk(channel, event_id), "INBOX"),
                UpdateExpression=(
                    f"SET {ONE_MOMENT_AT} = :now, expires_at = if_not_exists(expires_at, :expires)"
                ),
                ConditionExpression=f"attribute_not_exists({ONE_MOMENT_AT})",
                ExpressionAttributeValues={":now": _n(now), ":expires": _n(now + ttl_seconds)},
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
