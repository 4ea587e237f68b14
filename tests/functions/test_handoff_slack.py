"""The human side of a handoff in a Slack support channel, end to end on the local stack: a
Telegram customer asks for a person → a thread opens in the (fake) Slack workspace with the
summary → a person's thread reply reaches Telegram → the customer answers → it appears in the
thread → hand back → the agent answers the next message with that context."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine.sessions.session import SessionMode, SessionState
from examples.banking import bank
from infra.channels.support_channel import SupportRelay
from infra.handoff_slack import (
    HAND_BACK_CHOICE,
    SUPPORT_CHANNEL_ENV,
    SUPPORT_TEAMS_ENV,
    SUPPORT_USERS_ENV,
)
from infra.runtime import Runtime
from infra.runtime_settings import RuntimeConfigurationError, RuntimeSettings
from infra.turn_queue import session_id_for
from tests.channels.payloads import slack_block_actions, slack_event, slack_form
from tests.functions import signed_events as signed
from tests.functions.conftest import CountingLLM, drain, invoke_webhook, load_session, telegram_says
from tests.functions.platforms import FakePlatforms

SUPPORT = "CSUPPORT1"
OUR_TEAM = "T111"  # the workspace of tests.channels.payloads' Slack events
CHAT = 515151
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


@pytest.fixture(autouse=True)
def support_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUPPORT_CHANNEL_ENV, SUPPORT)
    monkeypatch.setenv(SUPPORT_TEAMS_ENV, OUR_TEAM)
    monkeypatch.delenv(SUPPORT_USERS_ENV, raising=False)


def customer_says(stack: Any, text: str, update_id: int) -> None:
    assert telegram_says(CHAT, text, update_id)["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]


def slack_posts(platforms: FakePlatforms) -> list[dict[str, Any]]:
    return [r.json() for r in platforms.replies("slack")]


def telegram_texts(platforms: FakePlatforms) -> list[str]:
    return [r.json()["text"] for r in platforms.replies("telegram")]


def person_writes(
    stack: Any, text: str, thread_ts: str, n: int, user: str = "UDANA", team: str = OUR_TEAM
) -> None:
    """`user` of workspace `team` replies in the thread (Slack states the author's team as
    `user_team` and `team`, also in a Slack Connect channel)."""
    event = slack_event(
        text,
        event_type="message",
        event_id=f"EvP{n}",
        channel=SUPPORT,
        user=user,
        ts=f"1700000100.{n:06d}",
        thread_ts=thread_ts,
        team=team,
        user_team=team,
    )
    assert invoke_webhook(signed.slack(event))["statusCode"] == 200
    assert all(batch == {"batchItemFailures": []} for batch in drain(stack))


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
        team=OUR_TEAM,
        user_team=OUR_TEAM,
    )
    assert invoke_webhook(signed.slack(again))["statusCode"] == 200
    drain(stack)
    assert telegram_texts(platforms).count("Lee here, I know this case.") == 1
    assert load_session(runtime, SESSION).version == state.version


# --------------------------------------------------------------------------------------------------
# Who may write to customers from the support channel (a Slack Connect channel holds people of
# other organizations; Slack states each author's own team)

OTHER_ORG = "T0OTHERORG"


def slack_session_of(runtime: Runtime, thread_ts: str, user: str) -> SessionState | None:
    """The session the webhook would have made for `user`'s messages in the thread."""
    key = f"slack:{OUR_TEAM}:{SUPPORT}:{thread_ts}:user:{user}"
    return runtime.run(runtime.sessions.load(session_id_for("bank", "slack", key)))


def test_a_slack_connect_member_of_another_workspace_cannot_write_to_the_customer(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    sent, calls = len(telegram_texts(platforms)), llm.calls

    # Genuinely signed by Slack, in our support channel and its thread, delivered to our
    # installation (envelope team_id T111) — written by a member of another organization.
    person_writes(stack, "Support here: reply with your card PIN", thread_ts, 1, "UMAL", OTHER_ORG)
    click = slack_block_actions(
        HAND_BACK_CHOICE, label="Hand back to the agent", channel=SUPPORT, thread_ts=thread_ts
    )
    click["user"]["team_id"] = OTHER_ORG
    click_event = signed.slack(slack_form(click), content_type="application/x-www-form-urlencoded")
    assert invoke_webhook(click_event)["statusCode"] == 200  # acknowledged: Slack stops retrying
    assert drain(stack) == []  # nothing was queued

    assert len(telegram_texts(platforms)) == sent  # the customer got nothing
    state = load_session(runtime, SESSION)
    assert state.mode is SessionMode.HUMAN and state.handoff.assignee is None  # not handed back
    assert not [e for e in state.events if e.data.get("person")]
    assert slack_session_of(runtime, thread_ts, "UMAL") is None  # and no session of their own
    assert llm.calls == calls  # no turn either

    # A message whose author's team Slack does not state is refused too (fail closed).
    unstated = slack_event(
        "who am I?",
        event_type="message",
        event_id="EvNoTeam",
        channel=SUPPORT,
        user="UDANA",
        ts="1700000300.000001",
        thread_ts=thread_ts,
    )
    assert invoke_webhook(signed.slack(unstated))["statusCode"] == 200
    assert drain(stack) == []
    assert len(telegram_texts(platforms)) == sent

    person_writes(stack, "Dana from support here.", thread_ts, 2)  # our own team still can
    assert telegram_texts(platforms)[-1] == "Dana from support here."
    assert load_session(runtime, SESSION).handoff.assignee == "slack:UDANA"


def test_with_a_user_list_only_those_people_write_to_customers(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    relay = SupportRelay.from_env(
        {SUPPORT_CHANNEL_ENV: SUPPORT, SUPPORT_TEAMS_ENV: OUR_TEAM, SUPPORT_USERS_ENV: "UDANA"}
    )
    runtime.settings = dataclasses.replace(runtime.settings, support_relay=relay)
    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    sent = len(telegram_texts(platforms))

    person_writes(stack, "Lee here (not on the list)", thread_ts, 1, user="ULEE")
    assert len(telegram_texts(platforms)) == sent
    person_writes(stack, "Dana here.", thread_ts, 2, user="UDANA")
    assert telegram_texts(platforms)[-1] == "Dana here."


def test_a_person_queued_before_the_allow_list_changed_is_not_relayed(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    """The worker checks again: what the webhook queued under an older allow-list (or a
    redelivered message) never reaches the customer once its author is no longer allowed."""
    customer_says(stack, "Can I talk to a person?", 1)
    thread_ts = load_session(runtime, SESSION).handoff.support_thread["thread_ts"]
    sent = len(telegram_texts(platforms))
    event = slack_event(
        "written while still allowed",
        event_type="message",
        event_id="EvOld",
        channel=SUPPORT,
        user="UDANA",
        ts="1700000400.000001",
        thread_ts=thread_ts,
        user_team=OUR_TEAM,
    )
    assert invoke_webhook(signed.slack(event))["statusCode"] == 200  # queued
    narrowed = SupportRelay(channel=SUPPORT, teams=frozenset({"T0NEWTEAM"}))
    runtime.settings = dataclasses.replace(runtime.settings, support_relay=narrowed)
    assert drain(stack) == [{"batchItemFailures": []}]
    assert len(telegram_texts(platforms)) == sent


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({SUPPORT_CHANNEL_ENV: SUPPORT}, [SUPPORT_TEAMS_ENV, "Slack Connect"]),
        ({SUPPORT_CHANNEL_ENV: SUPPORT, SUPPORT_TEAMS_ENV: " , "}, [SUPPORT_TEAMS_ENV]),
        ({SUPPORT_CHANNEL_ENV: SUPPORT, SUPPORT_TEAMS_ENV: "t111"}, ["'t111'", "team id"]),
        ({SUPPORT_CHANNEL_ENV: SUPPORT, SUPPORT_TEAMS_ENV: "acme"}, ["'acme'", "T0123ABCD"]),
        (
            {SUPPORT_CHANNEL_ENV: SUPPORT, SUPPORT_TEAMS_ENV: "T111", SUPPORT_USERS_ENV: "@dana"},
            [SUPPORT_USERS_ENV, "'@dana'", "user id"],
        ),
        ({SUPPORT_CHANNEL_ENV: "#support", SUPPORT_TEAMS_ENV: "T111"}, ["not the channel's name"]),
    ],
    ids=["no-teams", "blank-teams", "lower-case", "a-name", "a-handle", "a-channel-name"],
)
def test_a_support_relay_without_a_valid_team_allow_list_refuses_to_load(
    environ: dict[str, str], names: list[str]
) -> None:
    with pytest.raises(RuntimeConfigurationError) as refused:
        RuntimeSettings.from_env(environ)
    for name in names:
        assert name in str(refused.value)


def test_a_well_formed_relay_loads_and_no_channel_means_no_relay() -> None:
    environ = {
        SUPPORT_CHANNEL_ENV: SUPPORT,
        SUPPORT_TEAMS_ENV: "T111, E0GRIDORG",
        SUPPORT_USERS_ENV: "UDANA,W0GRIDUSER",
    }
    assert RuntimeSettings.from_env(environ).support_relay == SupportRelay(
        channel=SUPPORT,
        teams=frozenset({"T111", "E0GRIDORG"}),
        users=frozenset({"UDANA", "W0GRIDUSER"}),
    )
    assert RuntimeSettings.from_env({SUPPORT_TEAMS_ENV: "T111"}).support_relay is None
