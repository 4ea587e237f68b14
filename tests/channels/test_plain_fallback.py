"""A platform refusing a rendered payload (buttons, list, blocks) as malformed is a renderer bug:
logged, noted on the receipt (the worker counts it), and the reply goes out once more in its
simplest form, plain text with the options numbered, so the customer still gets an answer.
Refusals that are not about the payload (blocked user, closed 24 h window) are not retried, and a
refused plain form is given up on (raised) rather than retried forever."""

from __future__ import annotations

import logging

import httpx
import pytest

from infra.channels.base import Channel, OutboundReply, ReplyOption
from infra.channels.errors import DeliveryRejected
from tests.channels.fake_platform import FakePlatform, Scripted

OPTIONS = [ReplyOption(id="save", label="Savings"), ReplyOption(id="chk", label="Checking")]
REPLY_TO = {
    "telegram": {"chat_id": 7},
    "slack": {"channel": "D1"},
    "whatsapp": {"phone_number_id": "106540352242922", "wa_id": "15551234567"},
}
MALFORMED = {
    "telegram": Scripted(
        400, {"ok": False, "error_code": 400, "description": "Bad Request: BUTTON_DATA_INVALID"}
    ),
    "slack": Scripted(200, {"ok": False, "error": "invalid_blocks"}),
    "whatsapp": Scripted(
        400, {"error": {"code": 131009, "message": "(#131009) Parameter value is not valid"}}
    ),
}


def _reply(channel: str) -> OutboundReply:
    return OutboundReply(text="Which account?", options=OPTIONS, reply_to=REPLY_TO[channel])


def _text_of(channel: str, body: dict[str, object]) -> str:
    if channel == "whatsapp":
        assert body["type"] == "text"
        return str(body["text"]["body"])  # type: ignore[index]
    assert "reply_markup" not in body and "blocks" not in body
    return str(body["text"])


@pytest.mark.parametrize("channel", ["telegram", "slack", "whatsapp"])
async def test_a_payload_refused_as_malformed_is_sent_once_more_as_numbered_text(
    channel: str,
    channels: dict[str, Channel],
    platform: FakePlatform,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    platform.script(MALFORMED[channel])
    with caplog.at_level(logging.ERROR, logger="waypoint.channels"):
        receipt = await channels[channel].send(_reply(channel), http)

    sends = [r for r in platform.requests if "answerCallbackQuery" not in r.path]
    assert len(sends) == 2
    assert _text_of(channel, sends[1].json()) == "Which account?\n\n1. Savings\n2. Checking"
    assert len(receipt.message_ids) == 1 and receipt.plain_fallbacks
    assert any("refused a rendered payload" in r.message for r in caplog.records)


@pytest.mark.parametrize("channel", ["telegram", "slack", "whatsapp"])
async def test_a_refused_plain_form_is_given_up_on_not_retried_again(
    channel: str, channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(MALFORMED[channel], MALFORMED[channel])
    with pytest.raises(DeliveryRejected):
        await channels[channel].send(_reply(channel), http)
    assert len(platform.requests) == 2


@pytest.mark.parametrize(
    ("channel", "refusal"),
    [
        (
            "telegram",
            Scripted(
                403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked"}
            ),
        ),
        (
            "telegram",
            Scripted(
                400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
            ),
        ),
        ("slack", Scripted(200, {"ok": False, "error": "channel_not_found"})),
        (
            "whatsapp",
            Scripted(400, {"error": {"code": 131047, "message": "Re-engagement message"}}),
        ),
    ],
)
async def test_refusals_that_are_not_about_the_payload_are_not_retried_as_text(
    channel: str,
    refusal: Scripted,
    channels: dict[str, Channel],
    platform: FakePlatform,
    http: httpx.AsyncClient,
) -> None:
    platform.script(refusal)
    with pytest.raises(DeliveryRejected):
        await channels[channel].send(_reply(channel), http)
    assert len(platform.requests) == 1


async def test_parts_sent_before_the_refused_one_are_not_sent_again(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="word " * 1000, options=OPTIONS, reply_to=REPLY_TO["whatsapp"]
    )  # 5000 characters: a text part, then the interactive one
    platform.script(Scripted(200, {"messages": [{"id": "wamid.first"}]}), MALFORMED["whatsapp"])
    receipt = await channels["whatsapp"].send(reply, http)

    bodies = [r.json() for r in platform.requests]
    assert [b["type"] for b in bodies] == ["text", "interactive", "text"]
    assert receipt.message_ids[0] == "wamid.first" and len(receipt.message_ids) == 2
    assert bodies[2]["text"]["body"].endswith("1. Savings\n2. Checking")


async def test_a_rendered_payload_that_breaks_a_documented_rule_is_never_sent(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    # Meta refuses button ids with leading or trailing spaces: the buttons are not even tried.
    reply = OutboundReply(
        text="Which account?",
        options=[
            ReplyOption(id=" save ", label="Savings"),
            ReplyOption(id="chk", label="Checking"),
        ],
        reply_to=REPLY_TO["whatsapp"],
    )
    receipt = await channels["whatsapp"].send(reply, http)

    [request] = platform.requests
    assert request.json()["type"] == "text"
    assert request.json()["text"]["body"] == "Which account?\n\n1. Savings\n2. Checking"
    assert receipt.plain_fallbacks and "leading or trailing spaces" in receipt.plain_fallbacks[0]
