"""DynamoDB single-table layout: the key scheme, attribute values, item bodies and the table
access shared by the stores beside it — `dynamo_agents`, `dynamo_sessions` (whose items are built
in `dynamo_session_items`), `dynamo_inbox` and `dynamo_variables`. The underscored helpers here
are for those modules only.

Keys and access patterns are documented in docs/data-model.md; the short version:

    AGENT#{agent}                  VERSION#{version}   immutable snapshot body
    AGENT#{agent}                  PUBLISHED           pointer to the published version
    SESSION#{session}              META                state without events, `version`, `next_offset`
    SESSION#{session}              EVENT#{offset:010d} one event, as a later turn reads it
    SESSION#{session}              PAYLOAD#{offset:010d} what only the channel shows of that event
                                                       (a reply's options, a view); never read
                                                       by a turn (`engine.sessions.history.CHANNEL_PAYLOAD`)
    SESSION#{session}              TURN#{turn_id}      marker: this turn is committed
    SESSION#{session}              TRACE#{turn_id}     the turn's trace
    AGENT#{agent}#INFLIGHT#{shard} SESSION#{session}   a session with a journey in flight
                                                       (`infra.aws.in_flight`)
    CUSTOMER#{channel}#{customer}  SESSION#{session}   index: a session this person took part in
    ERASED#{digest}                ERASED              tombstone of an erased person: `erased_at`,
                                                       `expires_at` (TTL); the digest of
                                                       (channel, customer), never their id
    INBOX#{channel}#{event_id}     INBOX               dedup claim: `owner`, `state` CLAIMED → QUEUED,
                                                       `lease_until`, `expires_at` (TTL)
    VARS#{agent}#{customer}        VAR#{name}          one context variable value

The stores' methods are `async def` because the ports are, but they call sync boto3: a Lambda
container serves one request at a time, and aioboto3 neither works under in-process moto nor is
cheap to import. The low-level client is used (not the resource API): it is thread-safe and skips
a Decimal conversion layer we do not need, since every body is JSON text.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import ClientError

from engine.errors import WaypointError
from engine.privacy.erasure import person_digest
from infra.aws.clients import BUCKET_ENV, TABLE_ENV, client, required_env

Item = dict[str, Any]  # a DynamoDB item in low-level attribute-value form

META = "META"
PUBLISHED = "PUBLISHED"
MAX_TRANSACTION_ITEMS = 100  # DynamoDB's TransactWriteItems limit


class ItemTooLarge(WaypointError):
    """A body does not fit a DynamoDB item even gzipped, and no S3 bucket is configured."""


# --------------------------------------------------------------------------------------------------
# Keys and attribute values


def _key_part(value: str, what: str) -> str:
    # '#' separates key parts; allowing it inside a non-final part would make keys ambiguous.
    if "#" in value:
        raise ValueError(f"{what} must not contain '#': {value!r}")
    return value


def agent_pk(agent_id: str) -> str:
    return f"AGENT#{_key_part(agent_id, 'agent id')}"


def session_pk(session_id: str) -> str:
    return f"SESSION#{session_id}"


def event_sk(offset: int) -> str:
    return f"EVENT#{offset:010d}"  # zero-padded so the sort key orders events numerically


def payload_sk(offset: int) -> str:
    """The side item of an event's channel payload (outside the window Query's key range)."""
    return f"PAYLOAD#{offset:010d}"


def customer_pk(channel: str, customer_id: str) -> str:
    """The index partition of one person on one channel: the sessions they took part in."""
    return f"CUSTOMER#{_key_part(channel, 'channel')}#{customer_id}"


ERASED_SK = "ERASED"


def erasure_pk(channel: str, customer_id: str) -> str:
    """The tombstone of one erased person on one channel, named by their digest
    (`engine.privacy.erasure.person_digest`): the item outlives their data, so it holds no id."""
    return f"ERASED#{person_digest(channel, customer_id)}"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _key(pk: str, sk: str) -> Item:
    return {"pk": _s(pk), "sk": _s(sk)}


def _reason_codes(error: ClientError) -> list[str]:
    reasons = error.response.get("CancellationReasons") or []
    return [reason.get("Code", "None") for reason in reasons]


def _is(error: ClientError, code: str) -> bool:
    return bool(error.response.get("Error", {}).get("Code") == code)


# --------------------------------------------------------------------------------------------------
# Bodies: inline JSON, gzipped, or offloaded to S3


class ItemBodies:
    """Stores JSON text in an item as readable `body` when small, gzipped `body_gz` (Binary) when
    large, and in S3 with a `body_s3` pointer when even the gzip exceeds the item budget
    (DynamoDB items are capped at 400 KB including keys and attribute names)."""

    INLINE_LIMIT = 32 * 1024
    ITEM_BUDGET = 350 * 1024
    ATTRIBUTES = ("body", "body_gz", "body_s3")

    def __init__(self, bucket: str | None, s3: Any = None):
        self._bucket = bucket
        self._s3 = s3

    @property
    def s3(self) -> Any:
        # Created on first use: most Lambdas never offload, and a client costs cold-start time.
        if self._s3 is None:
            self._s3 = client("s3")
        return self._s3

    def encode(self, text: str, s3_key: str) -> Item:
        """Attributes holding `text`; `s3_key` names the object used if it must be offloaded."""
        raw = text.encode()
        if len(raw) <= self.INLINE_LIMIT:
            return {"body": _s(text)}
        packed = gzip.compress(raw)
        if len(packed) <= self.ITEM_BUDGET:
            return {"body_gz": {"B": packed}}
        if not self._bucket:
            raise ItemTooLarge(
                f"{s3_key}: {len(packed)} bytes gzipped exceed the {self.ITEM_BUDGET}-byte item "
                f"budget; set {BUCKET_ENV} so large bodies are offloaded to S3"
            )
        self.s3.put_object(
            Bucket=self._bucket, Key=s3_key, Body=packed, ContentType="application/gzip"
        )
        return {"body_s3": _s(f"s3://{self._bucket}/{s3_key}")}

    def decode(self, item: Item) -> str:
        """The JSON text stored by `encode`."""
        if "body" in item:
            return str(item["body"]["S"])
        if "body_gz" in item:
            return gzip.decompress(item["body_gz"]["B"]).decode()
        bucket, _, key = item["body_s3"]["S"].removeprefix("s3://").partition("/")
        packed = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return gzip.decompress(packed).decode()


def _set_expression(
    attributes: Item, remove: Sequence[str] = ()
) -> tuple[str, dict[str, str], Item]:
    """An UpdateExpression that sets `attributes` and removes `remove`, with placeholder names
    (so reserved words such as `version` are safe)."""
    names = {f"#a{i}": name for i, name in enumerate([*attributes, *remove])}
    by_name = {name: placeholder for placeholder, name in names.items()}
    values = {f":a{i}": value for i, value in enumerate(attributes.values())}
    expression = "SET " + ", ".join(f"{by_name[name]} = :a{i}" for i, name in enumerate(attributes))
    if remove:
        expression += " REMOVE " + ", ".join(by_name[name] for name in remove)
    return expression, names, values


# --------------------------------------------------------------------------------------------------
# Shared table access


class _Table:
    def __init__(self, table_name: str | None, dynamodb: Any):
        self.name = table_name or required_env(TABLE_ENV, "the DynamoDB state table")
        self.ddb = dynamodb or client("dynamodb")

    def get(self, pk: str, sk: str) -> Item | None:
        response = self.ddb.get_item(TableName=self.name, Key=_key(pk, sk), ConsistentRead=True)
        item: Item | None = response.get("Item")
        return item

    def query(
        self, key_condition: str, values: Item, *, projection: str | None = None
    ) -> Iterator[Item]:
        """Every item matching the key condition, in sort-key order, across pages (only the
        attributes `projection` names, when given)."""
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        if projection is not None:
            kwargs["ProjectionExpression"] = projection
        while True:
            page = self.ddb.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def transact(self, items: list[Item]) -> None:
        self.ddb.transact_write_items(TransactItems=items)
