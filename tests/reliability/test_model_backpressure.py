"""Backpressure when the model is rate-limited, through the real worker: Telegram webhook → SQS
FIFO (moto) → `functions.worker.handler` → `TurnEngine` → the real `OpenAISchematicLLM` (the
`openai` client) → a local fake OpenAI server answering 429.

With `WAYPOINT_ON_MODEL_RATE_LIMIT=defer` (the default) a turn the model could not answer commits
nothing: its records fail with the back-off the worker sets (`ChangeMessageVisibility`: 2 s
doubling per receive, at most 60 s), other sessions go on, and once the model has room every
message is answered, once, in order. The customer sees the typing indicator on each attempt and
at most one "one moment" line per message, even when two workers hold the same record at once.

Time is the queue's: where SQS would wait out a record's back-off, the test makes the record
visible again itself (`back_off_elapses`) after checking what the worker set.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from engine.language.lines import line
from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import EventKind, EventSource, SessionState
from examples.banking import load as load_bank
from functions.worker import TurnWorker
from functions.worker_backpressure import (
    DEFER_CAP_SECONDS,
    Backpressure,
    TurnDeferred,
    visibility_backoff,
)
from functions.worker_bursts import plan_bursts
from infra.llm.openai_llm import OpenAISchematicLLM
from infra.runtime import Runtime
from infra.runtime_settings import RuntimeSettings
from infra.turn_queue import session_id_for
from tests.fakes.openai_server import rate_limited, server_error
from tests.functions.conftest import (
    build_runtime,
    drain,
    invoke_worker,
    load_session,
    queue_depth,
    receive_all,
    telegram_says,
)
from tests.functions.lambda_events import records_from_queue, sqs_event
from tests.functions.platforms import FakePlatforms
from tests.reliability.faults import (
    OfflineBackedOpenAIServer,
    RecordedBackoff,
    record_llm_backoff,
)

BOT = "700100200"  # the test bot token's id (tests/channels/signed.py)
CHATS = (5101, 5102, 5103)
ONE_MOMENT = line("one_moment", "en")
MAX_RECEIVE_COUNT = 8  # template.yaml's TurnQueue maxReceiveCount


def session_of(chat: int) -> str:
    return session_id_for("bank", "telegram", f"tg:{BOT}:{chat}")


@pytest.fixture(scope="module")
def model_server() -> Iterator[OfflineBackedOpenAIServer]:
    with OfflineBackedOpenAIServer() as server:
        yield server


@pytest.fixture
def llm(model_server: OfflineBackedOpenAIServer) -> Iterator[OpenAISchematicLLM]:
    """Overrides the shared `llm` fixture: the runtime talks to the fake server over HTTP."""
    model_server.reset()
    model_server.heal()
    yield OpenAISchematicLLM(api_key="sk-test", base_url=model_server.base_url, timeout=5.0)
    model_server.heal()
    model_server.reset()


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> RecordedBackoff:
    return record_llm_backoff(monkeypatch)  # the in-turn retries take no wall time


@pytest.fixture
def published(make_runtime: Callable[..., Runtime]) -> Callable[..., Runtime]:
    """`published(**settings)`: the worker's runtime with those settings, the bank published."""

    def make(**settings: Any) -> Runtime:
        runtime = make_runtime(**settings)
        runtime.run(runtime.publish_agent(load_bank()))
        return runtime

    return make


class VisibilityLog:
    """Every `ChangeMessageVisibility` the worker sends: (receipt, seconds). The worker never
    sets 0 (its shortest back-off is 2 s)."""

    def __init__(self, runtime: Runtime) -> None:
        self.calls: list[tuple[str, int]] = []
        runtime.sqs.meta.events.register(
            "provide-client-params.sqs.ChangeMessageVisibility", self._record
        )

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        seconds = int(params["VisibilityTimeout"])
        if seconds:  # 0: the test's own `back_off_elapses` (the client is shared)
            self.calls.append((params["ReceiptHandle"], seconds))

    def take(self) -> list[int]:
        seconds = [s for _, s in self.calls]
        self.calls.clear()
        return seconds


@dataclasses.dataclass
class Round:
    """One receive of everything visible and the worker's invocations on it."""

    received: list[dict[str, Any]]
    failed: set[str]

    def failed_sessions(self) -> set[str]:
        return {
            m["Attributes"]["MessageGroupId"]
            for m in self.received
            if m["MessageId"] in self.failed
        }


def deliver(stack: Any) -> Round:
    """The event source mapping: receive what is visible, invoke the worker on batches of 10,
    delete what succeeded. Failed records stay in flight with the visibility the worker set."""
    sqs = stack.client("sqs")
    received = receive_all(stack)
    failed: set[str] = set()
    for start in range(0, len(received), 10):
        batch = received[start : start + 10]
        response = invoke_worker(sqs_event(records_from_queue(batch)))
        failures = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        failed |= failures
        for message in batch:
            if message["MessageId"] not in failures:
                sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    return Round(received, failed)


def back_off_elapses(stack: Any, last: Round) -> None:
    """The records the worker gave back become visible: their back-off has elapsed."""
    sqs = stack.client("sqs")
    for message in last.received:
        if message["MessageId"] in last.failed:
            sqs.change_message_visibility(
                QueueUrl=stack.queue_url,
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=0,
            )


def chat_texts(platforms: FakePlatforms, chat: int) -> list[str]:
    return [
        r.json()["text"]
        for r in platforms.replies("telegram")
        if r.path.endswith("/sendMessage") and str(r.json().get("chat_id")) == str(chat)
    ]


def conversation(state: SessionState) -> list[tuple[str, str]]:
    return [
        (e.source.value, e.text or "")
        for e in state.events
        if e.kind is EventKind.MESSAGE and e.source in (EventSource.CUSTOMER, EventSource.AGENT)
    ]


def test_the_back_off_doubles_per_receive_honours_retry_after_and_is_capped() -> None:
    assert [visibility_backoff(n) for n in range(1, 9)] == [2, 4, 8, 16, 32, 60, 60, 60]
    assert visibility_backoff(1, retry_after=12.2) == 13
    assert visibility_backoff(2, retry_after=0.05) == 4
    assert visibility_backoff(1, retry_after=3600) == DEFER_CAP_SECONDS


def test_a_rate_limited_model_defers_turns_and_loses_or_reorders_nothing(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three customers write three messages each (one turn per message) while the model answers
    only 429: four rounds are deferred, then the quota frees up just after one session's turn was
    deferred — the other sessions in that batch are answered — and the last session is answered
    on the next round. Every message gets its reply, in order, and each customer one "one moment"
    line (sent when the wait reached 8 s: the third deferral's back-off)."""
    runtime = published(reply_per_message=True)
    visibility = VisibilityLog(runtime)
    model_server.outage = rate_limited(retry_after=0.05)
    for n in range(3):
        for i, chat in enumerate(CHATS):
            assert (
                telegram_says(chat, f"what is the price of AAPL? ({n + 1})", 100 * i + n + 1)[
                    "statusCode"
                ]
                == 200
            )
    sessions = {chat: session_of(chat) for chat in CHATS}
    before = {chat: load_session(runtime, sessions[chat]) for chat in CHATS}

    for expected_backoff in (2, 4, 8, 16):
        deferred = deliver(stack)
        assert len(deferred.received) == 9 and len(deferred.failed) == 9
        # Every record of every session, alike: the group unlocks with its first record.
        assert visibility.take() == [expected_backoff] * 9
        assert receive_all(stack) == []  # in flight: nothing overtakes, nothing is lost
        for chat in CHATS:  # the session exactly as before: no event, reply or state change
            assert load_session(runtime, sessions[chat]) == before[chat]
        back_off_elapses(stack, deferred)
    assert platforms.replies("telegram") and all(
        text == ONE_MOMENT for chat in CHATS for text in chat_texts(platforms, chat)
    )
    assert {chat: len(chat_texts(platforms, chat)) for chat in CHATS} == dict.fromkeys(CHATS, 1)
    assert len(platforms.typing("telegram")) >= 4 * len(CHATS)  # each attempt shows "typing…"

    real_defer = Backpressure.defer

    async def defer_then_quota_frees_up(self: Backpressure, *args: Any) -> TurnDeferred:
        deferred = await real_defer(self, *args)
        model_server.heal()
        return deferred

    monkeypatch.setattr(Backpressure, "defer", defer_then_quota_frees_up)
    partly = deliver(stack)
    (late,) = partly.failed_sessions()  # one session deferred; the others answered
    assert len(partly.failed) == 3 and visibility.take() == [32, 32, 32]
    back_off_elapses(stack, partly)
    last = deliver(stack)
    assert last.failed == set() and last.failed_sessions() == set()
    assert visibility.take() == []
    assert queue_depth(stack) == 0
    dead = stack.client("sqs").receive_message(QueueUrl=stack.dead_letter_queue_url)
    assert dead.get("Messages", []) == []

    for chat in CHATS:
        said = conversation(load_session(runtime, sessions[chat]))
        assert [source for source, _ in said] == ["customer", "agent"] * 3  # each answered in turn
        asked = [text for source, text in said if source == "customer"]
        assert asked == [f"what is the price of AAPL? ({n})" for n in (1, 2, 3)]
        answers = [text for source, text in said if source == "agent"]
        assert FALLBACK_REPLY not in answers
        assert chat_texts(platforms, chat) == [ONE_MOMENT, *answers]
    assert late in sessions.values()


def test_one_moment_is_sent_once_per_message_even_when_two_workers_hold_the_record(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    llm: OpenAISchematicLLM,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The record's visibility ran out while a worker held it: two workers run its deferred turn
    at once and both reach the "one moment" line together. One sends it; later deliveries, still
    rate-limited, send nothing more; the answer comes once the model has room."""
    runtime = published(one_moment_after_seconds=0)  # owed at the first deferral
    other = build_runtime(
        dataclasses.replace(RuntimeSettings.from_env(), one_moment_after_seconds=0), llm, platforms
    )
    chat = CHATS[0]
    model_server.outage = rate_limited(retry_after=0.05)
    assert telegram_says(chat, "hi, what is the price of AAPL?", 1)["statusCode"] == 200
    before = load_session(runtime, session_of(chat))
    records = records_from_queue(receive_all(stack))

    together = threading.Barrier(2, timeout=60)
    originals = {id(r): r.inbox.note_one_moment for r in (runtime, other)}
    for worker_runtime in (runtime, other):
        real_note = originals[id(worker_runtime)]

        async def note_together(*args: Any, _real: Any = real_note) -> bool:
            together.wait()  # both deliveries write at the same moment
            noted: bool = await _real(*args)
            return noted

        monkeypatch.setattr(worker_runtime.inbox, "note_one_moment", note_together)
    raised: list[BaseException] = []

    def work(worker_runtime: Runtime) -> None:
        worker = TurnWorker(worker_runtime, plan_bursts(records, per_message=False))
        try:
            worker.handle_record(SQSRecord(records[0]))
        except BaseException as exc:  # surfaced below
            raised.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in (runtime, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    other.close()

    assert [type(e) for e in raised] == [TurnDeferred, TurnDeferred]
    assert chat_texts(platforms, chat) == [ONE_MOMENT]
    assert load_session(runtime, session_of(chat)) == before
    monkeypatch.setattr(runtime.inbox, "note_one_moment", originals[id(runtime)])

    sqs = stack.client("sqs")  # the back-off elapses (the direct calls above set none)
    sqs.change_message_visibility(
        QueueUrl=stack.queue_url, ReceiptHandle=records[0]["receiptHandle"], VisibilityTimeout=0
    )
    again = deliver(stack)  # still rate-limited
    assert len(again.failed) == 1
    assert chat_texts(platforms, chat) == [ONE_MOMENT]
    assert backoff.delays  # retried within the turn first

    model_server.heal()
    back_off_elapses(stack, again)
    assert deliver(stack).failed == set()
    (answer,) = [
        t for s, t in conversation(load_session(runtime, session_of(chat))) if s == "agent"
    ]
    assert answer != FALLBACK_REPLY
    assert chat_texts(platforms, chat) == [ONE_MOMENT, answer]
    assert platforms.typing("telegram")


def test_a_message_rate_limited_on_every_receive_dead_letters_after_the_documented_span(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    """maxReceiveCount 8: the back-offs 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60 = 242 s
    (docs/capacity.md), then the dead-letter queue, alarmed; one "one moment" line, no reply."""
    runtime = published()
    visibility = VisibilityLog(runtime)
    model_server.outage = rate_limited(retry_after=0.05)
    chat = CHATS[1]
    assert telegram_says(chat, "what is the price of AAPL?", 7)["statusCode"] == 200
    before = load_session(runtime, session_of(chat))

    backoffs: list[int] = []
    for _ in range(MAX_RECEIVE_COUNT):
        deferred = deliver(stack)
        assert len(deferred.failed) == 1
        backoffs += visibility.take()
        back_off_elapses(stack, deferred)
    assert deliver(stack).received == []  # SQS moved it on the ninth receive

    assert backoffs == [2, 4, 8, 16, 32, 60, 60, 60] and sum(backoffs) == 242
    (dead,) = stack.client("sqs").receive_message(QueueUrl=stack.dead_letter_queue_url)["Messages"]
    assert "what is the price of AAPL?" in dead["Body"]
    assert load_session(runtime, session_of(chat)) == before
    assert chat_texts(platforms, chat) == [ONE_MOMENT]


def test_other_model_failures_still_answer_with_the_fallback_reply_when_deferring(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    runtime = published(one_moment_after_seconds=0)
    visibility = VisibilityLog(runtime)
    model_server.outage = server_error()
    chat = CHATS[2]
    assert telegram_says(chat, "what is the price of AAPL?", 9)["statusCode"] == 200

    assert drain(stack) == [{"batchItemFailures": []}]

    said = conversation(load_session(runtime, session_of(chat)))
    assert said == [("customer", "what is the price of AAPL?"), ("agent", FALLBACK_REPLY)]
    assert chat_texts(platforms, chat) == [FALLBACK_REPLY]  # no "one moment": not deferred
    assert visibility.take() == []


def test_with_the_fallback_setting_a_rate_limited_turn_answers_at_once_as_before(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    runtime = published(on_model_rate_limit="fallback", one_moment_after_seconds=0)
    visibility = VisibilityLog(runtime)
    model_server.outage = rate_limited(retry_after=0.05)
    chat = CHATS[0]
    assert telegram_says(chat, "what is the price of AAPL?", 11)["statusCode"] == 200

    assert drain(stack) == [{"batchItemFailures": []}]

    said = conversation(load_session(runtime, session_of(chat)))
    assert said == [("customer", "what is the price of AAPL?"), ("agent", FALLBACK_REPLY)]
    assert chat_texts(platforms, chat) == [FALLBACK_REPLY]
    assert visibility.take() == []
    assert 0 < len(backoff.delays) <= 4  # retried within the turn's budget, as before


def test_the_local_poller_leaves_a_deferred_turn_its_back_off(
    published: Callable[..., Runtime],
    stack: Any,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    """`waypoint serve`'s stand-in for the event source mapping retries failed records after 1 s;
    a deferred turn keeps the back-off the worker set (a local model over its quota is not asked
    again every second)."""
    from waypoint.queue_poller import QueuePoller

    runtime = published()
    visibility = VisibilityLog(runtime)
    model_server.outage = rate_limited(retry_after=0.05)
    assert telegram_says(CHATS[0], "hi", 21)["statusCode"] == 200

    poller = QueuePoller(stack.client("sqs"), stack.queue_url)
    assert poller.poll_once() == 1

    assert poller.failed_records == 1
    assert visibility.take() == [2]  # the worker's back-off, and not the poller's 1 s after it
    assert receive_all(stack) == []


def test_a_one_moment_line_the_platform_refused_is_not_sent_again(
    published: Callable[..., Runtime],
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    """At most once: the line's send failing does not fail the deferral, and no later delivery
    tries it again; the answer still comes once the model has room."""
    runtime = published(one_moment_after_seconds=0)
    model_server.outage = rate_limited(retry_after=0.05)
    chat = CHATS[1]
    assert telegram_says(chat, "what is the price of AAPL?", 31)["statusCode"] == 200
    platforms.fail_next(1, status=503)  # the next message to a customer: the line

    for _ in range(2):
        deferred = deliver(stack)
        assert len(deferred.failed) == 1
        back_off_elapses(stack, deferred)
    model_server.heal()
    assert deliver(stack).failed == set()

    tried = [
        r.json()["text"] for r in platforms.replies("telegram", delivered=False) if r.status >= 400
    ]
    assert tried == [ONE_MOMENT]
    (answer,) = [
        t for s, t in conversation(load_session(runtime, session_of(chat))) if s == "agent"
    ]
    assert chat_texts(platforms, chat) == [answer] and answer != FALLBACK_REPLY
