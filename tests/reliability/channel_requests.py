"""Genuinely signed HTTP requests for every channel, for the served stack (real URLs, raw bytes),
and how each platform re-sends one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from infra.channels.signing import (
    generic_headers,
    meta_headers,
    slack_headers,
    telegram_headers,
    twilio_headers,
)
from tests.channels.payloads import (
    form_body,
    json_body,
    slack_event,
    tg_text_update,
    twilio_sms,
    wa_change,
    wa_contact,
    wa_notification,
    wa_text,
)
from tests.channels.signed import (
    GENERIC_SECRET,
    SLACK_SECRET,
    TG_SECRET,
    TWILIO_TOKEN,
    WA_APP_SECRET,
)

CHANNELS = ("telegram", "slack", "whatsapp", "twilio", "generic")


@dataclass(frozen=True)
class SignedRequest:
    channel: str
    body: bytes
    headers: dict[str, str]
    url: str

    def with_headers(self, **changes: str | None) -> SignedRequest:
        """Headers replaced (`x_slack_signature="…"`) or removed (`=None`)."""
        headers = {k.lower(): v for k, v in self.headers.items()}
        for name, value in changes.items():
            key = name.replace("_", "-").lower()
            if value is None:
                headers.pop(key, None)
            else:
                headers[key] = value
        return replace(self, headers=headers)

    def with_body(self, body: bytes) -> SignedRequest:
        """The body swapped after signing (tampered)."""
        return replace(self, body=body)


def now() -> int:
    return int(time.time())


def telegram(url: str, text: str, event: int, conversation: int, **_: str) -> SignedRequest:
    update = tg_text_update(text, update_id=event, chat_id=conversation, user_id=conversation)
    return SignedRequest("telegram", json_body(update), telegram_headers(TG_SECRET), url)


def slack(
    url: str, text: str, event: int, conversation: int, *, timestamp: int | None = None, **_: str
) -> SignedRequest:
    body = json_body(
        slack_event(
            text,
            event_type="message",
            channel_type="im",
            event_id=f"Ev{event:08d}",
            channel=f"D{conversation:08d}",
            ts=f"{1_700_000_000 + event}.000100",
        )
    )
    return SignedRequest("slack", body, slack_headers(SLACK_SECRET, body, timestamp or now()), url)


def whatsapp(url: str, text: str, event: int, conversation: int, **_: str) -> SignedRequest:
    sender = f"97254{conversation:07d}"
    change = wa_change(
        [wa_text(text, wamid=f"wamid.E{event}", sender=sender)], contacts=[wa_contact(sender)]
    )
    body = json_body(wa_notification(change))
    return SignedRequest("whatsapp", body, meta_headers(WA_APP_SECRET, body), url)


def twilio(url: str, text: str, event: int, conversation: int, **_: str) -> SignedRequest:
    sid = f"SM{event:032d}"
    params = twilio_sms(
        text, MessageSid=sid, SmsMessageSid=sid, SmsSid=sid, From=f"+1415{conversation:07d}"
    )
    return SignedRequest(
        "twilio", form_body(params), twilio_headers(TWILIO_TOKEN, url, params), url
    )


def generic(
    url: str, text: str, event: int, conversation: int, *, callback_url: str = "", **_: str
) -> SignedRequest:
    body = json.dumps(
        {
            "event_id": f"evt-{event}",
            "conversation_id": f"conv-{conversation}",
            "customer_id": f"cust-{conversation}",
            "text": text,
            "callback_url": callback_url,
        }
    ).encode()
    return SignedRequest("generic", body, generic_headers(GENERIC_SECRET, body, now()), url)


BUILDERS: dict[str, Callable[..., SignedRequest]] = {
    "telegram": telegram,
    "slack": slack,
    "whatsapp": whatsapp,
    "twilio": twilio,
    "generic": generic,
}


def retried(request: SignedRequest, attempt: int) -> SignedRequest:
    """How the platform re-sends `request`: the same bytes, except Slack, which signs each retry
    again with a new timestamp and numbers it (`X-Slack-Retry-Num`)."""
    if request.channel != "slack" or attempt == 0:
        return request
    timestamp = now()
    headers = slack_headers(SLACK_SECRET, request.body, timestamp) | {
        "X-Slack-Retry-Num": str(min(attempt, 3)),
        "X-Slack-Retry-Reason": "http_timeout",
    }
    return replace(request, headers=headers)
