"""The human side of a handoff in a Slack support channel, end to end on the local stack: a
Telegram customer asks for a person → a thread opens in the (fake) Slack workspace with the
summary → a person's thread reply reaches Telegram → the customer answers → it appears in the
thread → hand back → the agent answers the next message with that context."""

from __future__ import annotations

from typing import Any

import pytest

from engine.session import SessionMode
from examples.banking import bank
from infra.handoff_slack import HAND_BACK_CHOICE, SUPPORT_CHANNEL_ENV
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import slack_block_actions, slack_event, slack_form
from tests.functions import signed_events as signed
from tests.functions.conftest import CountingLLM, drain, invoke_webhook, load_session, telegram_says
from tests.functions.platforms import FakePlatforms

SUPPORT = "CSUPPORT1"
CHAT = 515151
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


@pytest.fixture(autouse=True)
def support_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUPPORT_CHANNEL_ENV, SUPPORT)


def customer_says(stack: Any, text: str, update_id: int) -> None:
    assert telegram_says(CHAT, text, update_id)["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]


def slack_posts(platforms: FakePlatforms) -> list[dict[str, Any]]:
    return [r.json() for r in platforms.replies("slack")]


def telegram_texts(platforms: FakePlatforms) -> list[str]:
    return [r.json()["text"] for r in platforms.replies("telegram")]


def person_writes(stack: Any, text: str, thread_ts: str, n: int, user: str = "UDANA") -> None:
    event = slack_event(
        text,
        event_type="message",
        event_id=f"EvP{n}",
        channel=SUPPORT,
        user=user,
        ts=f"1700000100.{n:06d}",
        thread_ts=thread_ts,
    )
    assert invoke_webhook(signed.slack(event))["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]


def test_a_person_answers_a_telegram_customer_from_a_slack_thread_and_hands_back(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    customer_says(stack, "hello", 1)
    customer_says(stack, "Can I talk to a person?", 2)
    (summary,) = slack_posts(platforms)
    assert summary["channel"] == SUPPORT and "thread_ts" not in summary
    assert "the customer asked for a person" in summary["text"]
    assert "Can I talk to a person?" in summary["text"]  # what they wanted, the last messages
    assert "telegram" in summary["text"]
    assert "Hand back to the agent" in str(summary.get("blocks"))
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]

    person_writes(stack, "Hi, Dana from support here. What went wrong?", thread_ts, 1)
    assert telegram_texts(platforms)[-1] == "Hi, Dana from support here. What went wrong?"
    state = load_session(runtime, SESSION)
    assert state.handoff.assignee == "slack:UDANA"

    customer_says(stack, "My card was charged twice", 3)
    in_thread = slack_posts(platforms)[-1]
    assert in_thread["thread_ts"] == thread_ts and in_thread["channel"] == SUPPORT
    assert in_thread["text"] == "Customer: My card was charged twice"
    assert telegram_texts(platforms)[-1].startswith("Hi, Dana")  # the agent stayed silent

    person_writes(stack, "I've refunded the double charge of 12 EUR.", thread_ts, 2)
    click = slack_block_actions(
        HAND_BACK_CHOICE, label="Hand back to the agent", channel=SUPPORT, thread_ts=thread_ts
    )
    click_event = signed.slack(slack_form(click), content_type="application/x-www-form-urlencoded")
    assert invoke_webhook(click_event)["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]
    assert load_session(runtime, SESSION).mode is SessionMode.AUTO

    replies_before = len(telegram_texts(platforms))
    customer_says(stack, "thanks! is everything fine with my account now?", 4)
    assert len(telegram_texts(platforms)) == replies_before + 1  # the agent answers again
    assert any("refunded the double charge of 12 EUR" in p for p in llm.prompts[-4:])
    # Nothing the bot posted came back as a person's message (no loop), and the thread got
    # only what it should: the summary and the customer's one message.
    assert len(slack_posts(platforms)) == 2


def test_a_message_in_the_support_channel_outside_a_handoff_thread_runs_nothing(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    calls = llm.calls
    person_writes(stack, "lunch anyone?", "1699999999.000001", 1)
    assert llm.calls == calls and platforms.replies() == []


def test_the_slack_summary_never_shows_a_secret(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    bank.reset_bank()
    password = "monkey"  # declared `secret` in examples/banking/agent.yaml
    for n, text in enumerate(["Hi", "Transfer money", "seldo", password], start=1):
        customer_says(stack, text, n)
    customer_says(stack, "I want to speak to a human", 9)
    (summary,) = slack_posts(platforms)
    assert "seldo" in summary["text"]  # the conversation is there…
    assert password not in str(summary)  # …the password is not


def test_a_handoff_started_from_the_api_opens_its_thread_at_the_customers_next_message(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    from tests.functions.test_management import call

    customer_says(stack, "hello", 1)
    status, _ = call("POST", f"/sessions/{SESSION}/handoff", {"reason": "VIP", "by": "lead"})
    assert status == 201
    assert slack_posts(platforms) == []
    customer_says(stack, "is anyone there?", 2)
    (summary,) = slack_posts(platforms)
    assert "*Why:* VIP" in summary["text"] and "is anyone there?" in summary["text"]
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    person_writes(stack, "Yes, Lee here.", thread_ts, 1)
    assert telegram_texts(platforms)[-1] == "Yes, Lee here."


def test_a_worker_crash_after_the_handoff_still_opens_one_thread(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.functions.conftest import fail_once

    customer_says(stack, "hello", 1)
    assert telegram_says(CHAT, "let me talk to a human", 2)["statusCode"] == 200
    fail_once(monkeypatch, runtime.outbox, "take", RuntimeError("Lambda killed after the commit"))
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert drain(stack) == [{"batchItemFailures": []}]  # SQS redelivers: the turn is replayed
    drain(stack)
    assert len(slack_posts(platforms)) == 1  # one thread
    assert load_session(runtime, SESSION).handoff.support_thread is not None


def test_the_bots_own_posts_in_the_thread_never_reach_the_customer(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    sent = len(telegram_texts(platforms))
    # Slack delivers the app's own thread posts back as message events (with its bot id).
    echo = slack_event(
        "Customer: Can I talk to a person?",
        event_type="message",
        event_id="EvEcho",
        channel=SUPPORT,
        user="UBOT",
        ts="1700000200.000001",
        thread_ts=thread_ts,
        bot_id="B0APP",
    )
    assert invoke_webhook(signed.slack(echo))["statusCode"] == 200
    drain(stack)
    assert len(telegram_texts(platforms)) == sent
    state = load_session(runtime, SESSION)
    assert state.handoff.assignee is None  # nobody "wrote": the echo was not taken as a person


def test_what_the_inbox_tool_and_the_sweep_send_also_shows_in_the_thread(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    from datetime import timedelta

    from functions.handoff_sweep import sweep
    from tests.functions.test_management import call

    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    since = load_session(runtime, SESSION).handoff.since
    assert runtime.run(sweep(runtime, since + timedelta(hours=1)))["notices_queued"] == 1
    drain(stack)
    body = {"person": "lee", "text": "Lee here, picking this up.", "event_id": "i1"}
    assert call("POST", f"/sessions/{SESSION}/handoff/messages", body)[1]["delivery"] == "queued"
    drain(stack)
    in_thread = [p["text"] for p in slack_posts(platforms) if p.get("thread_ts") == thread_ts]
    assert in_thread[0].startswith("Sent by the agent: No one from our team is available")
    assert in_thread[1] == "Team (lee): Lee here, picking this up."
    assert telegram_texts(platforms)[-1] == "Lee here, picking this up."


def test_a_colleague_replying_in_the_thread_takes_the_session_over(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    """In the thread everyone sees who writes: a colleague's reply is an explicit take-over —
    delivered, the session reassigned to them, recorded — never refused."""
    from tests.functions.test_management import call

    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    person_writes(stack, "Dana here.", thread_ts, 1)
    person_writes(stack, "Lee here, I know this case.", thread_ts, 2, user="ULEE")
    assert telegram_texts(platforms)[-2:] == ["Dana here.", "Lee here, I know this case."]
    state = load_session(runtime, SESSION)
    assert state.handoff.assignee == "slack:ULEE"
    (taken_over,) = [e for e in state.events if e.data.get("take_over")]
    assert taken_over.data["from"] == "slack:UDANA" and taken_over.data["by"] == "slack:ULEE"
    # The inbox tool, where people do not see each other, is refused without take_over.
    body = {"person": "dana", "text": "Dana again", "event_id": "d9"}
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 409 and "already taken by 'slack:ULEE'" in refused["error"]
    # Slack delivering the reply again (same event id) changes nothing and sends nothing.
    again = slack_event(
        "Lee here, I know this case.",
        event_type="message",
        event_id="EvP2",
        channel=SUPPORT,
        user="ULEE",
        ts="1700000100.000002",
        thread_ts=thread_ts,
    )
    assert invoke_webhook(signed.slack(again))["statusCode"] == 200
    drain(stack)
    assert telegram_texts(platforms).count("Lee here, I know this case.") == 1
    assert load_session(runtime, SESSION).version == state.version
