"""The turn worker: bursts answered once, partial batch failures that keep each session in order,
and delivery through the outbox — a crash after the commit never costs a second turn, and a
redelivery never sends a reply twice."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.sessions.session import Event, EventKind, EventSource, PendingInterrupt, SessionState
from examples.banking import bank
from examples.banking import load as load_bank
from functions import worker
from functions.worker import TurnWorker
from functions.worker_bursts import plan_bursts
from functions.worker_delivery import SENDS_PER_INVOCATION
from functions.worker_replies import PLAIN_FALLBACKS_METRIC, note_plain_fallbacks, replies_for
from functions.worker_telemetry import metrics
from infra.aws.lambda_routing import LocalLambdaContext
from infra.channels.base import DeliveryReceipt, NormalizedMessage
from infra.channels.options import compact_choice_id
from infra.outbox import OutboxStatus, outbound_reply
from infra.runtime import Runtime
from infra.turn_queue import QueuedMessage, session_id_for
from tests.functions.conftest import (
    CountingLLM,
    drain,
    everything_stored,
    fail_once,
    invoke_worker,
    queue_depth,
    receive_all,
    telegram_says,
)
from tests.functions.lambda_events import sqs_event, sqs_record
from tests.functions.platforms import FakePlatforms

CHAT = 31337
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


def say(text: str, update_id: int) -> dict[str, Any]:
    """The customer writes `text` in the Telegram chat (through the webhook)."""
    response = telegram_says(CHAT, text, update_id)
    assert response["statusCode"] == 200
    return response


def agent_messages(runtime: Runtime, session_id: str = SESSION) -> list[Event]:
    state = runtime.run(runtime.sessions.load(session_id))
    assert state is not None
    return [
        e for e in state.events if e.kind is EventKind.MESSAGE and e.source is EventSource.AGENT
    ]


def queued(
    session_id: str, event_id: str, text: str = "hi", agent_id: str = "bank"
) -> QueuedMessage:
    return QueuedMessage(
        session_id=session_id,
        agent_id=agent_id,
        message=NormalizedMessage(
            channel="telegram",
            account_id="700100200",
            event_id=event_id,
            conversation_key=f"tg:700100200:{session_id}",
            customer_id="c-" + session_id,
            text=text,
            reply_to={"chat_id": 1, "message_id": 1},
            raw_type="message",
            received_at=datetime.now(UTC),
        ),
    )


# -- bursts -----------------------------------------------------------------------------------


def test_a_burst_of_three_messages_is_answered_once_with_all_of_them_in_context(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)
    say("I want to check my balance", 2)
    say("my username is alice", 3)

    assert drain(stack) == [{"batchItemFailures": []}]

    assert len(platforms.replies()) == 1
    state = runtime.run(runtime.sessions.load(SESSION))
    assert state is not None
    customer = [e for e in state.events if e.source is EventSource.CUSTOMER]
    (reply,) = agent_messages(runtime)
    assert [e.text for e in customer] == [
        "hi",
        "I want to check my balance",
        "my username is alice",
    ]
    assert {e.turn_id for e in customer} == {reply.turn_id}


def test_one_reply_per_message_when_configured(
    make_runtime: Callable[..., Runtime], stack: Any, platforms: FakePlatforms
) -> None:
    runtime = make_runtime(reply_per_message=True)
    runtime.run(runtime.publish_agent(load_bank()))
    say("hi", 1)
    say("what is the price of AAPL", 2)
    say("thanks", 3)

    assert drain(stack) == [{"batchItemFailures": []}]
    assert len(platforms.replies()) == 3
    assert len({e.turn_id for e in agent_messages(runtime)}) == 3


def test_the_bursts_of_different_sessions_are_answered_separately() -> None:
    a1, b1, a2 = queued("a", "1"), queued("b", "2"), queued("a", "3")
    plan = plan_bursts(
        [
            sqs_record(a1, message_id="r1"),
            sqs_record(b1, message_id="r2"),
            sqs_record(a2, message_id="r3"),
        ],
        per_message=False,
    )
    assert plan["r1"] is plan["r3"] and plan["r1"] is not plan["r2"]
    burst = plan["r1"]
    assert not isinstance(burst, Exception)
    assert [q.message.event_id for q in burst.requests] == ["1", "3"]


# -- partial batch failures ---------------------------------------------------------------------


def _create(runtime: Runtime, session_id: str, agent_id: str) -> None:
    state = SessionState(id=session_id, agent_id=agent_id, customer_id="c", channel="telegram")
    runtime.run(runtime.sessions.create(state))


@pytest.mark.parametrize("per_message", [False, True], ids=["bursts", "one-turn-per-message"])
def test_a_failing_session_fails_only_its_own_records_and_all_its_later_ones(
    per_message: bool, make_runtime: Callable[..., Runtime], platforms: FakePlatforms
) -> None:
    runtime = make_runtime(reply_per_message=per_message)
    runtime.run(runtime.publish_agent(load_bank()))
    _create(runtime, "broken", "no-such-agent")  # its turns raise AgentNotFound
    _create(runtime, "fine", "bank")
    event = sqs_event(
        [
            sqs_record(queued("broken", "b1", agent_id="no-such-agent"), message_id="r1"),
            sqs_record(queued("fine", "f1"), message_id="r2"),
            sqs_record(queued("broken", "b2", agent_id="no-such-agent"), message_id="r3"),
            sqs_record(queued("fine", "f2"), message_id="r4"),
        ]
    )

    response = invoke_worker(event)

    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {"r1", "r3"}
    assert len(agent_messages(runtime, "fine")) == (2 if per_message else 1)
    assert len(platforms.replies()) == (2 if per_message else 1)


def test_when_every_record_fails_all_are_reported_rather_than_raised(runtime: Runtime) -> None:
    _create(runtime, "broken", "no-such-agent")
    event = sqs_event(
        [sqs_record(queued("broken", "x", agent_id="no-such-agent"), message_id="r1")]
    )
    assert invoke_worker(event) == {"batchItemFailures": [{"itemIdentifier": "r1"}]}


class ShortInvocation:
    """A Lambda context whose remaining time reads `left` in turn: the invocation runs out."""

    def __init__(self, *left_ms: int) -> None:
        local = LocalLambdaContext("waypoint-local-worker")
        self.function_name, self.aws_request_id = local.function_name, local.aws_request_id
        self.memory_limit_in_mb = local.memory_limit_in_mb
        self.invoked_function_arn = local.invoked_function_arn
        self.left = list(left_ms)

    def get_remaining_time_in_millis(self) -> int:
        return self.left.pop(0) if len(self.left) > 1 else self.left[0]


def test_a_worker_short_of_time_starts_no_turn_and_reports_the_untouched_records(
    runtime: Runtime, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    for session in ("first", "second", "third"):
        _create(runtime, session, "bank")
    event = sqs_event(
        [
            sqs_record(queued("first", "a1"), message_id="r1"),
            sqs_record(queued("second", "b1"), message_id="r2"),
            sqs_record(queued("first", "a2", text="and more"), message_id="r3"),
            sqs_record(queued("third", "c1"), message_id="r4"),
        ]
    )
    reserve = worker.TURN_TIME_RESERVE_MS
    # Time for the first session's turn; then the invocation is nearly over.
    context = ShortInvocation(reserve + 60_000, reserve - 1)

    response = worker.handler(event, context)

    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {"r2", "r4"}
    assert len(agent_messages(runtime, "first")) == 1  # r1 and r3: one burst, answered
    assert agent_messages(runtime, "second") == agent_messages(runtime, "third") == []
    assert len(platforms.replies()) == 1
    calls = llm.calls

    # The retry, in an invocation with time to spare, answers the rest once.
    again = sqs_event([r for r in event["Records"] if r["messageId"] in ("r2", "r4")])
    assert invoke_worker(again) == {"batchItemFailures": []}
    assert len(agent_messages(runtime, "second")) == len(agent_messages(runtime, "third")) == 1
    assert len(platforms.replies()) == 3 and llm.calls > calls


def test_with_no_time_left_every_record_is_reported_untouched(
    runtime: Runtime, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    _create(runtime, "first", "bank")
    event = sqs_event([sqs_record(queued("first", "a1"), message_id="r1")])

    response = worker.handler(event, ShortInvocation(1_000))

    assert response == {"batchItemFailures": [{"itemIdentifier": "r1"}]}
    assert llm.calls == 0 and platforms.replies() == []
    assert agent_messages(runtime, "first") == []


def test_an_unreadable_message_fails_alone(runtime: Runtime, platforms: FakePlatforms) -> None:
    good = queued("fine", "f1")
    _create(runtime, "fine", "bank")
    event = sqs_event(
        [
            sqs_record(good, message_id="r1", body='{"not": "a turn"}'),
            sqs_record(queued("fine", "f1"), message_id="r2"),
        ]
    )
    event["Records"][0]["attributes"]["MessageGroupId"] = "garbage"
    assert invoke_worker(event) == {"batchItemFailures": [{"itemIdentifier": "r1"}]}
    assert len(platforms.replies()) == 1


def test_a_missing_session_is_recreated_from_the_message(
    runtime: Runtime, platforms: FakePlatforms
) -> None:
    event = sqs_event([sqs_record(queued("lost", "l1"), message_id="r1")])
    assert invoke_worker(event) == {"batchItemFailures": []}
    state = runtime.run(runtime.sessions.load("lost"))
    assert state is not None and state.agent_id == "bank"
    assert len(platforms.replies()) == 1


# -- delivery through the outbox ----------------------------------------------------------------


def test_a_delivery_failure_after_the_commit_retries_the_send_not_the_turn(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    say("hi", 1)
    # Telegram is down for every send of the first invocation (it retries once in-process).
    platforms.fail_next(SENDS_PER_INVOCATION, status=503)

    (first,) = drain(stack)
    assert len(first["batchItemFailures"]) == 1
    (reply,) = agent_messages(runtime)  # the turn committed before the send failed
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None
    assert (entry.status, entry.attempts) == (OutboxStatus.PENDING, SENDS_PER_INVOCATION)
    calls_after_the_turn = llm.calls

    assert drain(stack) == [{"batchItemFailures": []}]  # SQS redelivers the message

    assert llm.calls == calls_after_the_turn  # replayed: no second turn
    assert len(agent_messages(runtime)) == 1
    assert len(platforms.replies()) == 1  # delivered once
    assert platforms.replies()[0].json()["text"] == reply.text
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.SENT
    assert queue_depth(stack) == 0


def test_a_crash_between_the_commit_and_the_outbox_still_sends_exactly_once(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    say("hi", 1)
    fail_once(monkeypatch, runtime.outbox, "take", RuntimeError("Lambda killed after the commit"))
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert platforms.replies() == []
    calls = llm.calls

    assert drain(stack) == [{"batchItemFailures": []}]
    assert llm.calls == calls
    assert len(platforms.replies()) == 1
    assert len(agent_messages(runtime)) == 1


def test_a_redelivered_message_whose_reply_went_out_sends_nothing(
    runtime: Runtime, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    _create(runtime, "s", "bank")
    event = sqs_event([sqs_record(queued("s", "e1"), message_id="r1")])
    assert invoke_worker(event) == {"batchItemFailures": []}
    calls = llm.calls

    assert invoke_worker(event) == {"batchItemFailures": []}  # e.g. the delete was lost

    assert llm.calls == calls
    assert len(platforms.replies()) == 1


def test_a_reply_refused_for_good_is_not_retried(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)
    platforms.fail_next(1, status=403)  # e.g. the customer blocked the bot

    assert drain(stack) == [{"batchItemFailures": []}]  # the session's queue is not blocked
    (reply,) = agent_messages(runtime)
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.FAILED
    assert platforms.replies() == []


def test_a_send_refused_once_with_a_503_is_retried_within_the_invocation(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)
    platforms.fail_next(1, status=503)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = agent_messages(runtime)
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and (entry.status, entry.attempts) == (OutboxStatus.SENT, 2)


def test_an_undelivered_older_reply_goes_out_before_the_answer_to_a_newer_message(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)
    platforms.fail_next(SENDS_PER_INVOCATION, status=503)
    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    say("what is the price of AAPL", 2)  # arrives while the first reply is still pending

    assert drain(stack) == [{"batchItemFailures": []}]  # both messages in one batch

    first, second = agent_messages(runtime)
    assert first.turn_id != second.turn_id
    assert [r.json()["text"] for r in platforms.replies()] == [first.text, second.text]


def test_logs_carry_the_session_but_never_the_message_text(
    runtime: Runtime,
    stack: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    say("my secret plan is pineapples", 1)
    drain(stack)
    records = [vars(r) for r in caplog.records if r.name.startswith("waypoint-")]
    assert any(r.get("session_id") == SESSION for r in records)
    assert all("pineapples" not in repr(r) for r in records)
    metrics = capsys.readouterr().out  # EMF lines
    assert '"TurnLatency"' in metrics and '"PromptTokens"' in metrics
    assert "pineapples" not in metrics


def test_a_password_typed_in_telegram_is_masked_once_its_turn_has_run(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    # The webhook cannot know a message is a password (it is stateless): the SQS message carries
    # it until the worker's turn commits and deletes it. After that, nothing holds it.
    bank.reset_bank()
    password = "monkey"
    for update_id, text in enumerate(["Transfer money", "seldo"], start=1):
        say(text, update_id)
        assert drain(stack) == [{"batchItemFailures": []}]
    say(password, 3)
    (waiting,) = receive_all(stack)  # the documented window: in the queue until its turn runs
    assert password in waiting["Body"]
    stack.client("sqs").change_message_visibility(
        QueueUrl=stack.queue_url, ReceiptHandle=waiting["ReceiptHandle"], VisibilityTimeout=0
    )
    assert drain(stack) == [{"batchItemFailures": []}]

    assert "logged in" in agent_messages(runtime)[-1].text
    stored = everything_stored(stack)  # the table (inbox, outbox, events…), the bucket, queues
    assert "seldo" in stored and password not in stored
    sent = json.dumps([r.json() for r in platforms.replies()])
    assert password not in sent


# -- replies and choices ------------------------------------------------------------------------


def _reply_event(**data: Any) -> Event:
    return Event(
        id="ev",
        offset=1,
        kind=EventKind.MESSAGE,
        source=EventSource.AGENT,
        created_at=datetime.now(UTC),
        turn_id="t",
        text="Which account?",
        data=data,
    )


def test_selector_options_on_a_reply_become_buttons() -> None:
    event = _reply_event(
        options=[
            {"id": "chk", "label": "Checking", "value": {"id": "chk"}},
            {"id": "sav", "label": "Savings", "value": {"id": "sav"}},
            {"id": "", "label": "broken"},
        ]
    )
    reply = outbound_reply(event, {"chat_id": 1})
    assert reply is not None
    assert [(o.id, o.label) for o in reply.options] == [("chk", "Checking"), ("sav", "Savings")]


def test_a_compacted_button_id_is_mapped_back_to_the_offered_option(runtime: Runtime) -> None:
    long_id = "account:" + "9" * 80  # over Telegram's 64-byte callback_data
    pending = PendingInterrupt(
        tool="pick_account",
        call_id="c1",
        kind="selector",
        options=({"id": long_id, "label": "Savings", "value": {}},),
    )
    runtime.run(
        runtime.sessions.create(
            SessionState(id="s", agent_id="bank", customer_id="c", pending_interrupt=pending)
        )
    )
    message = queued("s", "e1").message.model_copy(
        update={"choice": compact_choice_id(long_id, 64)}
    )
    worker = TurnWorker(runtime, {})
    inbound = runtime.run(
        worker._inbound(QueuedMessage(session_id="s", agent_id="bank", message=message))
    )
    assert inbound.choice == long_id


def test_replies_for_finds_each_turn_that_answered_the_burst() -> None:
    now = datetime.now(UTC)

    def event(offset: int, source: EventSource, turn: str, **data: Any) -> Event:
        return Event(
            id=f"e{offset}",
            offset=offset,
            kind=EventKind.MESSAGE,
            source=source,
            created_at=now,
            turn_id=turn,
            text=f"m{offset}",
            data=data,
        )

    q1, q2 = queued("s", "1"), queued("s", "2")
    state = SessionState(
        id="s",
        agent_id="bank",
        customer_id="c",
        events=(
            event(0, EventSource.CUSTOMER, "t1", channel_event_id=q1.message.dedup_key),
            event(1, EventSource.AGENT, "t1"),
            event(2, EventSource.CUSTOMER, "t2", channel_event_id=q2.message.dedup_key),
            event(3, EventSource.AGENT, "t2"),
        ),
    )
    assert [(p.turn_id, p.event.text) for p in replies_for(state, [q1, q2])] == [
        ("t1", "m1"),
        ("t2", "m3"),
    ]
    assert [p.turn_id for p in replies_for(state, [q2])] == ["t2"]


def test_a_reply_sent_as_plain_text_after_a_refusal_is_logged_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receipt = DeliveryReceipt(
        channel="whatsapp", message_ids=["wamid.1"], plain_fallbacks=["131009: not valid"]
    )
    metrics.clear_metrics()
    note_plain_fallbacks(receipt, "t1")
    assert metrics.metric_set[PLAIN_FALLBACKS_METRIC]["Value"] == [1.0]
    assert any("plain numbered text" in r.message for r in caplog.records)
    metrics.clear_metrics()
    note_plain_fallbacks(DeliveryReceipt(channel="whatsapp"), "t2")
    assert PLAIN_FALLBACKS_METRIC not in metrics.metric_set


def test_the_customer_sees_typing_from_pickup_until_the_reply(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)
    drain(stack)
    telegram = [r.path.rsplit("/", 1)[-1] for r in platforms.requests if r.channel == "telegram"]
    assert telegram[0] == "sendChatAction" and telegram[-1] == "sendMessage"
    assert platforms.typing("telegram")[0].json() == {"chat_id": CHAT, "action": "typing"}


def test_a_failing_typing_indicator_does_not_fail_the_turn(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    platforms.fail_typing(500)
    say("hi", 1)
    assert drain(stack) == [{"batchItemFailures": []}]
    (reply,) = agent_messages(runtime)
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
