"""Lambda events as AWS delivers them: API Gateway HTTP API (payload v2) and SQS FIFO batches."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from infra.turn_queue import QueuedMessage
from waypoint.local_server import queue_records

API_HOST = "abcdef1234.execute-api.us-east-1.amazonaws.com"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:waypoint-local-turns.fifo"


def http_event(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    route: str | None = None,
    base64_body: bool = False,
    host: str = API_HOST,
) -> dict[str, Any]:
    """An HTTP API (v2) event for `method path`, headers lower-cased as API Gateway sends them."""
    raw_query = urlencode(dict(query or {}))
    all_headers = {
        "host": host,
        "x-forwarded-proto": "https",
        "x-forwarded-port": "443",
        "content-length": str(len(body)),
        **{name.lower(): value for name, value in (headers or {}).items()},
    }
    now = int(time.time() * 1000)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route or f"{method} {path}",
        "rawPath": path,
        "rawQueryString": raw_query,
        "headers": all_headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": host.split(".", 1)[0],
            "domainName": host,
            "domainPrefix": host.split(".", 1)[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": all_headers.get("user-agent", "test"),
            },
            "requestId": uuid.uuid4().hex[:16],
            "routeKey": route or f"{method} {path}",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now / 1000)),
            "timeEpoch": now,
        },
        "isBase64Encoded": base64_body,
    }
    if raw_query:
        event["queryStringParameters"] = dict(query or {})
    if body:
        event["body"] = base64.b64encode(body).decode() if base64_body else body.decode()
    return event


def event_body(event: Mapping[str, Any]) -> bytes:
    """The raw body bytes of an HTTP API event."""
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()


def with_body(event: dict[str, Any], body: bytes) -> dict[str, Any]:
    """`event` carrying `body` instead (same encoding), content-length updated."""
    event = json.loads(json.dumps(event))
    event["body"] = (
        base64.b64encode(body).decode() if event.get("isBase64Encoded") else body.decode()
    )
    event["headers"]["content-length"] = str(len(body))
    return event


def sqs_record(
    queued: QueuedMessage,
    *,
    message_id: str | None = None,
    receive_count: int = 1,
    body: str | None = None,
) -> dict[str, Any]:
    """One record of a FIFO queue's Lambda event, grouped by session as the webhook sends it."""
    text = body if body is not None else queued.model_dump_json()
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": uuid.uuid4().hex,
        "body": text,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": str(int(time.time() * 1000)),
            "SequenceNumber": str(int(time.time() * 1_000_000)),
            "MessageGroupId": queued.session_id,
            "SenderId": "AIDAEXAMPLE",
            "MessageDeduplicationId": queued.dedup_id,
            "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000)),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(text.encode()).hexdigest(),  # what SQS sends
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def sqs_event(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": list(records)}


def records_from_queue(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Lambda records for messages received from the (moto) queue, as the event source mapping
    builds them (the same code the local server's poller uses)."""
    return queue_records(messages, QUEUE_ARN)
