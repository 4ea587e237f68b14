"""Telegram: secret-token webhooks normalized; replies through sendMessage (real local HTTP)."""

from __future__ import annotations

import httpx
import pytest

from infra.channels.base import Channel, OutboundReply, ReplyOption
from infra.channels.errors import (
    ChannelConfigError,
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
    RateLimited,
)
from infra.channels.options import resolve_choice
from infra.channels.telegram import TelegramChannel
from infra.channels.text import MAX_INBOUND_CHARS, utf16_len
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import tg_click_update, tg_text_update
from tests.channels.signed import TG_BOT_TOKEN, TG_SECRET, telegram_request


def test_text_message_is_normalized(channels: dict[str, Channel]) -> None:
    outcome = channels["telegram"].handle(telegram_request(tg_text_update("Hello there")))

    assert outcome.kind == "messages" and outcome.status == 200 and outcome.body == b""
    [message] = outcome.messages
    assert message.channel == "telegram"
    assert message.event_id == "10000"
    assert message.account_id == "700100200"  # the bot id: the token's prefix
    assert message.conversation_key == "tg:700100200:1111111"
    assert message.customer_id == "1111111"
    assert message.text == "Hello there"
    assert message.choice is None
    assert message.reply_to == {"chat_id": 1111111, "message_id": 1365}
    assert message.raw_type == "message"
    assert message.dedup_key == "telegram:700100200:10000"


def test_button_click_is_a_choice_with_its_label(channels: dict[str, Channel]) -> None:
    outcome = channels["telegram"].handle(telegram_request(tg_click_update("opt:2")))

    [message] = outcome.messages
    assert message.event_id == "10001"
    assert message.choice == "opt:2"
    assert message.text == "Support"
    assert message.conversation_key == "tg:700100200:1111111"
    assert message.reply_to["callback_query_id"] == "4382bfdwdsb323b2d9"
    assert message.raw_type == "callback_query"


def test_forum_topics_are_separate_conversations(channels: dict[str, Channel]) -> None:
    update = tg_text_update("hi", chat_id=-100777, topic=42)
    [message] = channels["telegram"].handle(telegram_request(update)).messages
    assert message.conversation_key == "tg:700100200:-100777:42:user:1111111"
    assert message.reply_to["message_thread_id"] == 42


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        (tg_text_update("hi", is_bot=True), "not sent by a person"),
        ({"update_id": 5, "edited_message": tg_text_update()["message"]}, "no message"),
        (
            {"update_id": 6, "message": tg_text_update()["message"] | {"text": None}},
            "no text",
        ),
    ],
)
def test_updates_without_a_customer_text_are_ignored(
    channels: dict[str, Channel], update: dict[str, object], reason: str
) -> None:
    outcome = channels["telegram"].handle(telegram_request(update))
    assert outcome.kind == "ignored" and outcome.status == 200
    assert reason in (outcome.reason or "")


def test_update_without_update_id_is_400(channels: dict[str, Channel]) -> None:
    update = tg_text_update()
    del update["update_id"]
    with pytest.raises(MalformedRequest, match="update_id"):
        channels["telegram"].handle(telegram_request(update))


def test_chat_id_of_the_wrong_type_is_400(channels: dict[str, Channel]) -> None:
    update = tg_text_update()
    update["message"]["chat"]["id"] = {"nested": 1}
    with pytest.raises(MalformedRequest) as caught:
        channels["telegram"].handle(telegram_request(update))
    assert "nested" not in str(caught.value)  # payload values stay out of error messages


def test_control_characters_are_stripped_and_text_capped(channels: dict[str, Channel]) -> None:
    update = tg_text_update("a\x00b\x1b[31mc\r\nd" + "x" * 100_000)
    [message] = channels["telegram"].handle(telegram_request(update)).messages
    assert message.text.startswith("ab[31mc\nd")
    assert len(message.text) == MAX_INBOUND_CHARS  # longer than Telegram allows: cut, and said
    assert message.text.endswith(f"[… cut: the message was over {MAX_INBOUND_CHARS} characters]")


def test_a_message_at_the_platforms_own_limit_is_kept_whole(channels: dict[str, Channel]) -> None:
    text = "word " * 819 + "end."  # 4,099 characters: Telegram's 4,096 UTF-16 units and a bit
    [message] = channels["telegram"].handle(telegram_request(tg_text_update(text))).messages
    assert message.text == text.strip()


# (A space separates the new and the old token during a rotation: tests/channels/test_rotation.py.)
@pytest.mark.parametrize("secret", ["", " ", "x" * 257, "semi;colon", "new-token old%token"])
def test_secret_tokens_telegram_would_refuse_are_a_config_error(secret: str) -> None:
    with pytest.raises(ChannelConfigError):
        TelegramChannel(secret_token=secret, bot_token=TG_BOT_TOKEN)


def test_repr_shows_no_secret() -> None:
    channel = TelegramChannel(secret_token=TG_SECRET, bot_token=TG_BOT_TOKEN)
    assert TG_SECRET not in repr(channel) and "AAE-bot_token" not in repr(channel)


# -- sending ------------------------------------------------------------------------------------


async def test_reply_with_options_sends_an_inline_keyboard(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="How can I help?",
        options=[
            ReplyOption(id="billing", label="Billing"),
            ReplyOption(id="support", label="Support"),
        ],
        reply_to={"chat_id": 1111111},
    )
    receipt = await channels["telegram"].send(reply, http)

    [request] = platform.requests
    assert request.path == f"/telegram/bot{TG_BOT_TOKEN}/sendMessage"
    assert request.json() == {
        "chat_id": 1111111,
        "text": "How can I help?",
        "reply_markup": {
            "inline_keyboard": [
                [{"text": "Billing", "callback_data": "billing"}],
                [{"text": "Support", "callback_data": "support"}],
            ]
        },
    }
    assert receipt.channel == "telegram" and receipt.message_ids == ["1001"]


async def test_reply_to_a_click_answers_the_callback_query_first(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    [clicked] = channels["telegram"].handle(telegram_request(tg_click_update())).messages
    await channels["telegram"].send(OutboundReply(text="Done", reply_to=clicked.reply_to), http)

    assert [r.path.rsplit("/", 1)[1] for r in platform.requests] == [
        "answerCallbackQuery",
        "sendMessage",
    ]
    assert platform.requests[0].json() == {"callback_query_id": "4382bfdwdsb323b2d9"}


async def test_an_expired_callback_query_does_not_stop_the_reply(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(400, {"ok": False, "error_code": 400, "description": "query is too old"})
    )
    reply = OutboundReply(text="Done", reply_to={"chat_id": 1, "callback_query_id": "q"})
    receipt = await channels["telegram"].send(reply, http)
    assert receipt.parts == 1


async def test_long_text_is_split_under_4096_utf16_units(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    text = ("word " * 900 + "\n\n") * 2 + "😀" * 3000  # emoji are 2 UTF-16 units each
    reply = OutboundReply(
        text=text, options=[ReplyOption(id="ok", label="OK")], reply_to={"chat_id": 7}
    )
    receipt = await channels["telegram"].send(reply, http)

    sent = [r.json() for r in platform.requests]
    assert receipt.parts == len(sent) >= 3
    assert all(utf16_len(body["text"]) <= 4096 for body in sent)
    assert ["reply_markup" in body for body in sent] == [False] * (len(sent) - 1) + [True]


async def test_option_ids_over_64_bytes_are_compacted_and_resolvable(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    long_id = "account:" + "x" * 100
    options = [ReplyOption(id=long_id, label="That one")]
    await channels["telegram"].send(
        OutboundReply(text="Pick", options=options, reply_to={"chat_id": 7}), http
    )

    data = platform.requests[0].json()["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    assert len(data.encode()) <= 64
    assert resolve_choice(data, options) == long_id


async def test_429_is_rate_limited_with_retry_after(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(
            429,
            {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests: retry after 5",
                "parameters": {"retry_after": 5},
            },
        )
    )
    with pytest.raises(RateLimited) as caught:
        await channels["telegram"].send(OutboundReply(text="hi", reply_to={"chat_id": 7}), http)
    assert caught.value.retryable and caught.value.retry_after == 5
    assert caught.value.platform_status == 429
    assert "Too Many Requests" in str(caught.value)
    assert TG_BOT_TOKEN not in str(caught.value)


async def test_blocked_bot_is_rejected_for_good(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(
        Scripted(
            403,
            {
                "ok": False,
                "error_code": 403,
                "description": "Forbidden: bot was blocked by the user",
            },
        )
    )
    with pytest.raises(DeliveryRejected) as caught:
        await channels["telegram"].send(OutboundReply(text="hi", reply_to={"chat_id": 7}), http)
    assert not caught.value.retryable


async def test_unreachable_api_is_retryable_and_never_shows_the_token() -> None:
    channel = TelegramChannel(
        secret_token=TG_SECRET, bot_token=TG_BOT_TOKEN, base_url="http://127.0.0.1:9"
    )

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to {request.url}", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(DeliveryUnavailable) as caught:
            await channel.send(OutboundReply(text="hi", reply_to={"chat_id": 7}), client)
    assert caught.value.retryable
    assert TG_BOT_TOKEN not in str(caught.value) and "***" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_reply_without_chat_id_is_rejected(
    channels: dict[str, Channel], http: httpx.AsyncClient
) -> None:
    with pytest.raises(DeliveryRejected, match="chat_id"):
        await channels["telegram"].send(OutboundReply(text="hi"), http)


def test_an_unrepresentable_date_is_dropped_not_fatal(channels: dict[str, Channel]) -> None:
    # Found by the fuzz test: datetime cannot hold year 10000.
    update = tg_text_update()
    update["message"]["date"] = 253402300800
    [message] = channels["telegram"].handle(telegram_request(update)).messages
    assert message.sent_at is None


def test_in_a_group_each_sender_has_their_own_session(channels: dict[str, Channel]) -> None:
    keys = set()
    for user in (4242, 6666):
        update = tg_text_update("hi", chat_id=-100777, user_id=user)
        update["message"]["chat"]["type"] = "group"
        [message] = channels["telegram"].handle(telegram_request(update)).messages
        keys.add(message.conversation_key)
        assert message.reply_to["chat_id"] == -100777  # the reply still goes to the group
    assert keys == {"tg:700100200:-100777:user:4242", "tg:700100200:-100777:user:6666"}


def test_a_message_older_than_the_replay_window_is_acknowledged_and_dropped(
    channels: dict[str, Channel],
) -> None:
    from datetime import timedelta

    from infra.channels.ingress import MAX_MESSAGE_AGE
    from tests.channels.signed import NOW

    late = int((NOW - MAX_MESSAGE_AGE - timedelta(seconds=1)).timestamp())
    outcome = channels["telegram"].handle(telegram_request(tg_text_update("hi", date=late)))
    assert outcome.kind == "ignored" and outcome.status == 200 and not outcome.messages
    assert "replayed" in (outcome.reason or "")
    in_time = int((NOW - MAX_MESSAGE_AGE + timedelta(seconds=60)).timestamp())
    [message] = (
        channels["telegram"].handle(telegram_request(tg_text_update("hi", date=in_time))).messages
    )
    assert message.text == "hi"


def test_a_click_on_an_old_message_is_still_a_choice(channels: dict[str, Channel]) -> None:
    # The button's message is the bot's, sent long ago; the click itself has no timestamp.
    [message] = channels["telegram"].handle(telegram_request(tg_click_update())).messages
    assert message.choice is not None
