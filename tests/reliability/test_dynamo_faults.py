"""DynamoDB faults under the worker: a racing turn (the commit's condition fails), a session that
keeps changing, and throttling beyond botocore's own retries on every call a turn makes.

A racing turn is recomputed on fresh state; anything else fails the SQS record, which is retried.
Either way nothing is lost: every customer message is stored once, in order, and answered once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import SessionConflict
from engine.ports import TurnCommit
from engine.sessions.session import EventKind, EventSource, InboundMessage, SessionState
from infra.outbox import OutboxStatus
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.functions.conftest import (
    CountingLLM,
    drain,
    inbox_items,
    load_session,
    queue_depth,
    telegram_says,
)
from tests.functions.platforms import FakePlatforms
from tests.reliability.faults import (
    FaultyDynamoDB,
    commits_a_turn,
    install_faulty_dynamodb,
    marks_sent,
    takes_the_outbox_lease,
    throttled,
    throttled_transaction,
)

CHAT = 6161
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


def say(text: str, update_id: int) -> dict[str, Any]:
    return telegram_says(CHAT, text, update_id)


def session(runtime: Runtime) -> SessionState:
    return load_session(runtime, SESSION)


def messages(state: SessionState, source: EventSource) -> list[str]:
    return [
        e.text or "" for e in state.events if e.kind is EventKind.MESSAGE and e.source is source
    ]


def assert_each_message_answered_once(state: SessionState) -> None:
    """Every turn that holds customer messages holds exactly one agent reply."""
    turns = {e.turn_id for e in state.events if e.source is EventSource.CUSTOMER}
    replies = [e.turn_id for e in state.events if e.source is EventSource.AGENT]
    assert sorted(replies) == sorted(turns)


def racing_commits(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, races: int
) -> list[InboundMessage]:
    """The next `races` commits of the session each lose to another turn that commits first (a
    message posted through the management API while the worker was computing)."""
    store = runtime.sessions
    real_commit = store.commit
    sent: list[InboundMessage] = []

    async def commit(turn: TurnCommit) -> bool:
        racing = (
            turn.state.id == SESSION and len(sent) < races and not getattr(commit, "inside", False)
        )
        if racing:
            message = InboundMessage(event_id=f"api:api:race-{len(sent)}", text="I want to log in")
            sent.append(message)
            commit.inside = True  # type: ignore[attr-defined]
            try:
                await runtime.engine.handle(SESSION, [message])
            finally:
                commit.inside = False  # type: ignore[attr-defined]
        return await real_commit(turn)

    monkeypatch.setattr(store, "commit", commit)
    return sent


def test_a_racing_turn_makes_the_commit_fail_and_the_turn_is_recomputed_on_fresh_state(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    say("hi", 1)
    race = racing_commits(runtime, monkeypatch, races=1)

    assert drain(stack) == [{"batchItemFailures": []}]

    assert len(race) == 1
    state = session(runtime)
    # the racing message committed first; the worker's turn was recomputed after it
    assert messages(state, EventSource.CUSTOMER) == ["I want to log in", "hi"]
    assert_each_message_answered_once(state)
    assert state.version == 2
    assert len(platforms.replies()) == 1  # the Telegram message's reply (api turns send nothing)
    (hi,) = [e for e in state.events if e.text == "hi"]
    telegram_reply = next(
        e for e in state.events if e.turn_id == hi.turn_id and e.source is EventSource.AGENT
    )
    assert platforms.replies()[0].json()["text"] == telegram_reply.text


def test_a_session_that_keeps_changing_fails_the_record_and_sqs_retries_it(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    say("hi", 1)
    attempts = runtime.engine.max_conflict_retries + 1
    race = racing_commits(runtime, monkeypatch, races=attempts)

    (first,) = drain(stack)
    assert len(first["batchItemFailures"]) == 1  # SessionConflict after every attempt lost
    assert len(race) == attempts
    assert messages(session(runtime), EventSource.CUSTOMER) == ["I want to log in"] * attempts
    assert platforms.replies() == []

    assert drain(stack) == [{"batchItemFailures": []}]  # redelivered: no race this time

    state = session(runtime)
    assert messages(state, EventSource.CUSTOMER) == ["I want to log in"] * attempts + ["hi"]
    assert_each_message_answered_once(state)
    assert len(platforms.replies()) == 1
    assert queue_depth(stack) == 0


def test_the_engine_gives_up_with_a_session_conflict_rather_than_overwriting(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    say("hi", 1)
    racing_commits(runtime, monkeypatch, races=99)
    message = InboundMessage(event_id="api:api:x", text="hello")
    with pytest.raises(SessionConflict):
        runtime.run(runtime.engine.handle(SESSION, [message]))


# -- throttling -----------------------------------------------------------------------------------

WORKER_CALLS: dict[str, tuple[str, Callable[[], Exception], Callable[[dict[str, Any]], bool]]] = {
    "load-session-meta": ("get_item", lambda: throttled("GetItem"), lambda kw: True),
    "load-session-events": ("query", lambda: throttled("Query"), lambda kw: True),
    "commit-throttled": (
        "transact_write_items",
        lambda: throttled("TransactWriteItems"),
        commits_a_turn,
    ),
    "commit-cancelled-by-throttling": (
        "transact_write_items",
        lambda: throttled_transaction(items=6),
        commits_a_turn,
    ),
    "take-outbox": ("update_item", lambda: throttled("UpdateItem"), takes_the_outbox_lease),
}


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch, stack: Any) -> FaultyDynamoDB:
    return install_faulty_dynamodb(monkeypatch)


@pytest.mark.parametrize("call", list(WORKER_CALLS))
def test_a_throttled_dynamodb_call_fails_the_record_and_the_retry_answers_once(
    call: str,
    dynamodb: FaultyDynamoDB,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
) -> None:
    assert say("hi", 1)["statusCode"] == 200
    operation, error, when = WORKER_CALLS[call]
    dynamodb.inject(operation, error(), error(), when=when)  # twice: two deliveries fail

    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert drain(stack) == [{"batchItemFailures": []}]

    assert [op for op, _ in dynamodb.raised] == [operation, operation]
    state = session(runtime)
    assert messages(state, EventSource.CUSTOMER) == ["hi"]
    assert_each_message_answered_once(state)
    assert len(platforms.replies()) == 1
    assert queue_depth(stack) == 0


def test_a_throttled_inbox_claim_is_refused_with_a_503_and_the_platform_retry_is_queued_once(
    dynamodb: FaultyDynamoDB, runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    dynamodb.inject("put_item", throttled("PutItem"))

    refused = say("hi", 1)
    assert refused["statusCode"] == 503  # the platform will retry
    assert "Throughput" not in refused["body"]
    assert inbox_items(stack) == [] and queue_depth(stack) == 0

    assert say("hi", 1)["statusCode"] == 200  # Telegram's retry
    assert say("hi", 1)["statusCode"] == 200  # and a duplicate of it
    assert queue_depth(stack) == 1
    assert drain(stack) == [{"batchItemFailures": []}]
    assert len(platforms.replies()) == 1


def test_a_throttled_session_creation_releases_the_claim_and_asks_for_a_retry(
    dynamodb: FaultyDynamoDB, runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    # The webhook creates a session with one conditional UpdateItem (it never reads it back).
    dynamodb.inject("update_item", throttled("UpdateItem"))

    assert say("hi", 1)["statusCode"] == 503
    assert inbox_items(stack) == [] and queue_depth(stack) == 0

    assert say("hi", 1)["statusCode"] == 200
    assert drain(stack) == [{"batchItemFailures": []}]
    assert messages(session(runtime), EventSource.CUSTOMER) == ["hi"]
    assert len(platforms.replies()) == 1


@pytest.mark.parametrize("failures", [1, 5], ids=["once", "persistently"])
def test_a_throttled_sent_mark_after_an_accepted_send_does_not_send_twice(
    failures: int,
    dynamodb: FaultyDynamoDB,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
) -> None:
    """Found by this suite: a failed SENT mark used to fail the record, and the redelivery sent
    the reply again. Now it is retried briefly, then only logged (the record stays SENDING until
    its lease runs out)."""
    say("hi", 1)
    dynamodb.inject(
        "update_item", *(throttled("UpdateItem") for _ in range(failures)), when=marks_sent
    )

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None
    assert entry.status in (OutboxStatus.SENT, OutboxStatus.SENDING)
    assert queue_depth(stack) == 0


def test_a_throttled_lease_renewal_between_two_sends_gives_the_lease_back(
    dynamodb: FaultyDynamoDB, runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    """Found by the load test: the platform answers 503, and the outbox write that renews the
    lease for the in-invocation retry is throttled. The lease used to stay SENDING until it
    expired, so every redelivery found it busy; now it is handed back at once."""
    say("hi", 1)
    platforms.fail_next(1, status=503)
    takes: list[dict[str, Any]] = []

    def the_renewal(kwargs: dict[str, Any]) -> bool:
        if takes_the_outbox_lease(kwargs):
            takes.append(kwargs)
        return len(takes) == 2

    dynamodb.inject("update_item", throttled("UpdateItem"), when=the_renewal)

    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.PENDING
    assert drain(stack) == [{"batchItemFailures": []}]
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
    assert queue_depth(stack) == 0
