"""WhatsApp Cloud API: the GET handshake, Meta-signed batches normalized (BSUID first), statuses
ignored; replies as text, reply buttons or lists through the Graph API (real local HTTP)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from infra.channels.base import Channel, ChannelRequest, OutboundReply, ReplyOption
from infra.channels.errors import (
    DeliveryRejected,
    HandshakeRejected,
    MalformedRequest,
    RateLimited,
    SignatureRejected,
)
from infra.channels.ingress import MAX_MESSAGE_AGE
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import (
    PHONE_NUMBER_ID,
    wa_button_reply,
    wa_change,
    wa_contact,
    wa_list_reply,
    wa_notification,
    wa_status,
    wa_text,
)
from tests.channels.signed import WA_ACCESS_TOKEN, WA_VERIFY_TOKEN, meta_request
from tests.channels.vectors import META_BODY, META_SIGNATURE

WA_ID = "972544401243"
BSUID = "US.13491208655302741918"


def handshake(
    mode: str | None = None, token: str | None = None, challenge: str | None = None
) -> ChannelRequest:
    """Meta's GET: `?hub.mode=…&hub.verify_token=…&hub.challenge=…` (parameters given)."""
    query = {"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge}
    params = urlencode({name: value for name, value in query.items() if value is not None})
    return ChannelRequest.from_http("GET", f"https://hooks.example.com/webhooks/whatsapp?{params}")


def _genuine_meta_request(received_at: datetime) -> ChannelRequest:
    return ChannelRequest.from_http(
        "POST",
        "https://hooks.example.com/webhooks/whatsapp",
        headers={"Content-Type": "application/json", "X-Hub-Signature-256": META_SIGNATURE},
        body=META_BODY,
        received_at=received_at,
    )


META_SENT_AT = datetime.fromtimestamp(1730231903, UTC)  # the body's own messages[].timestamp


def test_a_genuine_meta_signed_body_is_accepted(channels: dict[str, Channel]) -> None:
    # Received when Meta sent it (the body is from 2024; today it would be a replay).
    request = _genuine_meta_request(META_SENT_AT + timedelta(seconds=2))
    [message] = channels["whatsapp"].handle(request).messages

    assert (
        message.event_id
        == "wamid.HBgMOTcyNTQ0NDAxMjQzFQIAEhggM0RFQTNCMEEwRTY3QzUwODYzMDc4NjQ4QzM4ODAxM0YA"
    )
    assert message.account_id == PHONE_NUMBER_ID
    assert message.conversation_key == f"wa:{PHONE_NUMBER_ID}:{WA_ID}"  # no BSUID in 2024 payloads
    assert message.customer_id == WA_ID
    assert message.customer_name == "PyWa Tests"
    assert message.text == "Hey there! I am using PyWa."
    assert message.reply_to == {
        "phone_number_id": PHONE_NUMBER_ID,
        "message_id": message.event_id,
        "wa_id": WA_ID,
    }


def test_the_bsuid_is_preferred_over_the_phone_number(channels: dict[str, Channel]) -> None:
    change = wa_change([wa_text("hi")], contacts=[wa_contact(WA_ID, user_id=BSUID)])
    [message] = channels["whatsapp"].handle(meta_request(wa_notification(change))).messages
    assert message.conversation_key == f"wa:{PHONE_NUMBER_ID}:{BSUID}"
    assert message.customer_id == BSUID
    assert message.reply_to["bsuid"] == BSUID and message.reply_to["wa_id"] == WA_ID


def test_a_username_user_without_phone_number_is_keyed_on_the_bsuid(
    channels: dict[str, Channel],
) -> None:
    text = wa_text("hi", sender=None, from_user_id=BSUID)
    change = wa_change([text], contacts=[wa_contact(None, user_id=BSUID)])
    [message] = channels["whatsapp"].handle(meta_request(wa_notification(change))).messages
    assert message.customer_id == BSUID
    assert "wa_id" not in message.reply_to


def test_non_ascii_text_signed_as_meta_escapes_it(channels: dict[str, Channel]) -> None:
    notification = wa_notification(wa_change([wa_text("Grüße, 世界 👋")]))
    request = meta_request(notification)
    assert b"\\u00fc" in request.body  # Meta's (and json.dumps') escaping, signed as such
    [message] = channels["whatsapp"].handle(request).messages
    assert message.text == "Grüße, 世界 👋"


def test_button_and_list_replies_are_choices(channels: dict[str, Channel]) -> None:
    change = wa_change([wa_button_reply("billing", "Billing"), wa_list_reply("row-7", "Savings")])
    button, row = channels["whatsapp"].handle(meta_request(wa_notification(change))).messages
    assert (button.choice, button.text, button.raw_type) == (
        "billing",
        "Billing",
        "interactive.button_reply",
    )
    assert (row.choice, row.text, row.raw_type) == ("row-7", "Savings", "interactive.list_reply")
    assert button.event_id == "wamid.B1" and row.event_id == "wamid.L1"


def test_a_batch_yields_every_message_of_every_entry(channels: dict[str, Channel]) -> None:
    notification = wa_notification(
        wa_change([wa_text("one", wamid="wamid.1"), wa_text("two", wamid="wamid.2")]),
        wa_change([wa_text("three", wamid="wamid.3")], phone_number_id="999"),
    )
    notification["entry"].append(
        {"id": "2", "changes": [wa_change([wa_text("four", wamid="wamid.4")])]}
    )
    messages = channels["whatsapp"].handle(meta_request(notification)).messages
    assert [m.text for m in messages] == ["one", "two", "three", "four"]
    assert messages[2].conversation_key == f"wa:999:{WA_ID}"


def test_statuses_are_acknowledged_and_ignored(channels: dict[str, Channel]) -> None:
    change = wa_change(statuses=[wa_status(status="sent"), wa_status(status="read")])
    outcome = channels["whatsapp"].handle(meta_request(wa_notification(change)))
    assert outcome.kind == "ignored" and outcome.status == 200
    assert "statuses" in (outcome.reason or "")


def test_unsupported_message_types_are_ignored(channels: dict[str, Channel]) -> None:
    reaction = {
        "from": WA_ID,
        "id": "wamid.R",
        "timestamp": str(int(time.time())),
        "type": "reaction",
        "reaction": {"message_id": "wamid.X", "emoji": "👍"},
    }
    outcome = channels["whatsapp"].handle(meta_request(wa_notification(wa_change([reaction]))))
    assert outcome.kind == "ignored" and "'reaction'" in (outcome.reason or "")


def test_other_objects_and_fields_are_ignored(channels: dict[str, Channel]) -> None:
    page = {"object": "page", "entry": []}
    assert channels["whatsapp"].handle(meta_request(page)).kind == "ignored"
    other_field = wa_notification({"field": "account_update", "value": {"event": "VERIFIED"}})
    assert channels["whatsapp"].handle(meta_request(other_field)).kind == "ignored"


@pytest.mark.parametrize(
    "breakage",
    ["message-id", "metadata", "sender"],
)
def test_messages_missing_required_fields_are_400(
    channels: dict[str, Channel], breakage: str
) -> None:
    message = wa_text()
    change = wa_change([message])
    if breakage == "message-id":
        del message["id"]
    elif breakage == "metadata":
        del change["value"]["metadata"]
    else:
        del message["from"]
        change["value"]["contacts"] = []
    with pytest.raises(MalformedRequest):
        channels["whatsapp"].handle(meta_request(wa_notification(change)))


def test_meta_signature_without_the_sha256_prefix_is_rejected(
    channels: dict[str, Channel],
) -> None:
    request = meta_request(wa_notification(wa_change([wa_text()])))
    bare = request.headers["x-hub-signature-256"].removeprefix("sha256=")
    with pytest.raises(SignatureRejected):
        channels["whatsapp"].handle(
            request.model_copy(update={"headers": request.headers | {"x-hub-signature-256": bare}})
        )


# -- handshake ----------------------------------------------------------------------------------


def test_handshake_with_our_verify_token_echoes_the_challenge(
    channels: dict[str, Channel],
) -> None:
    request = handshake("subscribe", WA_VERIFY_TOKEN, "1158201444")
    outcome = channels["whatsapp"].handle(request)
    assert outcome.kind == "handshake" and outcome.status == 200 and outcome.body == b"1158201444"


@pytest.mark.parametrize("token", ["wrong", ""])
def test_handshake_with_a_wrong_verify_token_is_403(
    channels: dict[str, Channel], token: str
) -> None:
    request = handshake("subscribe", token, "1158201444")
    with pytest.raises(HandshakeRejected) as caught:
        channels["whatsapp"].handle(request)
    assert caught.value.status == 403 and "1158201444" not in str(caught.value)


@pytest.mark.parametrize(
    "request_",
    [
        handshake("unsubscribe", WA_VERIFY_TOKEN, "1"),
        handshake("subscribe", WA_VERIFY_TOKEN),
        handshake(),
    ],
    ids=["mode", "no-challenge", "bare-get"],
)
def test_a_get_that_is_not_a_subscription_handshake_is_400(
    channels: dict[str, Channel], request_: ChannelRequest
) -> None:
    with pytest.raises(MalformedRequest) as caught:
        channels["whatsapp"].handle(request_)
    assert caught.value.status == 400


# -- sending ------------------------------------------------------------------------------------


def _reply(options: int = 0, text: str = "Choose an account", **reply_to: Any) -> OutboundReply:
    return OutboundReply(
        text=text,
        options=[ReplyOption(id=f"opt-{n}", label=f"Option number {n}") for n in range(options)],
        reply_to={"phone_number_id": PHONE_NUMBER_ID, "wa_id": WA_ID} | reply_to,
    )


async def test_plain_reply_is_a_text_message(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    receipt = await channels["whatsapp"].send(_reply(), http)

    [request] = platform.requests
    assert request.path == f"/graph/v26.0/{PHONE_NUMBER_ID}/messages"
    assert request.headers["authorization"] == f"Bearer {WA_ACCESS_TOKEN}"
    assert request.json() == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": WA_ID,
        "type": "text",
        "text": {"body": "Choose an account", "preview_url": False},
    }
    assert receipt.message_ids == ["wamid.out1"]


async def test_up_to_three_options_are_reply_buttons(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    await channels["whatsapp"].send(_reply(options=3), http)

    interactive = platform.requests[0].json()["interactive"]
    assert interactive["type"] == "button"
    assert interactive["body"] == {"text": "Choose an account"}
    buttons = interactive["action"]["buttons"]
    assert [b["reply"]["id"] for b in buttons] == ["opt-0", "opt-1", "opt-2"]
    assert all(len(b["reply"]["title"]) <= 20 for b in buttons)
    assert buttons[0]["reply"]["title"] == "Option number 0"


async def test_four_to_ten_options_are_a_list(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    await channels["whatsapp"].send(_reply(options=10), http)

    interactive = platform.requests[0].json()["interactive"]
    assert interactive["type"] == "list"
    [section] = interactive["action"]["sections"]
    assert len(section["rows"]) == 10
    assert all(len(row["title"]) <= 24 for row in section["rows"])


async def test_more_than_ten_options_become_numbered_text(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    await channels["whatsapp"].send(_reply(options=11), http)

    body = platform.requests[0].json()
    assert body["type"] == "text"
    assert "1. Option number 0" in body["text"]["body"]
    assert "11. Option number 10" in body["text"]["body"]


TRANSFERS = [
    ReplyOption(id="sav", label="Transfer money to my savings account"),
    ReplyOption(id="mom", label="Transfer money to my mother"),
    ReplyOption(id="card", label="💳 Report my card as lost or stolen"),
]


async def test_labels_too_long_for_a_button_go_as_a_list_whose_rows_carry_them_in_full(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(text="What would you like to do?", options=TRANSFERS, reply_to=_to())
    await channels["whatsapp"].send(reply, http)

    [request] = platform.requests
    interactive = request.json()["interactive"]
    assert interactive["type"] == "list"
    [section] = interactive["action"]["sections"]
    rows = section["rows"]
    assert [row["id"] for row in rows] == ["sav", "mom", "card"]
    assert [row["description"] for row in rows] == [o.label for o in TRANSFERS]
    assert all(len(row["title"]) <= 24 for row in rows)
    assert len({row["title"].casefold() for row in rows}) == 3


async def test_labels_that_fit_stay_reply_buttons_with_their_whole_label(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    options = [ReplyOption(id="sav", label="To my savings"), ReplyOption(id="mom", label="To mom")]
    await channels["whatsapp"].send(
        OutboundReply(text="Where?", options=options, reply_to=_to()), http
    )

    buttons = platform.requests[0].json()["interactive"]["action"]["buttons"]
    assert [b["reply"]["title"] for b in buttons] == ["To my savings", "To mom"]


async def test_a_label_too_long_even_for_a_list_row_sends_numbered_text_with_every_label(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    long = "Transfer money from my checking account to my savings account every month on the 1st"
    options = [*TRANSFERS[:2], ReplyOption(id="monthly", label=long)]
    await channels["whatsapp"].send(
        OutboundReply(text="Which?", options=options, reply_to=_to()), http
    )

    [request] = platform.requests
    body = request.json()
    assert body["type"] == "text"
    assert body["text"]["body"] == (
        "Which?\n\nReply with a number:\n"
        "1. Transfer money to my savings account\n"
        "2. Transfer money to my mother\n"
        f"3. {long}"
    )


def test_a_list_pick_is_read_as_the_full_label_of_its_row(channels: dict[str, Channel]) -> None:
    pick = wa_list_reply("sav", "Transfer…savings…", description=TRANSFERS[0].label)
    [message] = (
        channels["whatsapp"].handle(meta_request(wa_notification(wa_change([pick])))).messages
    )

    assert (message.choice, message.text) == ("sav", "Transfer money to my savings account")
    assert message.raw_type == "interactive.list_reply"


def _to() -> dict[str, Any]:
    return {"phone_number_id": PHONE_NUMBER_ID, "wa_id": WA_ID}


async def test_long_text_before_buttons_goes_ahead_as_text(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    await channels["whatsapp"].send(_reply(options=2, text="sentence here. " * 200), http)

    kinds = [r.json()["type"] for r in platform.requests]
    assert kinds[-1] == "interactive" and set(kinds[:-1]) == {"text"}
    assert len(platform.requests[-1].json()["interactive"]["body"]["text"]) <= 1024


async def test_a_bsuid_only_customer_is_addressed_as_recipient(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(text="hi", reply_to={"phone_number_id": PHONE_NUMBER_ID, "bsuid": BSUID})
    await channels["whatsapp"].send(reply, http)
    body = platform.requests[0].json()
    assert body["recipient"] == BSUID and "to" not in body


async def test_throughput_error_is_rate_limited(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(
            400,
            {
                "error": {
                    "message": "(#130429) Rate limit hit",
                    "type": "OAuthException",
                    "code": 130429,
                }
            },
        )
    )
    with pytest.raises(RateLimited) as caught:
        await channels["whatsapp"].send(_reply(), http)
    assert caught.value.retryable and caught.value.platform_error.startswith("130429")


async def test_outside_the_24h_window_is_rejected_for_good(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(400, {"error": {"message": "Re-engagement message", "code": 131047}}))
    with pytest.raises(DeliveryRejected) as caught:
        await channels["whatsapp"].send(_reply(), http)
    assert not caught.value.retryable and WA_ACCESS_TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("late", "answered"),
    [(timedelta(days=6, hours=23), True), (timedelta(days=7, seconds=1), False)],
    ids=["meta-redelivery-within-7-days", "replay-after-7-days"],
)
def test_a_genuine_body_replayed_after_the_window_is_acknowledged_and_dropped(
    channels: dict[str, Channel], late: timedelta, answered: bool
) -> None:
    outcome = channels["whatsapp"].handle(_genuine_meta_request(META_SENT_AT + late))
    assert outcome.status == 200  # Meta stops redelivering; nothing is queued for a replay
    assert bool(outcome.messages) is answered
    if not answered:
        assert outcome.kind == "ignored" and "replayed" in (outcome.reason or "")
        assert timedelta(days=7) == MAX_MESSAGE_AGE


def test_only_the_replayed_messages_of_a_batch_are_dropped(channels: dict[str, Channel]) -> None:
    now = int(time.time())
    change = wa_change(
        [
            wa_text("old", wamid="wamid.OLD", timestamp=now - 8 * 86400),
            wa_text("new", wamid="wamid.NEW"),
        ]
    )
    request = meta_request(wa_notification(change)).model_copy(
        update={"received_at": datetime.fromtimestamp(now, UTC)}
    )
    [message] = channels["whatsapp"].handle(request).messages
    assert message.event_id == "wamid.NEW"
