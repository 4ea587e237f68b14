"""Exactly one reply per turn, whatever happens between the queue, the commit and the platform:
crashes before and after the commit, SQS redeliveries (in a row, concurrently with the original,
after the dead-letter queue), two deliveries of one turn at once, a reply no attempt can deliver,
and the one window the outbox documents."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine.compose import ComposedReply
from engine.ports import Generation, TurnCommit
from engine.sessions.session import EventSource, SessionState
from examples.banking import load as load_bank
from functions.worker import TurnWorker
from functions.worker_bursts import Burst, plan_bursts
from functions.worker_delivery import (
    DELIVERY_LEASE_SECONDS,
    MAX_DELIVERY_ATTEMPTS,
    SENDS_PER_INVOCATION,
)
from functions.worker_telemetry import SERVICE
from infra.aws.cfn_template import load_template
from infra.outbox import Lease, LeaseOutcome, OutboxStatus
from infra.runtime import Runtime
from infra.runtime_settings import RuntimeSettings
from infra.turn_queue import session_id_for
from tests.functions.conftest import (
    API_KEY,
    CountingLLM,
    build_runtime,
    drain,
    fail_once,
    invoke_management,
    invoke_worker,
    load_session,
    queue_depth,
    receive_all,
    telegram_says,
)
from tests.functions.lambda_events import http_event, records_from_queue, sqs_event
from tests.functions.platforms import FakePlatforms
from tests.reliability.faults import ShiftedClock

CHAT = 7171
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
MAX_RECEIVE_COUNT = load_template()["Resources"]["TurnQueue"]["Properties"]["RedrivePolicy"][
    "maxReceiveCount"
]


def say(text: str, update_id: int) -> None:
    assert telegram_says(CHAT, text, update_id)["statusCode"] == 200


def session(runtime: Runtime) -> SessionState:
    return load_session(runtime, SESSION)


def agent_replies(runtime: Runtime) -> list[str]:
    return [e.text or "" for e in session(runtime).events if e.source is EventSource.AGENT]


def assert_one_turn_one_reply(runtime: Runtime, platforms: FakePlatforms) -> None:
    (reply,) = agent_replies(runtime)
    assert [r.json()["text"] for r in platforms.replies()] == [reply]


# -- crashes --------------------------------------------------------------------------------------


class CrashingComposer(CountingLLM):
    """The offline model; the first `crashes` compositions kill the invocation (a Lambda timeout
    or out-of-memory: not an LLM error the engine could fall back from)."""

    def __init__(self, crashes: int) -> None:
        super().__init__()
        self.crashes = crashes

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        if schema is ComposedReply and self.crashes:
            self.crashes -= 1
            raise MemoryError("injected: the worker died mid-turn")
        return await super().generate(prompt, schema, model=model)


@pytest.fixture
def llm() -> CountingLLM:
    return CrashingComposer(crashes=1)


@pytest.fixture
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime], clock: ShiftedClock) -> Runtime:
    """The banking runtime on a clock the tests can move (outbox leases run out)."""
    installed = make_runtime(clock=clock)
    installed.run(installed.publish_agent(load_bank()))
    return installed


def test_a_crash_before_the_commit_leaves_nothing_and_the_redelivery_answers_once(
    runtime: Runtime, stack: Any, platforms: FakePlatforms
) -> None:
    say("hi", 1)

    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert session(runtime).events == ()  # nothing half-written
    assert platforms.replies() == []

    assert drain(stack) == [{"batchItemFailures": []}]
    assert_one_turn_one_reply(runtime, platforms)
    assert queue_depth(stack) == 0


@pytest.mark.parametrize("crash_in", ["take", "send"])
def test_a_crash_between_the_commit_and_the_delivery_still_sends_exactly_once(
    crash_in: str,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    telegram = runtime.channels["telegram"]
    target, name = (runtime.outbox, "take") if crash_in == "take" else (telegram, "send")
    fail_once(monkeypatch, target, name, TimeoutError("injected: Lambda timed out after commit"))

    assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert len(agent_replies(runtime)) == 1  # committed
    assert platforms.replies() == []
    calls = llm.calls

    assert drain(stack) == [{"batchItemFailures": []}]
    assert llm.calls == calls  # replayed, not recomputed
    assert_one_turn_one_reply(runtime, platforms)


class LambdaKilled(BaseException):
    """The invocation dies (timeout, out of memory): no `except Exception` in the handler runs."""


def test_the_documented_window_a_worker_killed_after_the_platform_accepted_sends_again(
    runtime: Runtime,
    clock: ShiftedClock,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """infra/outbox.py: "a crash between the platform's accept and `mark_sent`: the next attempt
    sends again". Pinned so the window stays exactly that wide: one duplicate, same text."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    killed = LambdaKilled("injected: the worker died right after the platform accepted")
    fail_once(monkeypatch, runtime.outbox, "mark_sent", killed)
    (message,) = receive_all(stack)
    with pytest.raises(LambdaKilled):
        invoke_worker(sqs_event(records_from_queue([message])))
    stack.client("sqs").change_message_visibility(  # the visibility timeout runs out
        QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    clock.advance(DELIVERY_LEASE_SECONDS)  # it outlasts the dead worker's outbox lease

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = agent_replies(runtime)
    assert [r.json()["text"] for r in platforms.replies()] == [reply, reply]
    assert queue_depth(stack) == 0


# -- redeliveries ---------------------------------------------------------------------------------


def test_the_same_record_delivered_five_times_is_answered_once(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    (message,) = receive_all(stack)
    event = sqs_event(records_from_queue([message]))

    responses = [invoke_worker(event) for _ in range(5)]  # the deletes were lost

    assert responses == [{"batchItemFailures": []}] * 5
    assert_one_turn_one_reply(runtime, platforms)


def test_the_same_message_twice_in_one_batch_is_stored_and_answered_once(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, llm: CountingLLM
) -> None:
    """A message re-sent past SQS's 5-minute dedup window (management API `event_id` retry,
    a manual redrive) can land in the same batch as its first copy. Found by this suite: the
    customer message used to be stored twice."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    (message,) = receive_all(stack)
    first, again = records_from_queue([message, {**message, "MessageId": "copy"}])

    assert invoke_worker(sqs_event([first, again])) == {"batchItemFailures": []}

    customer = [e for e in session(runtime).events if e.source is EventSource.CUSTOMER]
    assert [e.text for e in customer] == ["hi"]
    assert_one_turn_one_reply(runtime, platforms)


@pytest.fixture
def second_worker(
    runtime: Runtime, platforms: FakePlatforms, llm: CountingLLM
) -> Iterator[Runtime]:
    """Another warm container of the worker Lambda: same stack, platforms and model."""
    other = build_runtime(RuntimeSettings.from_env(), llm, platforms)
    yield other
    other.close()


def _burst(records: list[dict[str, Any]]) -> Burst:
    bursts = list(plan_bursts(records, per_message=False).values())
    assert len(bursts) == 1 and isinstance(bursts[0], Burst)
    return bursts[0]


def _first_worker_in_a_thread(
    runtime: Runtime, records: list[dict[str, Any]]
) -> tuple[threading.Thread, list[BaseException]]:
    """A worker answering `records` on its own thread, started; what it raised is collected."""
    errors: list[BaseException] = []

    def first_worker() -> None:
        try:
            runtime.run(TurnWorker(runtime, {}).answer(_burst(records)))
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)

    thread = threading.Thread(target=first_worker)
    thread.start()
    return thread, errors


def test_a_redelivery_processed_concurrently_with_the_original_commits_and_sends_once(
    runtime: Runtime,
    second_worker: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The visibility timeout ran out while the first worker was still computing: SQS hands the
    same message to a second worker. The first one then loses the commit and replays."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    records = records_from_queue(receive_all(stack))
    first_is_about_to_commit, second_is_done = threading.Event(), threading.Event()
    real_commit = runtime.sessions.commit

    async def slow_commit(turn: TurnCommit) -> bool:
        first_is_about_to_commit.set()
        assert second_is_done.wait(timeout=30)
        return await real_commit(turn)

    monkeypatch.setattr(runtime.sessions, "commit", slow_commit)
    thread, errors = _first_worker_in_a_thread(runtime, records)
    assert first_is_about_to_commit.wait(timeout=30), errors
    second_worker.run(TurnWorker(second_worker, {}).answer(_burst(records)))
    second_is_done.set()
    thread.join(timeout=30)

    assert errors == []
    assert_one_turn_one_reply(runtime, platforms)
    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.SENT


def test_a_turn_that_failed_until_the_dead_letter_queue_is_sent_once_after_the_redrive(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The turn commits, then every attempt dies before the send (DynamoDB unreachable at the
    outbox): the message reaches the dead-letter queue with its turn committed, and a redrive
    sends the reply once without computing the turn again."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    real_take = runtime.outbox.take
    outages = [RuntimeError("injected: DynamoDB unreachable")] * MAX_RECEIVE_COUNT

    async def take_unless_down(*args: Any, **kwargs: Any) -> Any:
        if outages:
            raise outages.pop()
        return await real_take(*args, **kwargs)

    monkeypatch.setattr(runtime.outbox, "take", take_unless_down)

    for _ in range(MAX_RECEIVE_COUNT):
        assert len(drain(stack)[0]["batchItemFailures"]) == 1
    assert drain(stack) == []  # moved to the dead-letter queue on the next receive
    sqs = stack.client("sqs")
    (dead,) = sqs.receive_message(
        QueueUrl=stack.dead_letter_queue_url, AttributeNames=["All"], MaxNumberOfMessages=10
    )["Messages"]
    assert len(agent_replies(runtime)) == 1 and platforms.replies() == []
    calls = llm.calls

    # The operator redrives it once DynamoDB is back.
    sqs.send_message(
        QueueUrl=stack.queue_url,
        MessageBody=dead["Body"],
        MessageGroupId=dead["Attributes"]["MessageGroupId"],
        MessageDeduplicationId="redrive-" + dead["Attributes"]["MessageDeduplicationId"][:50],
    )
    sqs.delete_message(QueueUrl=stack.dead_letter_queue_url, ReceiptHandle=dead["ReceiptHandle"])
    assert drain(stack) == [{"batchItemFailures": []}]

    assert llm.calls == calls  # the turn was not computed again
    assert_one_turn_one_reply(runtime, platforms)
    assert queue_depth(stack) == 0


# -- undeliverable replies and concurrent deliveries ----------------------------------------------


def session_events(session_id: str) -> list[dict[str, Any]]:
    """The session's events as a management API client reads them."""
    response = invoke_management(
        http_event("GET", f"/sessions/{session_id}/events", headers={"x-api-key": API_KEY})
    )
    assert response["statusCode"] == 200, response
    events: list[dict[str, Any]] = json.loads(response["body"])["events"]
    return events


def emitted_metrics(output: str) -> list[dict[str, Any]]:
    """The EMF documents Powertools Metrics printed (CloudWatch turns them into metrics)."""
    documents = [json.loads(line) for line in output.splitlines() if line.startswith('{"_aws"')]
    return [d for d in documents if "_aws" in d]


def test_an_undeliverable_reply_is_marked_failed_after_5_tries_and_the_session_moves_on(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Telegram answers 503 to every send of one reply. It used to fail the record until the
    dead-letter queue (~15 min of a blocked session, then silence); now the fifth failed attempt
    (two per invocation) marks it FAILED, records it in the session and acknowledges the
    record."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    platforms.fail_next(MAX_DELIVERY_ATTEMPTS, status=503)
    invocations = -(-MAX_DELIVERY_ATTEMPTS // SENDS_PER_INVOCATION)  # ceil

    for _ in range(invocations - 1):
        assert len(drain(stack)[0]["batchItemFailures"]) == 1
    capsys.readouterr()
    assert drain(stack) == [{"batchItemFailures": []}]  # given up: acknowledged
    assert queue_depth(stack) == 0
    # The alarmed metric (template.yaml: DeliveryFailedAlarm), with the dimension it watches.
    (alarmed,) = [m for m in emitted_metrics(capsys.readouterr().out) if "DeliveriesFailed" in m]
    assert (alarmed["DeliveriesFailed"], alarmed["service"]) == ([1.0], SERVICE)

    (failed_turn,) = [e.turn_id for e in session(runtime).events if e.source is EventSource.AGENT]
    entry = runtime.run(runtime.outbox.get(SESSION, failed_turn or ""))
    assert entry is not None
    assert (entry.status, entry.attempts) == (OutboxStatus.FAILED, MAX_DELIVERY_ATTEMPTS)
    assert platforms.replies() == []

    # The customer writes again: the session's queue is not blocked, the new message is answered.
    say("are you there?", 2)
    assert drain(stack) == [{"batchItemFailures": []}]
    replies = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert len(replies) == 2
    assert [r.json()["text"] for r in platforms.replies()] == [replies[1].text]

    # The failure is visible to operators and clients, once, through the management API.
    statuses = [e for e in session_events(SESSION) if e["kind"] == "status"]
    assert [(e["data"]["status"], e["data"]["turn_id"]) for e in statuses] == [
        ("delivery_failed", failed_turn)
    ]
    assert statuses[0]["data"]["attempts"] == MAX_DELIVERY_ATTEMPTS
    assert "503" in statuses[0]["data"]["error"]


def test_two_concurrent_deliveries_of_one_turn_send_it_once(
    runtime: Runtime,
    second_worker: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    llm: CountingLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workers hold the same turn (a redelivery while the first is still sending): the
    first takes the outbox lease and sends; the second finds the lease live, waits, sees SENT
    and sends nothing."""
    llm.crashes = 0  # type: ignore[attr-defined]
    say("hi", 1)
    records = records_from_queue(receive_all(stack))
    second_saw_the_lease, first_is_sending = threading.Event(), threading.Event()
    telegram = runtime.channels["telegram"]
    real_send = telegram.send

    async def slow_send(reply: Any, http: Any) -> Any:
        first_is_sending.set()
        assert second_saw_the_lease.wait(timeout=30)
        return await real_send(reply, http)

    monkeypatch.setattr(telegram, "send", slow_send)
    real_take = second_worker.outbox.take

    async def watched_take(*args: Any, **kwargs: Any) -> Lease:
        lease = await real_take(*args, **kwargs)
        if lease.outcome is LeaseOutcome.BUSY:
            second_saw_the_lease.set()
        return lease

    monkeypatch.setattr(second_worker.outbox, "take", watched_take)
    thread, errors = _first_worker_in_a_thread(runtime, records)
    assert first_is_sending.wait(timeout=30), errors
    second_worker.run(TurnWorker(second_worker, {}).answer(_burst(records)))
    thread.join(timeout=30)

    assert errors == [] and second_saw_the_lease.is_set()
    assert_one_turn_one_reply(runtime, platforms)
    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and (entry.status, entry.attempts) == (OutboxStatus.SENT, 1)
