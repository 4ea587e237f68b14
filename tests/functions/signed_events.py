"""Genuinely signed webhook requests, as HTTP API events, for every channel (signed with
`infra.channels.signing` and the test secrets of tests/channels/signed.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from infra.channels.signing import (
    generic_headers,
    meta_headers,
    slack_headers,
    telegram_headers,
    twilio_headers,
)
from tests.channels.payloads import form_body, json_body
from tests.channels.signed import (
    GENERIC_SECRET,
    PUBLIC_BASE_URL,
    SLACK_SECRET,
    TG_SECRET,
    TWILIO_TOKEN,
    WA_APP_SECRET,
    WA_VERIFY_TOKEN,
)
from tests.functions.lambda_events import http_event

ROUTE_POST = "POST /webhooks/{channel}"
ROUTE_GET = "GET /webhooks/{channel}"


def now() -> int:
    return int(time.time())


def _post(channel: str, body: bytes, headers: dict[str, str], **options: Any) -> dict[str, Any]:
    return http_event(
        "POST", f"/webhooks/{channel}", body=body, headers=headers, route=ROUTE_POST, **options
    )


def telegram(update: dict[str, Any], *, secret: str = TG_SECRET) -> dict[str, Any]:
    return _post("telegram", json_body(update), telegram_headers(secret))


def slack(
    body: dict[str, Any] | bytes,
    *,
    timestamp: int | None = None,
    secret: str = SLACK_SECRET,
    content_type: str = "application/json",
    retry: int | None = None,
) -> dict[str, Any]:
    raw = json_body(body) if isinstance(body, dict) else body
    headers = slack_headers(secret, raw, timestamp or now(), content_type=content_type)
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return _post("slack", raw, headers)


def whatsapp(body: dict[str, Any] | bytes, *, secret: str = WA_APP_SECRET) -> dict[str, Any]:
    raw = json_body(body) if isinstance(body, dict) else body
    return _post("whatsapp", raw, meta_headers(secret, raw))


def whatsapp_handshake(
    *, token: str = WA_VERIFY_TOKEN, challenge: str = "1158201444"
) -> dict[str, Any]:
    query = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
    return http_event("GET", "/webhooks/whatsapp", query=query, route=ROUTE_GET)


def twilio(
    params: dict[str, str],
    *,
    token: str = TWILIO_TOKEN,
    signed_url: str = PUBLIC_BASE_URL + "/webhooks/twilio",
) -> dict[str, Any]:
    # API Gateway base64-encodes form bodies; the webhook must decode them before verifying.
    return _post(
        "twilio", form_body(params), twilio_headers(token, signed_url, params), base64_body=True
    )


def generic(
    body: dict[str, Any], *, timestamp: int | None = None, secret: str = GENERIC_SECRET
) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    return _post("generic", raw, generic_headers(secret, raw, timestamp or now()))
