"""Typing indicators, as each platform documents them (real local HTTP): Telegram
`sendChatAction`, WhatsApp mark-as-read with `typing_indicator`, Slack's assistant thread status;
shown at once, refreshed while the turn runs, stopped when it ends, and never an error."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest

from infra.channels.base import Channel
from infra.channels.typing import ShowsTyping, typing_while
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import TWILIO_ACCOUNT_SID
from tests.channels.signed import TG_BOT_TOKEN, TWILIO_TOKEN


async def test_telegram_sends_a_typing_chat_action_in_the_topic(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    channel = channels["telegram"]
    assert isinstance(channel, ShowsTyping)
    assert await channel.show_typing({"chat_id": 7, "message_thread_id": 3}, http)
    [request] = platform.requests
    assert request.path == f"/telegram/bot{TG_BOT_TOKEN}/sendChatAction"
    assert request.json() == {"chat_id": 7, "action": "typing", "message_thread_id": 3}


async def test_whatsapp_marks_the_message_read_with_the_typing_indicator(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    channel = channels["whatsapp"]
    assert isinstance(channel, ShowsTyping)
    reply_to = {"phone_number_id": "106540352242922", "wa_id": "1555", "message_id": "wamid.IN1"}
    assert await channel.show_typing(reply_to, http)
    [request] = platform.requests
    assert request.path.endswith("/106540352242922/messages")
    assert request.json() == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.IN1",
        "typing_indicator": {"type": "text"},
    }


async def test_slack_sets_the_assistant_thread_status_where_available(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    channel = channels["slack"]
    assert isinstance(channel, ShowsTyping)
    assert await channel.show_typing({"channel": "D1", "thread_ts": "1.2"}, http)
    [request] = platform.requests
    assert request.path == "/slack/api/assistant.threads.setStatus"
    assert request.json() == {"channel_id": "D1", "thread_ts": "1.2", "status": "is typing…"}
    # Not an assistant thread (or no scope): Slack says no, and no status is tried again.
    platform.script(Scripted(200, {"ok": False, "error": "missing_scope"}))
    assert not await channel.show_typing({"channel": "D1", "thread_ts": "1.2"}, http)
    assert not await channel.show_typing({"channel": "D1"}, http)  # no thread: nothing to set
    assert len(platform.requests) == 2


async def test_twilio_shows_it_on_whatsapp_only_and_generic_has_none(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    channel = channels["twilio"]
    assert isinstance(channel, ShowsTyping)
    whatsapp = {"to": "whatsapp:+1415", "from": "whatsapp:+1416", "message_sid": "SM1"}
    assert await channel.show_typing(whatsapp, http)
    [request] = platform.requests
    assert request.path == "/twilio/v2/Indicators/Typing.json"
    assert request.form() == {"channel": "whatsapp", "messageId": "SM1"}
    basic = base64.b64encode(f"{TWILIO_ACCOUNT_SID}:{TWILIO_TOKEN}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {basic}"
    assert not await channel.show_typing({"to": "+1415", "from": "+1416", "message_sid": "S"}, http)
    assert len(platform.requests) == 1  # SMS has no typing indicator
    assert not isinstance(channels["generic"], ShowsTyping)


async def test_the_indicator_is_refreshed_while_the_turn_runs_and_stops_after(
    channels: dict[str, Channel],
    platform: FakePlatform,
    http: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channel = channels["telegram"]
    monkeypatch.setattr(channel, "typing_refresh_seconds", 0.05)
    async with typing_while(channel, {"chat_id": 7}, http):
        await asyncio.sleep(0.3)  # a turn
    shown = len(platform.requests)
    assert shown >= 3
    await asyncio.sleep(0.5)  # ten refresh periods
    # Stopped with the turn: at most the one indicator that was already on the wire when the
    # turn ended lands afterwards (seen on a clean-clone run), never another refresh.
    assert shown <= len(platform.requests) <= shown + 1


async def test_a_failing_indicator_never_fails_the_turn(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(500, {"ok": False, "error_code": 500, "description": "boom"}))
    async with typing_while(channels["telegram"], {"chat_id": 7}, http):
        await asyncio.sleep(0.05)
        result = "turn done"
    assert result == "turn done"
    assert len(platform.requests) == 1  # not retried in a loop either


async def test_an_error_in_the_turn_still_stops_the_indicator(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    with pytest.raises(RuntimeError, match="turn failed"):
        async with typing_while(channels["telegram"], {"chat_id": 7}, http):
            # the first indicator has arrived (one still on the wire when the block ends may
            # arrive later: that is not a refresh)
            for _ in range(1000):
                if platform.requests:
                    break
                await asyncio.sleep(0.01)
            raise RuntimeError("turn failed")
    count = len(platform.requests)
    await asyncio.sleep(0.1)
    assert len(platform.requests) == count
