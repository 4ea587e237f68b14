"""Human handoff on the local stack through the management API: a Telegram customer asks for a
person, a person takes the session and writes (delivered on Telegram through the outbox, once),
the customer's answers are recorded without a reply, and the agent resumes after hand-back with
the person's words in its history. Crashes and retries in between change none of it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from engine.handoff import MODE_CHANGED
from engine.sessions.session import MAX_REMEMBERED_IDS, EventSource
from functions.worker_delivery import SENDS_PER_INVOCATION
from infra.outbox import OutboxStatus
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.functions.conftest import (
    CountingLLM,
    drain,
    fail_once,
    load_session,
    telegram_says,
)
from tests.functions.platforms import FakePlatforms
from tests.functions.test_management import call

CHAT = 424242
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
NOTICE = "I'm passing you to a person from our team. They'll reply right here."


def say(text: str, update_id: int) -> None:
    assert telegram_says(CHAT, text, update_id)["statusCode"] == 200


def telegram_texts(platforms: FakePlatforms) -> list[str]:
    return [r.json()["text"] for r in platforms.replies("telegram")]


def handed_off(stack: Any, platforms: FakePlatforms) -> None:
    say("hello", 1)
    drain(stack)
    say("Can I talk to a person please?", 2)
    assert drain(stack) == [{"batchItemFailures": []}]
    assert telegram_texts(platforms)[-1] == NOTICE


def test_a_person_takes_over_writes_on_telegram_and_hands_back(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    handed_off(stack, platforms)
    status, listed = call("GET", "/handoffs")
    assert status == 200
    (waiting,) = listed["sessions"]
    assert waiting["session_id"] == SESSION and waiting["status"] == "waiting"
    assert waiting["trigger"] == "customer_request" and waiting["channel"] == "telegram"
    status, session = call("GET", f"/sessions/{SESSION}")
    assert session["mode"] == "human" and session["handoff"]["trigger"] == "customer_request"
    assert "reply_to" not in session["handoff"]  # where Telegram answers stays inside

    status, taken = call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "dana"})
    assert status == 200 and taken["handoff"]["assignee"] == "dana"
    assert (
        call("GET", "/handoffs", query={"status": "taken"})[1]["sessions"][0]["assignee"] == "dana"
    )

    body = {
        "person": "dana",
        "text": "Hi, Dana here. I've refunded the 20 EUR fee.",
        "event_id": "d1",
    }
    calls_before = llm.calls
    status, posted = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and posted["delivery"] == "queued"
    assert posted["events"][0]["source"] == "human"
    assert drain(stack) == [{"batchItemFailures": []}]  # the worker delivers it
    assert telegram_texts(platforms)[-1] == body["text"]
    assert llm.calls == calls_before  # no turn ran for it
    # The inbox tool retries (a lost response): recorded once, sent once.
    status, again = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and again["replayed"]
    drain(stack)
    assert telegram_texts(platforms).count(body["text"]) == 1

    sent_before, calls_before = len(platforms.replies()), llm.calls
    say("great, thank you!", 3)
    assert drain(stack) == [{"batchItemFailures": []}]
    assert len(platforms.replies()) == sent_before  # the agent stays silent
    state = load_session(runtime, SESSION)
    assert state.events[-1].text == "great, thank you!" and state.mode.value == "human"
    assert llm.calls >= calls_before  # matched for the trace, all the same

    status, released = call(
        "POST", f"/sessions/{SESSION}/handoff/release", {"person": "dana", "note": "refunded"}
    )
    assert status == 200 and released["mode"] == "auto" and released["handoff"] is None
    assert call("GET", "/handoffs")[1]["sessions"] == []

    say("and what is my balance?", 4)
    assert drain(stack) == [{"batchItemFailures": []}]
    assert len(platforms.replies()) == sent_before + 1  # the agent answers again
    assert any("refunded the 20 EUR fee" in p for p in llm.prompts[-3:])
    state = load_session(runtime, SESSION)
    modes = [e.data["mode"] for e in state.events if e.data.get("status") == MODE_CHANGED]
    assert modes == ["human", "auto"]
    person = [e for e in state.events if e.source is EventSource.HUMAN and e.text]
    assert [e.data["person"] for e in person] == ["dana"]


def test_a_person_cannot_write_to_a_session_the_agent_has(runtime: Runtime, stack: Any) -> None:
    say("hello", 1)
    drain(stack)
    body = {"person": "dana", "text": "hi"}
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 409 and "start a handoff" in refused["error"]
    assert call("POST", "/sessions/nope/handoff/take", {"person": "x"})[0] == 404


def test_an_operator_starts_a_handoff_and_a_second_person_cannot_take_it(
    runtime: Runtime, stack: Any
) -> None:
    say("hello", 1)
    drain(stack)
    status, started = call(
        "POST", f"/sessions/{SESSION}/handoff", {"reason": "VIP customer", "by": "lead"}
    )
    assert status == 201 and started["mode"] == "human"
    assert started["events"][0]["data"]["by"] == "lead"
    change_id = started["events"][0]["turn_id"]
    status, trace = call("GET", f"/sessions/{SESSION}/traces/{change_id}")
    assert status == 200 and trace["mode"] == "human"
    assert trace["notes"] == ["mode_changed by lead: VIP customer"]
    assert call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "a"})[0] == 200
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "b"})
    assert status == 409 and "already taken by 'a'" in refused["error"]


# -- an operator's handoff reaches the customer now ------------------------------------------------


def test_an_operator_started_handoff_reaches_the_customer_before_they_write_again(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    say("hello", 1)
    drain(stack)
    # A message posted through the API (the studio) carries no address: the Telegram one stays.
    assert call("POST", f"/sessions/{SESSION}/messages", {"text": "hi", "event_id": "s1"})[0] == 200
    status, _ = call("POST", f"/sessions/{SESSION}/handoff", {"reason": "upset", "by": "lead"})
    assert status == 201
    body = {"person": "lee", "text": "Lee here, I'm sorting this out for you.", "event_id": "l1"}
    calls_before = llm.calls
    status, posted = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and posted["delivery"] == "queued"
    assert drain(stack) == [{"batchItemFailures": []}]  # the customer wrote nothing since
    (sent,) = [r.json() for r in platforms.replies("telegram") if r.json()["text"] == body["text"]]
    assert sent["chat_id"] == CHAT
    assert llm.calls == calls_before
    # The inbox tool retries (a lost response): still one message on Telegram.
    assert call("POST", f"/sessions/{SESSION}/handoff/messages", body)[1]["replayed"]
    drain(stack)
    assert telegram_texts(platforms).count(body["text"]) == 1
    # Where Telegram answers is never shown: not in the session view, nor in a trace.
    # (the customer id is the chat id in a private chat: it is the address that must not show)
    view = str(call("GET", f"/sessions/{SESSION}")[1])
    assert "reply_to" not in view and "chat_id" not in view
    change_id = posted["events"][-1]["turn_id"]
    assert "chat_id" not in str(call("GET", f"/sessions/{SESSION}/traces/{change_id}")[1])


def test_a_handoff_on_an_api_session_is_not_delivered_and_says_why(runtime: Runtime) -> None:
    call("POST", "/sessions", {"customer_id": "web-user-9", "session_id": "web-9"})
    assert call("POST", "/sessions/web-9/messages", {"text": "hi", "event_id": "w1"})[0] == 200
    assert call("POST", "/sessions/web-9/handoff", {"reason": "VIP", "by": "lead"})[0] == 201
    status, posted = call(
        "POST", "/sessions/web-9/handoff/messages", {"person": "lee", "text": "Lee here."}
    )
    assert status == 200 and posted["delivery"] == "not_delivered"
    assert posted["delivery_error"] == "clients of this session read its events"
    assert posted["events"][-1]["text"] == "Lee here."  # recorded for those clients


def test_erasing_the_customer_forgets_where_they_were_answered(
    runtime: Runtime, stack: Any
) -> None:
    say("hello", 1)
    drain(stack)
    assert load_session(runtime, SESSION).last_reply_to["chat_id"] == CHAT
    assert any(f'"chat_id":{CHAT}' in item for item in stored_items())
    assert call("DELETE", f"/customers/telegram/{CHAT}")[0] == 200
    assert not any(f'"chat_id":{CHAT}' in item for item in stored_items())
    status, _ = call("POST", f"/sessions/{SESSION}/handoff", {"reason": "upset", "by": "lead"})
    assert status == 404


def stored_items() -> list[str]:
    """Every item of the state table, its gzipped body (the session state) decoded."""
    import gzip
    import os

    from infra.aws.clients import client

    texts = []
    for item in client("dynamodb").scan(TableName=os.environ["WAYPOINT_TABLE"])["Items"]:
        text = repr(item)
        if "body_gz" in item:
            text += gzip.decompress(item["body_gz"]["B"]).decode()
        texts.append(text)
    return texts


# -- who has the session writes -------------------------------------------------------------------


def posts(platforms: FakePlatforms, text: str) -> int:
    return telegram_texts(platforms).count(text)


def test_only_the_person_who_has_the_session_writes_or_hands_it_back(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    assert call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "ana"})[0] == 200
    version = load_session(runtime, SESSION).version
    body = {"person": "ben", "text": "Ben here!", "event_id": "b1"}
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 409 and "already taken by 'ana'" in refused["error"]
    assert "take_over" in refused["error"]
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/release", {"person": "ben"})
    assert status == 409 and "already taken by 'ana'" in refused["error"]
    drain(stack)
    state = load_session(runtime, SESSION)
    assert state.version == version and state.handoff.assignee == "ana"  # nothing recorded
    assert state.mode.value == "human" and posts(platforms, "Ben here!") == 0  # nor sent


def test_taking_over_reassigns_the_session_and_is_recorded(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "ana"})
    body = {"person": "ben", "text": "Ben here, taking over.", "event_id": "b1", "take_over": True}
    status, posted = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and posted["delivery"] == "queued"
    assert posted["handoff"]["assignee"] == "ben"
    taken, message = posted["events"]
    assert taken["data"] == {
        "status": "handoff_taken",
        "by": "ben",
        "from": "ana",
        "take_over": True,
        "why": "taken over from ana",
    }
    assert message["text"] == body["text"] and message["data"]["person"] == "ben"
    drain(stack)
    assert posts(platforms, body["text"]) == 1
    # Now ana is the one refused, and a take-over to hand back is recorded the same way.
    status, refused = call("POST", f"/sessions/{SESSION}/handoff/release", {"person": "ana"})
    assert status == 409 and "already taken by 'ben'" in refused["error"]
    status, released = call(
        "POST", f"/sessions/{SESSION}/handoff/release", {"person": "ana", "take_over": True}
    )
    assert status == 200 and released["mode"] == "auto"
    assert [e["data"]["status"] for e in released["events"]] == ["handoff_taken", MODE_CHANGED]
    assert released["events"][0]["data"]["from"] == "ben"


def test_writing_to_a_waiting_handoff_takes_it(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    body = {"person": "ana", "text": "Ana here.", "event_id": "a1"}
    status, posted = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and posted["handoff"]["assignee"] == "ana"
    assert posted["events"][0]["data"] == {
        "status": "handoff_taken",
        "by": "ana",
        "why": "wrote to the customer first",
    }
    assert call("GET", "/handoffs", query={"status": "taken"})[1]["sessions"][0]["assignee"] == (
        "ana"
    )
    status, _ = call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "ben"})
    assert status == 409


def test_a_retried_message_is_answered_as_recorded_even_after_a_take_over(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    body = {"person": "ana", "text": "Ana here, one moment.", "event_id": "a1"}
    first = call("POST", f"/sessions/{SESSION}/handoff/messages", body)[1]
    drain(stack)
    call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "ben", "take_over": True})
    # ana's inbox tool lost the first response and retries: the same change, not a 409.
    status, again = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and again["replayed"]
    assert [e["id"] for e in again["events"]] == [e["id"] for e in first["events"]]
    drain(stack)
    assert posts(platforms, body["text"]) == 1
    assert load_session(runtime, SESSION).handoff.assignee == "ben"
    # Long after, once the session no longer remembers the change's id (its window of ids and
    # events has moved on), the retry is still that change: found by its stored trace.
    for _ in range(MAX_REMEMBERED_IDS + 2):
        assert call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "ben"})[0] == 200
    assert not load_session(runtime, SESSION).has_committed(first["events"][0]["turn_id"])
    status, late = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and late["replayed"]
    drain(stack)
    assert posts(platforms, body["text"]) == 1


def test_a_persons_message_the_platform_refuses_for_now_is_sent_once_by_the_retry(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    # Telegram is down for every send of the first invocation (it retries once in-process).
    platforms.fail_next(SENDS_PER_INVOCATION, status=503)
    body = {"person": "dana", "text": "One moment please.", "event_id": "e-7"}
    status, posted = call("POST", f"/sessions/{SESSION}/handoff/messages", body)
    assert status == 200 and posted["delivery"] == "queued"
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    # Meanwhile the inbox tool posts it again: still one record, one job.
    assert call("POST", f"/sessions/{SESSION}/handoff/messages", body)[1]["replayed"]
    assert drain(stack) == [{"batchItemFailures": []}]  # SQS redelivers it
    drain(stack)
    assert telegram_texts(platforms).count("One moment please.") == 1
    state = load_session(runtime, SESSION)
    assert [e.text for e in state.events if e.source is EventSource.HUMAN and e.text] == [
        "One moment please."
    ]
    (written,) = [e for e in state.events if e.text == "One moment please."]
    entry = runtime.run(runtime.outbox.get(SESSION, written.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.SENT


@pytest.mark.parametrize("crash_at", ["commit", "outbox"])
def test_the_mode_survives_a_worker_crash_around_the_handoff_commit(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    monkeypatch: pytest.MonkeyPatch,
    crash_at: str,
) -> None:
    say("hello", 1)
    drain(stack)
    say("I want to speak to a human", 2)
    if crash_at == "commit":  # the worker dies before its turn is stored
        fail_once(monkeypatch, runtime.sessions, "commit", RuntimeError("Lambda killed"))
    else:  # … after the commit, before the notice went out
        fail_once(monkeypatch, runtime.outbox, "take", RuntimeError("Lambda killed"))
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert drain(stack) == [{"batchItemFailures": []}]  # SQS redelivers
    state = load_session(runtime, SESSION)
    assert state.mode.value == "human"
    modes = [e for e in state.events if e.data.get("status") == MODE_CHANGED]
    assert len(modes) == 1
    assert telegram_texts(platforms).count(NOTICE) == 1
    # Later messages are still only recorded.
    before = len(platforms.replies())
    say("hello? refund my fee please", 3)
    drain(stack)
    assert len(platforms.replies()) == before
    assert load_session(runtime, SESSION).mode.value == "human"


def test_the_handoff_routes_are_in_the_openapi_reference(runtime: Runtime) -> None:
    status, schema = call("GET", "/openapi.json")
    assert status == 200
    for path in (
        "/handoffs",
        "/sessions/{session_id}/handoff",
        "/sessions/{session_id}/handoff/take",
        "/sessions/{session_id}/handoff/messages",
        "/sessions/{session_id}/handoff/release",
    ):
        assert path in schema["paths"], path


# -- no one picks it up: the scheduled sweep ------------------------------------------------------

UNAVAILABLE = (
    "No one from our team is available right now. We've recorded your request and a person "
    "will get back to you here as soon as possible."
)


def test_the_sweep_records_a_ticket_once_the_pickup_is_overdue_and_tells_the_customer(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    from functions.handoff_sweep import sweep

    handed_off(stack, platforms)
    since = load_session(runtime, SESSION).handoff.since
    early = runtime.run(sweep(runtime, since + timedelta(minutes=10)))
    assert early == {"open": 1, "ticketed": 0, "notices_queued": 0}

    late = since + timedelta(minutes=16)  # the default timeout is 15 minutes
    assert runtime.run(sweep(runtime, late)) == {"open": 1, "ticketed": 1, "notices_queued": 1}
    assert drain(stack) == [{"batchItemFailures": []}]
    assert telegram_texts(platforms)[-1] == UNAVAILABLE
    (ticketed,) = call("GET", "/handoffs", query={"status": "ticket"})[1]["sessions"]
    assert ticketed["session_id"] == SESSION and ticketed["ticket_id"]
    # A second sweep (or a concurrent one) records nothing more and tells nobody again.
    assert runtime.run(sweep(runtime, late))["ticketed"] == 0
    drain(stack)
    assert telegram_texts(platforms).count(UNAVAILABLE) == 1
    tickets = [
        e for e in load_session(runtime, SESSION).events if e.data.get("status") == "handoff_ticket"
    ]
    assert len(tickets) == 1
    # A person can still take it afterwards (the ticket is the record that someone must).
    assert call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "dana"})[0] == 200


def test_the_sweep_leaves_a_taken_session_alone(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    from functions.handoff_sweep import sweep

    handed_off(stack, platforms)
    call("POST", f"/sessions/{SESSION}/handoff/take", {"person": "dana"})
    since = load_session(runtime, SESSION).handoff.since
    assert runtime.run(sweep(runtime, since + timedelta(hours=2)))["ticketed"] == 0


def test_erasing_the_customer_removes_their_handoff_from_the_list(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    handed_off(stack, platforms)
    assert len(call("GET", "/handoffs")[1]["sessions"]) == 1
    assert call("DELETE", f"/customers/telegram/{CHAT}")[0] == 200
    assert call("GET", "/handoffs")[1]["sessions"] == []
