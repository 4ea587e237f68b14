"""Test secrets, and genuinely signed inbound requests for each channel (signed the way each
platform signs, with `infra.channels.signing`).

Slack's and Twilio's secrets are the ones of their documented test vectors and the WhatsApp app
secret is the (since reset) one of pywa's genuine Meta-signed body, so known answers line up.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr

from infra.channels.base import ChannelRequest
from infra.channels.registry import ChannelSecrets
from infra.channels.signing import (
    generic_headers,
    meta_headers,
    slack_headers,
    telegram_headers,
    twilio_headers,
)
from tests.channels.payloads import TWILIO_ACCOUNT_SID, form_body, json_body

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW_TS = int(NOW.timestamp())

TG_SECRET = "tg-webhook_secret-0123"
TG_BOT_TOKEN = "700100200:AAE-bot_token-xyz"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented example secret
SLACK_BOT_TOKEN = "xoxb-1111-2222-slacktoken"
WA_APP_SECRET = "1222e786b144d0e85b9f365372d93676"  # pywa's genuine vector (secret since reset)
WA_VERIFY_TOKEN = "wa-verify-token-42"
WA_ACCESS_TOKEN = "EAAG-wa-access-token"
TWILIO_TOKEN = "12345"  # Twilio's documented example auth token
GENERIC_SECRET = "generic-shared-secret"

ALL_SECRETS = (
    TG_SECRET,
    TG_BOT_TOKEN,
    SLACK_SECRET,
    SLACK_BOT_TOKEN,
    WA_APP_SECRET,
    WA_VERIFY_TOKEN,
    WA_ACCESS_TOKEN,
    TWILIO_TOKEN,
    GENERIC_SECRET,
)

PUBLIC_BASE_URL = "https://hooks.example.com"
TWILIO_PATH = "/webhooks/twilio"
TWILIO_URL = PUBLIC_BASE_URL + TWILIO_PATH


def channel_secrets() -> ChannelSecrets:
    return ChannelSecrets(
        telegram_secret_token=SecretStr(TG_SECRET),
        telegram_bot_token=SecretStr(TG_BOT_TOKEN),
        slack_signing_secret=SecretStr(SLACK_SECRET),
        slack_bot_token=SecretStr(SLACK_BOT_TOKEN),
        whatsapp_app_secret=SecretStr(WA_APP_SECRET),
        whatsapp_verify_token=SecretStr(WA_VERIFY_TOKEN),
        whatsapp_access_token=SecretStr(WA_ACCESS_TOKEN),
        twilio_auth_token=SecretStr(TWILIO_TOKEN),
        twilio_account_sid=SecretStr(TWILIO_ACCOUNT_SID),
        generic_secret=SecretStr(GENERIC_SECRET),
    )


def _bytes(body: dict[str, Any] | bytes) -> bytes:
    return json_body(body) if isinstance(body, dict) else body


def _request(
    url: str, body: bytes, headers: dict[str, str], method: str = "POST"
) -> ChannelRequest:
    return ChannelRequest.from_http(method, url, headers=headers, body=body, received_at=NOW)


def telegram_request(
    update: dict[str, Any] | bytes, *, secret: str = TG_SECRET, **headers: str
) -> ChannelRequest:
    return _request(
        "https://hooks.example.com/webhooks/telegram",
        _bytes(update),
        telegram_headers(secret) | headers,
    )


def slack_request(
    body: dict[str, Any] | bytes,
    *,
    timestamp: int | str = NOW_TS,
    secret: str = SLACK_SECRET,
    content_type: str = "application/json",
) -> ChannelRequest:
    raw = _bytes(body)
    return _request(
        "https://hooks.example.com/webhooks/slack",
        raw,
        slack_headers(secret, raw, timestamp, content_type=content_type),
    )


def meta_request(body: dict[str, Any] | bytes, *, secret: str = WA_APP_SECRET) -> ChannelRequest:
    raw = _bytes(body)
    return _request("https://hooks.example.com/webhooks/whatsapp", raw, meta_headers(secret, raw))


def twilio_request(
    params: dict[str, str], *, url: str = TWILIO_URL, token: str = TWILIO_TOKEN
) -> ChannelRequest:
    """Signed for `url` (what Twilio called); the request itself arrives at `url` too."""
    return _request(url, form_body(params), twilio_headers(token, url, params))


def generic_request(
    body: dict[str, Any] | bytes, *, timestamp: int | str = NOW_TS, secret: str = GENERIC_SECRET
) -> ChannelRequest:
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    return _request(
        "https://hooks.example.com/webhooks/generic", raw, generic_headers(secret, raw, timestamp)
    )


def with_headers(request: ChannelRequest, **changes: str | None) -> ChannelRequest:
    """`request` with headers replaced (`x_slack_signature="…"`) or removed (`=None`)."""
    headers = dict(request.headers)
    for name, value in changes.items():
        key = name.replace("_", "-").lower()
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return request.model_copy(update={"headers": headers})


def with_body(request: ChannelRequest, body: bytes) -> ChannelRequest:
    """`request` with its body swapped after signing (a tampered request)."""
    return request.model_copy(update={"body": body})
