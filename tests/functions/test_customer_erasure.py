"""Erasing one person after real turns: the items production wrote (webhook, queue, worker,
outbox, handoff, Slack thread) searched, decoded, for their id, their words and their values."""

from __future__ import annotations

import itertools
from typing import Any

from examples.banking import bank
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.channels.payloads import generic_message
from tests.functions import signed_events as signed
from tests.functions.conftest import (
    drain,
    everything_stored,
    invoke_webhook,
    load_session,
    with_support_relay,
)
from tests.functions.platforms import CALLBACK_URL, FakePlatforms
from tests.functions.test_management import call

CONVERSATION = "family-account"
GROUP = session_id_for("bank", "generic", f"generic:{CONVERSATION}")
EVENT_IDS = itertools.count(1)


def in_group(stack: Any, person: str, text: str) -> None:
    body = generic_message(
        text,
        event_id=f"evt-{next(EVENT_IDS)}",
        conversation_id=CONVERSATION,
        customer_id=person,
        callback_url=CALLBACK_URL,
    )
    assert invoke_webhook(signed.generic(body))["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]


def test_erasing_a_group_member_mid_confirmation_leaves_nothing_of_their_turns(
    runtime: Runtime, stack: Any
) -> None:
    bank.reset_bank()
    in_group(stack, "bob-7", "Hi")
    for text in ["Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "1k"]:
        in_group(stack, "alice-9", text)
    state = load_session(runtime, GROUP)
    assert state.pending_confirmation is not None
    in_group(stack, "bob-7", "hello again")
    stored = everything_stored(stack)
    assert "alice-9" in stored and "1234324" in stored and "seldo" in stored  # plenty to find

    status, report = call("DELETE", "/customers/generic/alice-9")

    assert status == 200 and report["sessions_redacted"] == [GROUP]
    stored = everything_stored(stack)
    assert [w for w in ("alice-9", "1234324", "seldo") if w in stored] == []
    texts = [e.text for e in load_session(runtime, GROUP).events if e.text]
    assert "Hi" in texts and "hello again" in texts  # Bob's part of the conversation stays
    in_group(stack, "bob-7", "What can you do?")  # and goes on, nothing of hers written back
    state = load_session(runtime, GROUP)
    assert state.events[-1].text and state.pending_confirmation is None
    stored = everything_stored(stack)
    assert [w for w in ("alice-9", "1234324", "seldo") if w in stored] == []


def test_erasing_the_opener_of_a_handed_off_group_forgets_them_in_the_handoff_index(
    runtime: Runtime, stack: Any
) -> None:
    with_support_relay(runtime)
    in_group(stack, "alice-9", "My IBAN DE89370400440532013000 was charged twice")
    in_group(stack, "alice-9", "Can I talk to a person please?")
    in_group(stack, "bob-7", "me too")
    assert load_session(runtime, GROUP).handoff is not None
    assert "alice-9" in everything_stored(stack)

    assert call("DELETE", "/customers/generic/alice-9")[0] == 200

    stored = everything_stored(stack)
    assert [w for w in ("alice-9", "DE89370400440532013000") if w in stored] == []
    status, listed = call("GET", "/handoffs")
    assert status == 200 and [s["customer_id"] for s in listed["sessions"]] == ["erased"]


def test_erasing_a_handed_off_customer_deletes_their_support_thread_mapping(
    runtime: Runtime, stack: Any
) -> None:
    with_support_relay(runtime)
    in_group(stack, "alice-9", "Can I talk to a person please?")  # alone: her own session
    assert load_session(runtime, GROUP).handoff.support_thread is not None
    items = stack.client("dynamodb").scan(TableName=stack.table_name)["Items"]
    (mapping,) = [i for i in items if i["pk"]["S"].startswith("SUPPORT#")]
    assert mapping["session_id"]["S"] == GROUP and "expires_at" in mapping  # retention too

    assert call("DELETE", "/customers/generic/alice-9")[0] == 200

    assert GROUP not in everything_stored(stack)  # no item left pointing at her session


IBAN = "DE89370400440532013000"


def queued(person: str, text: str, event_id: str) -> None:
    """`person` writes `text`: the webhook accepts and queues it; the worker has not run it."""
    body = generic_message(
        text,
        event_id=event_id,
        conversation_id=CONVERSATION,
        customer_id=person,
        callback_url=CALLBACK_URL,
    )
    assert invoke_webhook(signed.generic(body))["statusCode"] == 200


def test_a_message_still_queued_when_they_are_erased_is_not_written_back(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    in_group(stack, "alice-9", "hello")  # alone so far: her own session, deleted whole
    queued("alice-9", f"my IBAN is {IBAN}", "evt-queued")
    replies = len(platforms.replies())

    status, report = call("DELETE", "/customers/generic/alice-9")
    assert status == 200 and report["sessions_deleted"] == [GROUP]
    assert drain(stack) == [{"batchItemFailures": []}]  # run, and acknowledged

    stored = everything_stored(stack)  # the queue is empty too
    assert [w for w in (IBAN, "alice-9") if w in stored] == []
    assert runtime.run(runtime.sessions.load(GROUP)) is None  # not recreated for her message
    assert len(platforms.replies()) == replies  # and not answered


def test_a_message_queued_in_a_group_when_they_are_erased_is_not_written_back(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    in_group(stack, "bob-7", "Hi")
    in_group(stack, "alice-9", "hello")
    queued("alice-9", f"my IBAN is {IBAN}", "evt-queued-group")
    replies = len(platforms.replies())

    status, report = call("DELETE", "/customers/generic/alice-9")
    assert status == 200 and report["sessions_redacted"] == [GROUP]
    assert drain(stack) == [{"batchItemFailures": []}]

    stored = everything_stored(stack)
    assert [w for w in (IBAN, "alice-9") if w in stored] == []
    assert len(platforms.replies()) == replies
    in_group(stack, "bob-7", "What can you do?")  # the group goes on
    assert len(platforms.replies()) == replies + 1
    texts = [e.text for e in load_session(runtime, GROUP).events if e.text]
    assert "Hi" in texts and "What can you do?" in texts


def test_a_message_they_write_after_their_erasure_is_answered_in_a_new_session(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    in_group(stack, "alice-9", "hello")
    queued("alice-9", f"my IBAN is {IBAN}", "evt-queued-before")
    assert call("DELETE", "/customers/generic/alice-9")[0] == 200
    assert drain(stack) == [{"batchItemFailures": []}]
    runtime.known_sessions.clear()  # another webhook container: it creates the session
    replies = len(platforms.replies())

    in_group(stack, "alice-9", "What can you do?")

    assert len(platforms.replies()) == replies + 1
    state = load_session(runtime, GROUP)
    assert state.customer_id == "alice-9" and state.version == 1
    assert state.events[0].text == "What can you do?"
    assert IBAN not in everything_stored(stack)


def test_their_old_and_new_messages_in_one_burst_answer_only_the_new(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    in_group(stack, "alice-9", "hello")
    queued("alice-9", f"my IBAN is {IBAN}", "evt-burst-before")
    assert call("DELETE", "/customers/generic/alice-9")[0] == 200
    replies = len(platforms.replies())

    in_group(stack, "alice-9", "What can you do?")  # one batch: the worker recreates the session

    assert len(platforms.replies()) == replies + 1
    state = load_session(runtime, GROUP)
    assert state.version == 1 and state.events[0].text == "What can you do?"
    assert IBAN not in everything_stored(stack)
