"""Slack: v0-signed events and interactivity normalized, the handshake, self/bot loops ignored,
the replay window enforced; replies through chat.postMessage (real local HTTP)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from infra.channels.base import Channel, ChannelRequest, OutboundReply, ReplyOption
from infra.channels.errors import (
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
    RateLimited,
    SignatureRejected,
    StaleRequest,
)
from infra.channels.platform_limits import slack_violations
from infra.channels.slack import SlackChannel
from tests.channels.conftest import SettableClock
from tests.channels.fake_platform import FakePlatform, Scripted
from tests.channels.payloads import slack_block_actions, slack_event, slack_form
from tests.channels.signed import NOW_TS, SLACK_BOT_TOKEN, SLACK_SECRET, slack_request
from tests.channels.vectors import (
    SLACK_DOC_BODY,
    SLACK_DOC_SIGNATURE,
    SLACK_DOC_TIMESTAMP,
)

FORM = "application/x-www-form-urlencoded"


def test_slacks_documented_request_is_authentic(clock: SettableClock) -> None:
    # Slack's own example: secret, timestamp, slash-command body and signature, byte for byte.
    channel = SlackChannel(signing_secret=SLACK_SECRET, bot_token=SLACK_BOT_TOKEN, clock=clock)
    clock.current = datetime.fromtimestamp(int(SLACK_DOC_TIMESTAMP), UTC)
    request = ChannelRequest.from_http(
        "POST",
        "https://hooks.example.com/webhooks/slack",
        headers={
            "Content-Type": FORM,
            "X-Slack-Request-Timestamp": SLACK_DOC_TIMESTAMP,
            "X-Slack-Signature": SLACK_DOC_SIGNATURE,
        },
        body=SLACK_DOC_BODY.encode(),
    )
    outcome = channel.handle(request)
    assert outcome.kind == "ignored" and "slash commands" in (outcome.reason or "")

    clock.advance(301)  # the same request five minutes and a second later is a replay
    with pytest.raises(StaleRequest):
        channel.handle(request)


def test_app_mention_in_a_channel_is_normalized(channels: dict[str, Channel]) -> None:
    outcome = channels["slack"].handle(slack_request(slack_event("<@W111> Hi &amp; bye")))

    assert outcome.kind == "messages" and outcome.status == 200 and outcome.body == b""
    [message] = outcome.messages
    assert message.event_id == "C111:1595926230.009600"
    assert message.account_id == "T111"
    assert message.conversation_key == "slack:T111:C111:1595926230.009600:user:W222"
    assert message.customer_id == "W222"
    assert message.text == "Hi & bye"  # our mention removed, Slack's escapes undone
    assert message.choice is None
    assert message.reply_to == {
        "team_id": "T111",
        "channel": "C111",
        "thread_ts": "1595926230.009600",
    }
    assert message.raw_type == "app_mention"


def test_the_two_events_of_one_message_share_a_dedup_id(channels: dict[str, Channel]) -> None:
    # Subscribed to app_mention and message.channels, Slack sends both, with different event_ids.
    mention = slack_event(event_type="app_mention", event_id="Ev1")
    plain = slack_event(event_type="message", event_id="Ev2")
    [first] = channels["slack"].handle(slack_request(mention)).messages
    [second] = channels["slack"].handle(slack_request(plain)).messages
    assert first.dedup_key == second.dedup_key


def test_a_direct_message_is_one_conversation(channels: dict[str, Channel]) -> None:
    event = slack_event("hello", event_type="message", channel="D024BE91L", channel_type="im")
    [message] = channels["slack"].handle(slack_request(event)).messages
    assert message.conversation_key == "slack:T111:D024BE91L"
    assert "thread_ts" not in message.reply_to

    mention = slack_event("<@W111> hi", channel="D024BE91L")  # app_mention: no channel_type
    del mention["event"]["channel_type"]
    [message] = channels["slack"].handle(slack_request(mention)).messages
    assert message.conversation_key == "slack:T111:D024BE91L"


def test_a_reply_in_a_thread_belongs_to_the_thread(channels: dict[str, Channel]) -> None:
    event = slack_event("more", ts="1595926300.000100", thread_ts="1595926230.009600")
    [message] = channels["slack"].handle(slack_request(event)).messages
    assert message.conversation_key == "slack:T111:C111:1595926230.009600:user:W222"


def test_the_senders_own_team_is_the_one_slack_states_for_the_author(
    channels: dict[str, Channel],
) -> None:
    """In a Slack Connect channel the envelope's `team_id` (and `authorizations`) name our
    installation; the author's workspace is the event's `user_team` (else `team`)."""
    shared = slack_event("hi", team="T999", user_team="T999", source_team="T111")
    [message] = channels["slack"].handle(slack_request(shared)).messages
    assert message.account_id == "T111" and message.sender_team == "T999"

    only_team = slack_event("hi", team="T111")
    [message] = channels["slack"].handle(slack_request(only_team)).messages
    assert message.sender_team == "T111"

    [message] = channels["slack"].handle(slack_request(slack_event("hi"))).messages
    assert message.sender_team is None  # not stated: the support relay refuses it

    click = slack_block_actions("billing")
    click["user"]["team_id"] = "T999"  # a Slack Connect member pressing our button
    outcome = channels["slack"].handle(slack_request(slack_form(click), content_type=FORM))
    [message] = outcome.messages
    assert message.account_id == "T111" and message.sender_team == "T999"


def test_url_verification_echoes_the_challenge(channels: dict[str, Channel]) -> None:
    body = {
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    outcome = channels["slack"].handle(slack_request(body))
    assert outcome.kind == "handshake" and outcome.status == 200
    assert outcome.body == b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    assert outcome.headers["Content-Type"].startswith("text/plain")


def test_url_verification_must_be_signed_too(channels: dict[str, Channel]) -> None:
    body = {"challenge": "abc", "type": "url_verification"}
    with pytest.raises(SignatureRejected):
        channels["slack"].handle(slack_request(body, secret="not-ours"))


@pytest.mark.parametrize(
    "event",
    [
        slack_event(bot_id="B999", user=None, event_type="message"),
        slack_event(subtype="bot_message", event_type="message"),
        slack_event(subtype="message_changed", event_type="message", user=None),
        slack_event(subtype="message_deleted", event_type="message", user=None),
        slack_event(user="W111", event_type="message"),  # ourselves (authorizations say W111 is us)
        slack_event(event_type="reaction_added"),
    ],
    ids=["bot", "bot_message", "changed", "deleted", "self", "other-event"],
)
def test_bot_self_and_subtype_events_are_ignored(
    channels: dict[str, Channel], event: dict[str, object]
) -> None:
    outcome = channels["slack"].handle(slack_request(event))
    assert outcome.kind == "ignored" and outcome.status == 200 and not outcome.messages


def test_a_configured_bot_user_id_is_ignored_as_well(clock: SettableClock) -> None:
    channel = SlackChannel(
        signing_secret=SLACK_SECRET, bot_token=SLACK_BOT_TOKEN, clock=clock, bot_user_id="U0BOT"
    )
    event = slack_event(user="U0BOT", event_type="message")
    event["authorizations"] = []
    assert channel.handle(slack_request(event)).kind == "ignored"


def test_message_event_without_channel_is_400(channels: dict[str, Channel]) -> None:
    event = slack_event()
    del event["event"]["channel"]
    with pytest.raises(MalformedRequest):
        channels["slack"].handle(slack_request(event))


def test_button_click_is_a_choice(channels: dict[str, Channel]) -> None:
    body = slack_form(slack_block_actions("billing", label="Billing"))
    outcome = channels["slack"].handle(slack_request(body, content_type=FORM))

    assert outcome.kind == "messages" and outcome.body == b""
    [message] = outcome.messages
    assert message.event_id == "111.222.xxx"  # trigger_id
    assert message.choice == "billing"
    assert message.text == "Billing"
    assert message.customer_id == "W222"
    # the buttons were in the thread of the customer's message: same conversation as that message
    assert message.conversation_key == "slack:T111:C111:1595926230.009600:user:W222"
    assert message.reply_to["response_url"].startswith("https://hooks.slack.com/actions/")
    assert message.raw_type == "block_actions"


def test_other_interactions_are_ignored(channels: dict[str, Channel]) -> None:
    body = slack_form({"type": "view_submission", "user": {"id": "W222"}})
    outcome = channels["slack"].handle(slack_request(body, content_type=FORM))
    assert outcome.kind == "ignored"


def test_interactivity_payload_that_is_not_json_is_400(channels: dict[str, Channel]) -> None:
    with pytest.raises(MalformedRequest):
        channels["slack"].handle(slack_request(b"payload=%7Bnope", content_type=FORM))


@pytest.mark.parametrize("skew", [-301, 301])
def test_timestamps_outside_five_minutes_are_stale(channels: dict[str, Channel], skew: int) -> None:
    request = slack_request(slack_event(), timestamp=NOW_TS + skew)
    with pytest.raises(StaleRequest) as caught:
        channels["slack"].handle(request)
    assert caught.value.status == 401


@pytest.mark.parametrize("skew", [-300, 300])
def test_timestamps_at_the_edge_of_the_window_are_accepted(
    channels: dict[str, Channel], skew: int
) -> None:
    assert channels["slack"].handle(slack_request(slack_event(), timestamp=NOW_TS + skew)).messages


@pytest.mark.parametrize("timestamp", ["abc", "", "1772366400.5", "-5", "9" * 40])
def test_invalid_timestamps_are_401_never_500(channels: dict[str, Channel], timestamp: str) -> None:
    with pytest.raises(SignatureRejected) as caught:
        channels["slack"].handle(slack_request(slack_event(), timestamp=timestamp))
    assert caught.value.status == 401


def test_a_v1_signature_prefix_is_rejected(channels: dict[str, Channel]) -> None:
    request = slack_request(slack_event())
    forged = request.headers["x-slack-signature"].replace("v0=", "v1=")
    headers = request.headers | {"x-slack-signature": forged}
    with pytest.raises(SignatureRejected):
        channels["slack"].handle(request.model_copy(update={"headers": headers}))


# -- sending ------------------------------------------------------------------------------------


async def test_reply_posts_to_the_thread_with_buttons(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(
        text="Which account?",
        options=[ReplyOption(id="chk", label="Checking"), ReplyOption(id="sav", label="Savings")],
        reply_to={"team_id": "T111", "channel": "C111", "thread_ts": "1595926230.009600"},
    )
    receipt = await channels["slack"].send(reply, http)

    [request] = platform.requests
    assert request.path == "/slack/api/chat.postMessage"
    assert request.headers["authorization"] == f"Bearer {SLACK_BOT_TOKEN}"
    body = request.json()
    assert body["channel"] == "C111" and body["thread_ts"] == "1595926230.009600"
    assert body["text"] == "Which account?"  # the fallback text is always there
    section, actions = body["blocks"]
    assert section["text"]["text"] == "Which account?"
    assert [(b["text"]["text"], b["value"]) for b in actions["elements"]] == [
        ("Checking", "chk"),
        ("Savings", "sav"),
    ]
    assert len({b["action_id"] for b in actions["elements"]}) == 2
    assert receipt.message_ids == ["1700000000.000001"]


async def test_plain_text_reply_has_no_blocks_and_view_blocks_are_appended(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    await channels["slack"].send(OutboundReply(text="hi", reply_to={"channel": "D1"}), http)
    assert "blocks" not in platform.requests[0].json()

    card = {"type": "section", "text": {"type": "mrkdwn", "text": "*Balance:* 10 EUR"}}
    await channels["slack"].send(
        OutboundReply(text="Here", view={"blocks": [card]}, reply_to={"channel": "D1"}), http
    )
    assert platform.requests[1].json()["blocks"][-1] == card


def _card(n: int) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": f"*Payment {n}:* 10 EUR"}}


async def test_a_view_over_50_blocks_goes_on_in_further_messages_in_order(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    view = {"blocks": [_card(n) for n in range(120)]}
    reply = OutboundReply(
        text="Your payments:",
        options=[ReplyOption(id="more", label="Show more"), ReplyOption(id="done", label="Done")],
        view=view,
        reply_to={"channel": "C111", "thread_ts": "1595926230.009600"},
    )
    receipt = await channels["slack"].send(reply, http)

    bodies = [request.json() for request in platform.requests]
    assert [len(body["blocks"]) for body in bodies] == [50, 50, 22]  # text, buttons, 120 cards
    assert {body["thread_ts"] for body in bodies} == {"1595926230.009600"}
    first = bodies[0]["blocks"]
    assert first[0]["text"]["text"] == "Your payments:" and first[1]["type"] == "actions"
    shown = [block for body in bodies for block in body["blocks"]][2:]
    assert shown == view["blocks"]  # every card, in order
    # Each continuation's text (notifications, screen readers) is its own cards' words.
    assert bodies[1]["text"].splitlines()[0] == "*Payment 48:* 10 EUR"
    assert bodies[2]["text"].splitlines()[-1] == "*Payment 119:* 10 EUR"
    assert len(receipt.message_ids) == 3


async def test_a_view_too_long_for_five_messages_says_how_many_items_were_left_out(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    view = {"blocks": [_card(n) for n in range(300)]}
    reply = OutboundReply(text="Your payments:", view=view, reply_to={"channel": "D1"})
    await channels["slack"].send(reply, http)

    bodies = [request.json() for request in platform.requests]
    assert [len(body["blocks"]) for body in bodies] == [50] * 5
    blocks = [block for body in bodies for block in body["blocks"]]
    assert blocks[1:-1] == view["blocks"][:248]
    assert blocks[-1] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": "52 more items are not shown here."}],
    }


@pytest.mark.parametrize("size", [0, 1, 48, 49, 50, 98, 247, 248, 249, 400])
@pytest.mark.parametrize("options", [0, 2, 40])
async def test_no_view_block_is_dropped_without_saying_so(
    size: int,
    options: int,
    channels: dict[str, Channel],
    platform: FakePlatform,
    http: httpx.AsyncClient,
) -> None:
    view = {"blocks": [_card(n) for n in range(size)]}
    offered = [ReplyOption(id=f"o{n}", label=f"Choice {n}") for n in range(options)]
    reply = OutboundReply(text="Here", options=offered, view=view, reply_to={"channel": "D1"})
    receipt = await channels["slack"].send(reply, http)

    bodies = [request.json() for request in platform.requests]
    assert all(slack_violations(body) == [] for body in bodies)
    assert receipt.plain_fallbacks == []
    blocks = [block for body in bodies for block in body["blocks"]]
    cards = [block for block in blocks if block.get("text", {}).get("text", "").startswith("*Pay")]
    assert cards == view["blocks"][: len(cards)]
    left_out = size - len(cards)
    if left_out:
        assert blocks[-1]["elements"][0]["text"] == f"{left_out} more items are not shown here."


async def test_agent_text_cannot_mention_or_link(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    reply = OutboundReply(text="Hi <!channel> & <@U1>", reply_to={"channel": "C1"})
    await channels["slack"].send(reply, http)
    assert platform.requests[0].json()["text"] == "Hi &lt;!channel&gt; &amp; &lt;@U1&gt;"


async def test_ok_false_is_a_typed_error(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, {"ok": False, "error": "channel_not_found"}))
    with pytest.raises(DeliveryRejected) as caught:
        await channels["slack"].send(OutboundReply(text="hi", reply_to={"channel": "C0"}), http)
    assert caught.value.platform_error == "channel_not_found" and not caught.value.retryable
    assert SLACK_BOT_TOKEN not in str(caught.value)


async def test_rate_limit_is_retryable_with_retry_after(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "30"}))
    with pytest.raises(RateLimited) as caught:
        await channels["slack"].send(OutboundReply(text="hi", reply_to={"channel": "C0"}), http)
    assert caught.value.retryable and caught.value.retry_after == 30


async def test_slack_internal_error_is_retryable(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, {"ok": False, "error": "internal_error"}))
    with pytest.raises(DeliveryUnavailable):
        await channels["slack"].send(OutboundReply(text="hi", reply_to={"channel": "C0"}), http)


async def test_failure_on_a_later_part_reports_what_went_out(
    channels: dict[str, Channel], platform: FakePlatform, http: httpx.AsyncClient
) -> None:
    platform.script(Scripted(200, {"ok": True, "ts": "1.1"}), Scripted(502, "Bad Gateway"))
    reply = OutboundReply(text="paragraph. " * 600, reply_to={"channel": "C0"})
    with pytest.raises(DeliveryUnavailable) as caught:
        await channels["slack"].send(reply, http)
    assert caught.value.delivered == ("1.1",) and caught.value.platform_status == 502


def test_in_a_channel_thread_each_member_has_their_own_session(
    channels: dict[str, Channel],
) -> None:
    keys = set()
    for user in ("W222", "W333"):
        event = slack_event(
            "more", ts="1595926300.000100", thread_ts="1595926230.009600", user=user
        )
        [message] = channels["slack"].handle(slack_request(event)).messages
        keys.add(message.conversation_key)
        assert message.reply_to["thread_ts"] == "1595926230.009600"
    assert keys == {
        "slack:T111:C111:1595926230.009600:user:W222",
        "slack:T111:C111:1595926230.009600:user:W333",
    }
