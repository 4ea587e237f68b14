"""Whatever arrives, `handle` either returns an outcome or raises a typed `WebhookRejected`:
never a KeyError, TypeError, RecursionError … that would become a 500 (and a retry storm).

Three depths: raw garbage (stopped at the guards), arbitrary JSON / form data correctly signed
(reaches the parsers), and genuine payloads with random parts replaced, correctly signed (reaches
the normalizers)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infra.channels.base import ChannelRequest, WebhookOutcome
from infra.channels.errors import WebhookRejected
from infra.channels.registry import build_channels
from tests.channels.conftest import SettableClock
from tests.channels.payloads import (
    generic_message,
    slack_block_actions,
    slack_event,
    slack_form,
    tg_click_update,
    tg_text_update,
    twilio_sms,
    wa_button_reply,
    wa_change,
    wa_contact,
    wa_list_reply,
    wa_notification,
    wa_status,
    wa_text,
)
from tests.channels.signed import (
    channel_secrets,
    generic_request,
    meta_request,
    slack_request,
    telegram_request,
    twilio_request,
)

CHANNELS = build_channels(channel_secrets(), SettableClock())
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
header_names = st.sampled_from(
    [
        "content-type",
        "content-length",
        "x-telegram-bot-api-secret-token",
        "x-slack-signature",
        "x-slack-request-timestamp",
        "x-hub-signature-256",
        "x-twilio-signature",
        "x-waypoint-signature",
        "x-waypoint-timestamp",
    ]
)
content_types = st.sampled_from(
    ["application/json", "application/x-www-form-urlencoded", "text/plain", ""]
)


def handled(channel: str, request: ChannelRequest) -> WebhookOutcome | None:
    """Run `handle`; typed rejections are fine (None), anything else fails the test."""
    try:
        outcome = CHANNELS[channel].handle(request)
    except WebhookRejected as rejected:
        assert rejected.status in (400, 401, 403, 404, 405, 413, 415)
        return None
    assert outcome.kind in ("messages", "handshake", "ignored")
    assert outcome.kind != "messages" or outcome.messages
    return outcome


@FUZZ
@given(
    channel=st.sampled_from(sorted(CHANNELS)),
    method=st.sampled_from(["GET", "POST", "PUT", "post"]),
    headers=st.dictionaries(header_names, st.text(max_size=80), max_size=6),
    content_type=content_types,
    body=st.binary(max_size=512),
    query=st.dictionaries(
        st.sampled_from(["hub.mode", "hub.verify_token", "hub.challenge", "x"]),
        st.text(max_size=20),
    ),
)
@example(  # found by this test: "¹".isdigit() is True, int("¹") raises
    channel="generic",
    method="POST",
    headers={"content-length": "\u00b9", "x-waypoint-timestamp": "\u0661\u0662"},
    content_type="application/json",
    body=b"",
    query={},
)
def test_garbage_requests_only_raise_typed_errors(
    channel: str,
    method: str,
    headers: dict[str, str],
    content_type: str,
    body: bytes,
    query: dict[str, str],
) -> None:
    request = ChannelRequest(
        method=method,
        url="https://hooks.example.com/webhooks/x",
        path="/webhooks/x",
        headers={"content-type": content_type} | headers,
        query=query,
        body=body,
    )
    handled(channel, request)


@FUZZ
@given(channel=st.sampled_from(["telegram", "slack", "whatsapp", "generic"]), data=json_values)
def test_signed_arbitrary_json_only_raises_typed_errors(channel: str, data: Any) -> None:
    body = json.dumps(data).encode()
    build = {
        "telegram": telegram_request,
        "slack": slack_request,
        "whatsapp": meta_request,
        "generic": generic_request,
    }[channel]
    handled(channel, build(body))


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(
            [
                "MessageSid",
                "AccountSid",
                "From",
                "To",
                "Body",
                "SmsStatus",
                "ButtonPayload",
                "NumMedia",
                "MediaUrl0",
                "MediaContentType0",
                "Latitude",
                "Longitude",
                "x",
            ]
        ),
        st.text(max_size=20),
    )
)
def test_signed_arbitrary_twilio_forms_only_raise_typed_errors(params: dict[str, str]) -> None:
    handled("twilio", twilio_request(twilio_sms() | params))


def _tg_media() -> dict[str, Any]:
    update = tg_text_update()
    del update["message"]["text"]
    update["message"] |= {
        "caption": "see",
        "photo": [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}],
        "voice": {"file_id": "v", "file_unique_id": "w", "duration": 1, "mime_type": "audio/ogg"},
        "venue": {"location": {"latitude": 1.5, "longitude": 2.5}, "title": "T", "address": "A"},
        "location": {"latitude": 1.5, "longitude": 2.5},
    }
    return update


def _wa_media() -> list[dict[str, Any]]:
    image = wa_text() | {"type": "image", "image": {"id": "m", "mime_type": "image/jpeg"}}
    voice = wa_text(wamid="wamid.V") | {"type": "audio", "audio": {"id": "a", "voice": True}}
    place = {"latitude": 1.0, "longitude": 2.0, "name": "N", "address": "A"}
    location = wa_text(wamid="wamid.L") | {"type": "location", "location": place}
    return [image, voice, location]


GENUINE_PAYLOADS: dict[str, list[dict[str, Any]]] = {
    "telegram": [tg_text_update(), tg_click_update(), tg_text_update("t", topic=3), _tg_media()],
    "slack": [
        slack_event(),
        slack_event(event_type="message", channel_type="im"),
        slack_event(
            "see file",
            event_type="message",
            subtype="file_share",
            files=[{"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 3}],
        ),
    ],
    "slack-form": [slack_block_actions()],
    "whatsapp": [
        wa_notification(
            wa_change(
                [wa_text(), wa_button_reply(), wa_list_reply(), *_wa_media()],
                contacts=[wa_contact(user_id="US.1")],
                statuses=[wa_status()],
            )
        )
    ],
    "generic": [generic_message(), generic_message("", choice="c")],
}


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        document = document[step]
    if value is _DELETE:
        del document[path[-1]]
    else:
        document[path[-1]] = value


_DELETE = object()


@FUZZ
@given(kind=st.sampled_from(sorted(GENUINE_PAYLOADS)), data=st.data())
def test_signed_genuine_payloads_with_random_parts_replaced_only_raise_typed_errors(
    kind: str, data: st.DataObject
) -> None:
    payload = copy.deepcopy(data.draw(st.sampled_from(GENUINE_PAYLOADS[kind])))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(payload)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        _replace(payload, path, data.draw(json_values | st.just(_DELETE)))
    if kind == "slack-form":
        handled(
            "slack",
            slack_request(slack_form(payload), content_type="application/x-www-form-urlencoded"),
        )
        return
    build = {
        "telegram": telegram_request,
        "slack": slack_request,
        "whatsapp": meta_request,
        "generic": generic_request,
    }[kind]
    handled(kind, build(payload))
