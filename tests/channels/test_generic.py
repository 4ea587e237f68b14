"""The generic channel: HMAC-SHA256 over "{timestamp}.{body}" with a ±300 s window; replies POSTed
to the callback URL, signed the same way (real local HTTP)."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from infra.channels.base import Channel, OutboundReply, ReplyOption
from infra.channels.errors import (
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
    SignatureRejected,
    StaleRequest,
)
from infra.channels.generic import GenericChannel
from infra.channels.signing import sign_generic
from tests.channels.conftest import SettableClock
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import generic_message
from tests.channels.signed import GENERIC_SECRET, NOW_TS, generic_request


def test_signed_message_is_normalized(channels: dict[str, Channel]) -> None:
    outcome = channels["generic"].handle(generic_request(generic_message("Where is my order?")))

    assert outcome.kind == "messages" and outcome.status == 200
    assert json.loads(outcome.body) == {"status": "accepted", "event_id": "evt-1"}
    [message] = outcome.messages
    assert message.event_id == "evt-1"
    assert message.conversation_key == "generic:conv-1"
    assert message.customer_id == "cust-1"
    assert message.text == "Where is my order?"
    assert message.reply_to == {
        "conversation_id": "conv-1",
        "event_id": "evt-1",
        "callback_url": "http://127.0.0.1:9/hooks/waypoint",
    }


def test_a_choice_alone_is_a_message(channels: dict[str, Channel]) -> None:
    body = generic_message("", choice="opt-2")
    [message] = channels["generic"].handle(generic_request(body)).messages
    assert message.choice == "opt-2" and message.text == ""


@pytest.mark.parametrize(
    "body",
    [
        generic_message("   "),
        generic_message(event_id=""),
        generic_message(conversation_id=7),
        {k: v for k, v in generic_message().items() if k != "customer_id"},
        generic_message(callback_url="file:///etc/passwd"),
    ],
    ids=["no-text", "empty-event-id", "int-conversation", "no-customer", "file-callback"],
)
def test_invalid_messages_are_400(channels: dict[str, Channel], body: dict[str, object]) -> None:
    with pytest.raises(MalformedRequest):
        channels["generic"].handle(generic_request(body))


@pytest.mark.parametrize("skew", [-301, 301])
def test_outside_the_window_is_stale(channels: dict[str, Channel], skew: int) -> None:
    with pytest.raises(StaleRequest):
        channels["generic"].handle(generic_request(generic_message(), timestamp=NOW_TS + skew))


def test_replaying_a_captured_signature_with_a_new_timestamp_fails(
    channels: dict[str, Channel],
) -> None:
    captured = generic_request(generic_message(), timestamp=NOW_TS - 3600)
    headers = captured.headers | {"x-waypoint-timestamp": str(NOW_TS)}
    with pytest.raises(SignatureRejected):
        channels["generic"].handle(captured.model_copy(update={"headers": headers}))


def test_callback_hosts_can_be_restricted(clock: SettableClock) -> None:
    channel = GenericChannel(
        secret=GENERIC_SECRET, clock=clock, callback_hosts=["widget.example.com"]
    )
    with pytest.raises(MalformedRequest, match="allowed callback hosts"):
        channel.handle(generic_request(generic_message()))
    allowed = generic_message(callback_url="https://WIDGET.example.com/reply")
    assert channel.handle(generic_request(allowed)).kind == "messages"


# -- sending ------------------------------------------------------------------------------------


async def test_reply_is_posted_to_the_callback_signed(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="Pick a slot",
        options=[ReplyOption(id="mon", label="Monday")],
        view={"type": "calendar"},
        reply_to={
            "conversation_id": "conv-1",
            "event_id": "evt-1",
            "callback_url": platform.url("hooks/cb"),
        },
        id="ev_reply_7",
    )
    receipt = await channels["generic"].send(reply, http)

    [request] = platform.requests
    assert request.path == "/hooks/cb"
    assert request.headers["idempotency-key"] == "ev_reply_7"  # the same on every retry
    assert request.json() == {
        "id": "ev_reply_7",
        "conversation_id": "conv-1",
        "in_reply_to": "evt-1",
        "text": "Pick a slot",
        "options": [{"id": "mon", "label": "Monday"}],
        "view": {"type": "calendar"},
    }
    timestamp = request.headers["x-waypoint-timestamp"]
    assert timestamp == str(NOW_TS)
    assert request.headers["x-waypoint-signature"] == sign_generic(
        GENERIC_SECRET, request.body, timestamp
    )
    assert receipt.message_ids == ["cb-1"]


async def test_the_callback_receiver_can_verify_with_the_same_channel_code(
    clock: SettableClock, platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    sender = GenericChannel(secret=GENERIC_SECRET, clock=clock, callback_hosts=["127.0.0.1"])
    reply = OutboundReply(text="hi", reply_to={"callback_url": platform.url("hooks/cb")})
    await sender.send(reply, http)
    recorded = platform.requests[0]
    timestamp = recorded.headers["x-waypoint-timestamp"]
    assert (
        sign_generic(GENERIC_SECRET, recorded.body, timestamp)
        == recorded.headers["x-waypoint-signature"]
    )


async def test_no_callback_url_or_a_refused_one_is_rejected(
    channels: dict[str, Channel], http: httpx.AsyncClient
) -> None:
    with pytest.raises(DeliveryRejected, match="callback_url"):
        await channels["generic"].send(OutboundReply(text="hi"), http)
    with pytest.raises(DeliveryRejected):
        await channels["generic"].send(
            OutboundReply(text="hi", reply_to={"callback_url": "ftp://x/y"}), http
        )


async def test_callback_errors_are_typed(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(text="hi", reply_to={"callback_url": platform.url("hooks/cb")})
    platform.script(Scripted(500, {"error": "boom"}))
    with pytest.raises(DeliveryUnavailable, match="boom"):
        await channels["generic"].send(reply, http)
    platform.script(Scripted(410, {"error": "conversation closed"}))
    with pytest.raises(DeliveryRejected):
        await channels["generic"].send(reply, http)


async def test_an_unreachable_callback_is_retryable(
    channels: dict[str, Channel], http: httpx.AsyncClient
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: a real refusal
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reply = OutboundReply(text="hi", reply_to={"callback_url": f"http://127.0.0.1:{port}/cb"})
    with pytest.raises(DeliveryUnavailable) as caught:
        await channels["generic"].send(reply, http)
    assert caught.value.retryable


def test_a_text_over_the_limit_is_refused_naming_it_never_cut(
    channels: dict[str, Channel],
) -> None:
    from infra.channels.errors import PayloadTooLarge
    from infra.channels.text import MAX_INBOUND_CHARS

    whole = "y" * MAX_INBOUND_CHARS
    [message] = channels["generic"].handle(generic_request(generic_message(whole))).messages
    assert message.text == whole
    with pytest.raises(PayloadTooLarge, match=f"{MAX_INBOUND_CHARS}-character limit") as caught:
        channels["generic"].handle(generic_request(generic_message(whole + "y")))
    assert caught.value.status == 413
