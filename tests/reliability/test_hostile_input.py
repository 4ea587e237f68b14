"""Hostile input on every channel, through the webhook Lambda handler (API Gateway HTTP API events)
over the moto stack: forged, unsigned, tampered, stale, replayed, oversized, malformed, of the
wrong content type or method → the right status and nothing written (no inbox claim, no queued
message, no session). Odd Unicode in genuine messages → accepted, cleaned, answered once."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from engine.sessions.session import EventSource
from infra.channels.ingress import DEFAULT_MAX_BODY_BYTES
from infra.channels.registry import build_channels
from infra.channels.signing import (
    generic_headers,
    meta_headers,
    slack_headers,
    telegram_headers,
    twilio_headers,
)
from infra.channels.text import MAX_INBOUND_CHARS
from infra.turn_queue import QueuedMessage
from tests.channels.payloads import (
    json_body,
    slack_event,
    tg_click_update,
    tg_text_update,
    wa_button_reply,
    wa_change,
    wa_contact,
    wa_notification,
    wa_text,
)
from tests.channels.signed import (
    GENERIC_SECRET,
    PUBLIC_BASE_URL,
    SLACK_SECRET,
    TG_SECRET,
    TWILIO_TOKEN,
    WA_APP_SECRET,
    channel_secrets,
)
from tests.functions.conftest import assert_no_secret_in, drain, invoke_webhook, receive_all
from tests.functions.lambda_events import http_event
from tests.functions.platforms import CALLBACK_URL
from tests.functions.signed_events import now
from tests.reliability.channel_requests import BUILDERS
from tests.reliability.conftest import SharedStack

CHANNELS = ("telegram", "slack", "whatsapp", "twilio", "generic")
ROUTE = "POST /webhooks/{channel}"
TWILIO_URL = PUBLIC_BASE_URL + "/webhooks/twilio"
_ids = itertools.count(1000)


# -- genuine requests, as raw parts -------------------------------------------------------------


def payload(channel: str, text: str = "hi", n: int | None = None) -> bytes:
    """A genuine message body with a fresh event id (and conversation)."""
    n = next(_ids) if n is None else n
    url = f"{PUBLIC_BASE_URL}/webhooks/{channel}"
    return BUILDERS[channel](url, text, n, n, callback_url=CALLBACK_URL).body


def sign(
    channel: str,
    body: bytes,
    *,
    secret: str | None = None,
    timestamp: int | None = None,
    content_type: str | None = None,
) -> dict[str, str]:
    """The headers the platform would send with `body` (signed with `secret` if given)."""
    if channel == "telegram":
        headers = telegram_headers(secret or TG_SECRET)
    elif channel == "slack":
        headers = slack_headers(secret or SLACK_SECRET, body, timestamp or now())
    elif channel == "whatsapp":
        headers = meta_headers(secret or WA_APP_SECRET, body)
    elif channel == "twilio":
        pairs = [tuple(p.split("=", 1)) for p in body.decode("latin-1").split("&") if "=" in p]
        from urllib.parse import unquote_plus

        params = [(unquote_plus(k), unquote_plus(v, errors="replace")) for k, v in pairs]
        headers = twilio_headers(secret or TWILIO_TOKEN, TWILIO_URL, params)
    else:
        headers = generic_headers(secret or GENERIC_SECRET, body, timestamp or now())
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


def event(
    channel: str, body: bytes, headers: dict[str, str], method: str = "POST"
) -> dict[str, Any]:
    """An API Gateway HTTP API event; form bodies arrive base64-encoded, as API Gateway sends
    them, and so do bodies that are not valid UTF-8."""
    try:
        body.decode("utf-8")
        binary = channel == "twilio"
    except UnicodeDecodeError:
        binary = True
    return http_event(
        method, f"/webhooks/{channel}", body=body, headers=headers, route=ROUTE, base64_body=binary
    )


# -- what was written ---------------------------------------------------------------------------


def written(stack: Any) -> dict[str, Any]:
    """Inbox claims, sessions and queued messages now in the stack."""
    items = stack.client("dynamodb").scan(TableName=stack.table_name)["Items"]
    attributes = stack.client("sqs").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return {
        "inbox": {i["pk"]["S"] for i in items if i["pk"]["S"].startswith("INBOX#")},
        "sessions": {i["pk"]["S"] for i in items if i["sk"]["S"] == "META"},
        "queued": sum(int(v) for v in attributes.values()),
    }


def new_since(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    return {
        "inbox": len(after["inbox"] - before["inbox"]),
        "sessions": len(after["sessions"] - before["sessions"]),
        "queued": after["queued"] - before["queued"],
    }


NOTHING = {"inbox": 0, "sessions": 0, "queued": 0}


def assert_refused(response: dict[str, Any], status: int) -> None:
    assert response["statusCode"] == status, response.get("body")
    answer = json.loads(response["body"])
    error = answer.get("error") or answer.get("detail")  # the router's own 404 / 405 say detail
    assert error and "Traceback" not in error and 'File "' not in error
    assert_no_secret_in(response["body"])


# -- the attacks --------------------------------------------------------------------------------

Attack = Callable[[str], dict[str, Any]]


def forged(channel: str) -> dict[str, Any]:
    body = payload(channel)
    return event(channel, body, sign(channel, body, secret="attacker-guess-0123456789abcdef"))


def unsigned(channel: str) -> dict[str, Any]:
    body = payload(channel)
    headers = sign(channel, body)
    for name in list(headers):
        if "signature" in name.lower() or "secret" in name.lower():
            del headers[name]
    return event(channel, body, headers)


def tampered(channel: str) -> dict[str, Any]:
    body = payload(channel, "transfer 5 to 1234324")
    return event(channel, body.replace(b"5", b"9"), sign(channel, body))


def stale(channel: str) -> dict[str, Any]:
    body = payload(channel)
    return event(channel, body, sign(channel, body, timestamp=now() - 301))


def from_the_future(channel: str) -> dict[str, Any]:
    body = payload(channel)
    return event(channel, body, sign(channel, body, timestamp=now() + 3600))


def oversized(channel: str) -> dict[str, Any]:
    limit = 3 * 1024 * 1024 if channel == "whatsapp" else DEFAULT_MAX_BODY_BYTES
    body = payload(channel, "x" * (limit + 1))
    return event(channel, body, sign(channel, body))


def declared_oversized(channel: str) -> dict[str, Any]:
    body = payload(channel)
    request = event(channel, body, sign(channel, body))
    request["headers"]["content-length"] = str(64 * 1024 * 1024)
    return request


def malformed(channel: str) -> dict[str, Any]:
    body = b"a=%zz&=&&b" if channel == "twilio" else b'{"update_id": 1, "message": {"text": '
    return event(channel, body, sign(channel, body))


def not_an_object(channel: str) -> dict[str, Any]:
    body = b"[1, 2, 3]" if channel != "twilio" else b"\xff\xfe=\x00"
    return event(channel, body, sign(channel, body))


def deeply_nested(channel: str) -> dict[str, Any]:
    body = b'{"a":' * 20_000 + b"1" + b"}" * 20_000  # far past the parser's recursion limit
    if channel == "twilio":
        body = b"&".join(b"k%d=v" % i for i in range(5000))
    return event(channel, body, sign(channel, body))


def wrong_content_type(channel: str) -> dict[str, Any]:
    body = payload(channel)
    return event(channel, body, sign(channel, body, content_type="text/plain"))


def xml_content(channel: str) -> dict[str, Any]:
    body = b"<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'a'>]><x>&a;</x>"
    return event(channel, body, sign(channel, body, content_type="application/xml"))


def wrong_method(channel: str) -> dict[str, Any]:
    body = payload(channel)
    return event(channel, body, sign(channel, body), method="PUT")


ATTACKS: dict[str, tuple[Attack, int]] = {
    "forged-signature": (forged, 401),
    "missing-signature": (unsigned, 401),
    "tampered-body": (tampered, 401),
    "stale-timestamp": (stale, 401),
    "timestamp-from-the-future": (from_the_future, 401),
    "oversized-body": (oversized, 413),
    "declared-oversized-body": (declared_oversized, 413),
    "malformed-body": (malformed, 400),
    "json-array-or-bad-bytes": (not_an_object, 400),
    "pathologically-nested": (deeply_nested, 400),
    "wrong-content-type": (wrong_content_type, 415),
    "xml-entities": (xml_content, 415),
    "wrong-method": (wrong_method, 405),
}
# What the platform's own scheme cannot detect: Telegram signs nothing (a static secret header,
# so a tampered body is genuine to us) and only Slack and the generic channel sign a timestamp.
NOT_APPLICABLE = {
    ("telegram", "tampered-body"),
    *(
        (c, a)
        for c in ("telegram", "whatsapp", "twilio")
        for a in ("stale-timestamp", "timestamp-from-the-future")
    ),
}
CASES = [
    pytest.param(channel, attack, id=f"{channel}-{attack}")
    for channel in CHANNELS
    for attack in ATTACKS
    if (channel, attack) not in NOT_APPLICABLE
]


@pytest.mark.parametrize(("channel", "attack"), CASES)
def test_a_hostile_request_gets_the_right_status_and_writes_nothing(
    channel: str, attack: str, shared: SharedStack
) -> None:
    build, status = ATTACKS[attack]
    before = written(shared.stack)

    response = invoke_webhook(build(channel))

    assert_refused(response, status)
    assert new_since(before, written(shared.stack)) == NOTHING


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_replayed_event_is_acknowledged_and_changes_nothing(
    channel: str, shared: SharedStack
) -> None:
    body = payload(channel)
    start, replies = written(shared.stack), len(shared.platforms.replies())
    assert invoke_webhook(event(channel, body, sign(channel, body)))["statusCode"] == 200
    assert drain(shared.stack) == [{"batchItemFailures": []}]
    before = written(shared.stack)
    assert new_since(start, before) == {"inbox": 1, "sessions": 1, "queued": 0}
    assert len(shared.platforms.replies()) == replies + 1

    for _ in range(3):  # hours later, the same event id again (re-signed where it is timed)
        assert invoke_webhook(event(channel, body, sign(channel, body)))["statusCode"] == 200

    assert new_since(before, written(shared.stack)) == NOTHING
    assert drain(shared.stack) == []
    assert len(shared.platforms.replies()) == replies + 1


def test_an_unknown_channel_is_404_and_writes_nothing(shared: SharedStack) -> None:
    before = written(shared.stack)
    for name in ("fax", "..%2F..%2Fetc", "telegram%00", "TELEGRAM", "x" * 300):
        response = invoke_webhook(http_event("POST", f"/webhooks/{name}", body=b"{}", route=ROUTE))
        assert_refused(response, 404)
    assert new_since(before, written(shared.stack)) == NOTHING


def test_a_disabled_channel_is_404_naming_what_to_configure(
    shared: SharedStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = channel_secrets().model_copy(update={"twilio_auth_token": None})
    channels = build_channels(secrets, public_base_url=PUBLIC_BASE_URL)
    monkeypatch.setattr(shared.runtime, "channels", channels)
    body = payload("twilio")
    before = written(shared.stack)

    response = invoke_webhook(event("twilio", body, sign("twilio", body)))

    assert_refused(response, 404)
    assert "WAYPOINT_TWILIO_AUTH_TOKEN" in json.loads(response["body"])["error"]
    assert new_since(before, written(shared.stack)) == NOTHING


# -- odd Unicode in genuine messages ------------------------------------------------------------

LONE_SURROGATE = "half an emoji: \ud83d!"
ODD_TEXTS = {
    "rtl-override": "please pay \u202eLIAME\u202c now",
    "nul-and-controls": "hi\x00\x07\x1b[31m there\x7f",
    "four-byte-emoji": "💸🏦😀 \U0001f9d1\u200d\U0001f4bb",
    "huge-combining-sequence": "e" + "\u0301" * 20_000,
    "bom-and-zero-width": "\ufeff\u200bhi\u200c\u2060",
    "line-separators": "one\u2028two\u2029three\r\nfour",
    "lone-surrogate": LONE_SURROGATE,
}


def odd_payload(channel: str, text: str) -> bytes:
    if channel == "twilio" and text == LONE_SURROGATE:
        # a form body cannot carry a surrogate as UTF-8: the nearest thing is its invalid bytes
        return payload("twilio", "half an emoji: SURROGATE!").replace(b"SURROGATE", b"%ED%A0%BD")
    return payload(channel, text)


@pytest.mark.parametrize("name", list(ODD_TEXTS))
@pytest.mark.parametrize("channel", CHANNELS)
def test_odd_unicode_is_accepted_cleaned_and_answered_once(
    channel: str, name: str, shared: SharedStack
) -> None:
    body = odd_payload(channel, ODD_TEXTS[name])
    before, replies = written(shared.stack), len(shared.platforms.replies())

    response = invoke_webhook(event(channel, body, sign(channel, body)))

    assert response["statusCode"] == 200, response.get("body")
    (message,) = receive_all(shared.stack)
    text = QueuedMessage.model_validate_json(message["Body"]).message.text
    assert text and len(text) <= MAX_INBOUND_CHARS
    assert text.encode("utf-8")  # storable and sendable: no unpaired surrogates left
    assert not any(ch in text for ch in "\x00\x07\x1b\x7f\r\u2028\u2029")
    _make_visible(shared.stack, message)
    assert drain(shared.stack) == [{"batchItemFailures": []}]
    (session,) = written(shared.stack)["sessions"] - before["sessions"]
    state = shared.runtime.run(shared.runtime.sessions.load(session.removeprefix("SESSION#")))
    assert state is not None
    assert [e.text for e in state.events if e.source is EventSource.CUSTOMER] == [text]
    assert len(shared.platforms.replies()) > replies
    assert written(shared.stack)["queued"] == 0


HALF_EMOJI = "x\ud83dy"
SURROGATE_FIELDS: dict[str, Callable[[], dict[str, Any]]] = {
    "telegram-button-data": lambda: _signed_json(
        "telegram", tg_click_update(HALF_EMOJI, update_id=next(_ids))
    ),
    "telegram-first-name": lambda: _signed_json(
        "telegram", _with_sender_name(tg_text_update("hi", update_id=next(_ids)), HALF_EMOJI)
    ),
    "slack-user-id": lambda: _signed_json(
        "slack",
        slack_event(
            "hi",
            event_type="message",
            channel_type="im",
            event_id=f"Ev{next(_ids)}",
            user=HALF_EMOJI,
        ),
    ),
    "whatsapp-button-id": lambda: _signed_json(
        "whatsapp",
        wa_notification(
            wa_change([wa_button_reply(HALF_EMOJI, "Billing", wamid=f"wamid.S{next(_ids)}")])
        ),
    ),
    "whatsapp-sender": lambda: _signed_json(
        "whatsapp",
        wa_notification(
            wa_change(
                [wa_text("hi", wamid=f"wamid.S{next(_ids)}", sender=HALF_EMOJI)],
                contacts=[wa_contact(HALF_EMOJI)],
            )
        ),
    ),
}


def _signed_json(channel: str, data: dict[str, Any]) -> dict[str, Any]:
    body = json_body(data)
    return event(channel, body, sign(channel, body))


def _with_sender_name(update: dict[str, Any], name: str) -> dict[str, Any]:
    update["message"]["from"]["first_name"] = name
    return update


@pytest.mark.parametrize("field", list(SURROGATE_FIELDS))
def test_an_unpaired_surrogate_in_any_field_is_accepted_or_refused_never_a_server_error(
    field: str, shared: SharedStack
) -> None:
    before = written(shared.stack)

    response = invoke_webhook(SURROGATE_FIELDS[field]())

    assert response["statusCode"] in (200, 400), response.get("body")
    new = new_since(before, written(shared.stack))
    if response["statusCode"] == 200:
        # the conversation's session may exist from an earlier test: at most one is created
        assert new["inbox"] == 1 and new["queued"] == 1 and new["sessions"] in (0, 1), new
    else:
        assert new == NOTHING
    receive_all(shared.stack)  # leave the queue as the next test expects it: nothing visible


def _make_visible(stack: Any, message: dict[str, Any]) -> None:
    stack.client("sqs").change_message_visibility(
        QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )


def test_every_attack_case_is_a_real_request_for_its_channel() -> None:
    """Guards the matrix itself: each attack's genuine counterpart is accepted."""
    for channel in CHANNELS:
        body = payload(channel)
        raw = event(channel, body, sign(channel, body))
        decoded = base64.b64decode(raw["body"]) if raw["isBase64Encoded"] else raw["body"].encode()
        assert decoded == body
