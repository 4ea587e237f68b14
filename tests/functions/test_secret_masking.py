"""Secret masking through the real webhook and worker on moto (issue #33, the second security
review): a secret is masked in the texts people and models wrote, never in an id — so no reply
is lost and erasure finds everyone — a plain value typed at the password step is no secret, and
a password typed before anything asks for it is in no stored trace, whether or not a step ever
collects it.

The banking example, the generic channel, the offline model."""

from __future__ import annotations

import itertools
import json
import logging
import re
from typing import Any

import pytest

from engine.sessions.session import EventKind, EventSource, SessionState
from examples.banking import bank
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import generic_message
from tests.functions import signed_events as signed
from tests.functions.conftest import drain, everything_stored, invoke_webhook, load_session
from tests.functions.platforms import CALLBACK_URL, FakePlatforms
from tests.functions.test_management import call

CONVERSATION = "secrets-33"
SESSION = session_id_for("bank", "generic", f"generic:{CONVERSATION}")
EVENT_IDS = itertools.count(1)
RANDOM_IDS = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}"
)


def says(stack: Any, text: str, *, person: str = "cust-1", event_id: str | None = None) -> str:
    """`person` writes `text` in the conversation (webhook, queue, worker); the event id."""
    event_id = event_id or f"evt-{next(EVENT_IDS)}"
    body = generic_message(
        text,
        event_id=event_id,
        conversation_id=CONVERSATION,
        customer_id=person,
        callback_url=CALLBACK_URL,
    )
    assert invoke_webhook(signed.generic(body))["statusCode"] == 200
    assert drain(stack) in ([], [{"batchItemFailures": []}])  # [] : a duplicate, not queued
    return event_id


def agent_replies(state: SessionState) -> list[str]:
    return [
        e.text or ""
        for e in state.events
        if e.kind is EventKind.MESSAGE and e.source is EventSource.AGENT
    ]


def test_a_password_that_ends_every_channel_event_id_loses_no_reply(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    """The password is "4471" and the platform's event ids all end in "-4471": each message,
    the password's own and those after it (where a digest recognises it), is answered exactly
    once, in reply to its own event id; a redelivered one is not answered again."""
    bank.reset_bank()
    bank.BANK.users["seldo"] = "4471"
    script = ["I want to log in", "seldo", "4471", "is 4471 a good password?", "thanks"]

    sent = [says(stack, text, event_id=f"wamid.{n}-4471") for n, text in enumerate(script)]
    says(stack, script[-1], event_id=sent[-1])  # the platform delivers the last one again

    replies = [r.json() for r in platforms.replies("generic")]
    assert [r["in_reply_to"] for r in replies] == sent
    state = load_session(runtime, SESSION)
    ids = [e.data.get("channel_event_id") for e in state.events if e.data.get("channel_event_id")]
    assert [i.rsplit(":", 1)[-1] for i in ids] == sent
    assert "now logged in" in agent_replies(state)[2]
    assert "4471" not in json.dumps([r["text"] for r in replies])
    customer = [e.text for e in state.events if e.source is EventSource.CUSTOMER]
    assert customer == [*script[:2], "•••", "is ••• a good password?", "thanks"]
    stored = everything_stored(stack)
    for event_id in sent:
        stored = stored.replace(event_id, "")
    # Ids drawn at random (uuids, 20+ hex digits: turn, trace and claim owner ids) hold "4471"
    # by chance in about one run of a hundred (seen once in a full suite): not a leak.
    stored = RANDOM_IDS.sub("", stored)
    found = stored.find("4471")  # but in the ids
    assert found < 0, f"stored: …{stored[max(0, found - 300) : found + 100]!r}…"


def test_a_group_member_whose_id_is_her_password_is_erased_whole(
    runtime: Runtime, stack: Any
) -> None:
    """Alice's customer id is her password: her events keep her id as their sender (per-sender
    logic finds her login), so erasing her through the management API takes all of it."""
    bank.reset_bank()
    alice = "alice-4471"
    bank.BANK.users["seldo"] = alice
    says(stack, "Hi", person="bob-7")
    for text in ["I want to log in", "seldo", alice, "What is the balance of my Checking account?"]:
        says(stack, text, person=alice)
    says(stack, "hello again", person="bob-7")
    state = load_session(runtime, SESSION)
    senders = {e.data.get("sender") for e in state.events if e.source is EventSource.CUSTOMER}
    assert senders == {"bob-7", alice}
    assert state.principals == {alice: {"username": "seldo"}}
    assert "1000.00" in agent_replies(state)[-2]  # her balance, from her own login

    status, report = call("DELETE", f"/customers/generic/{alice}")

    assert status == 200 and report["sessions_redacted"] == [SESSION]
    stored = everything_stored(stack)
    assert [w for w in (alice, "seldo", "1000.00") if w in stored] == []
    texts = [e.text for e in load_session(runtime, SESSION).events if e.text]
    assert "Hi" in texts and "hello again" in texts  # Bob's part stays


def test_a_username_typed_again_at_the_password_step_is_no_secret(
    runtime: Runtime, stack: Any
) -> None:
    """At the password step the customer types the username again (a bare "seldo"): that
    answer is masked whole (the step asked for a secret), but the username is no secret — it
    is not masked where it was typed before, not remembered, and the password typed next logs
    them in."""
    bank.reset_bank()
    for text in ["I want to log in", "seldo", "seldo", "monkey"]:
        says(stack, text)

    state = load_session(runtime, SESSION)
    assert "now logged in" in agent_replies(state)[-1]
    assert state.principals == {"cust-1": {"username": "seldo"}}
    customer = [e.text for e in state.events if e.source is EventSource.CUSTOMER]
    assert customer == ["I want to log in", "seldo", "•••", "•••"]
    says(stack, "I am seldo, what can I do?")
    stored = everything_stored(stack)
    assert "I am seldo, what can I do?" in stored and "monkey" not in stored


def test_a_password_typed_before_it_is_asked_is_in_no_trace_of_the_turns_since(
    runtime: Runtime, stack: Any
) -> None:
    """The password comes in the first message, where nothing names it a password (so no
    reading of that turn recognises it); the journey asks for it three turns later and the
    customer types it again. Every turn in between quoted the first message in its prompts:
    none of their stored traces keeps it."""
    bank.reset_bank()
    for text in ["hi, I use monkey for everything", "I want to log in", "seldo", "monkey"]:
        says(stack, text)

    state = load_session(runtime, SESSION)
    assert "now logged in" in agent_replies(state)[-1]
    assert state.events[0].text == "hi, I use ••• for everything"
    assert "monkey" not in everything_stored(stack)


def test_a_password_typed_as_a_first_message_and_never_asked_for_is_nowhere(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The customer opens with their password, then asks for a stock price and leaves: no step
    ever asks for the password. It is masked in the turn it was typed in — the stored message,
    that turn's trace, every later prompt and trace — and is in no item, object, queue, reply
    or log line."""
    caplog.set_level(logging.INFO)  # what the functions log (botocore DEBUG shows bodies)
    bank.reset_bank()
    for text in ["my password is monkey", "What is the price of AAPL?", "thanks"]:
        says(stack, text)

    state = load_session(runtime, SESSION)
    assert state.events[0].text == "my password is •••"
    assert "AAPL" in agent_replies(state)[1]  # the conversation went on as usual
    assert "monkey" not in everything_stored(stack)
    assert "monkey" not in json.dumps([r.json() for r in platforms.replies("generic")])
    assert "monkey" not in caplog.text + capsys.readouterr().out
