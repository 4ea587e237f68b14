"""LLM faults through the whole path: Telegram webhook → SQS → worker → `TurnEngine` → the real
`OpenAISchematicLLM` (the `openai` client) → a local fake OpenAI server that answers like the
offline model unless told to fail.

Whatever the model does — 429, 500, hangs past the client timeout, malformed JSON, JSON of the
wrong shape — the turn retries within its budget, then commits a clear fallback reply; the
customer's message is kept in the session, exactly one reply goes out, and the next turn works.

A 429 does that with `WAYPOINT_ON_MODEL_RATE_LIMIT=fallback`, which this module sets; with the
default, `defer`, the turn is answered later instead (tests/reliability/test_model_backpressure.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import EventKind, EventSource, SessionState
from infra.llm.openai_llm import OpenAISchematicLLM
from infra.outbox import OutboxStatus
from infra.runtime import Runtime
from infra.runtime_settings import MODEL_RATE_LIMIT_ENV
from infra.turn_queue import session_id_for
from tests.fakes.openai_server import (
    Behavior,
    Hang,
    Reply,
    malformed_json,
    rate_limited,
    server_error,
)
from tests.functions.conftest import drain, load_session, queue_depth, telegram_says
from tests.functions.platforms import FakePlatforms
from tests.reliability.faults import (
    OfflineBackedOpenAIServer,
    RecordedBackoff,
    record_llm_backoff,
)

CHAT = 4242
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
# Seconds per request: short, so a hanging server costs little test time, yet far above an answer
# on a loaded machine — at 0.4 s, four workers on two cores timed a schema-invalid answer out
# (a transient retry where the test expects a repair; seen once in CI).
CLIENT_TIMEOUT = 1.5

OUTAGES: dict[str, Callable[[], Behavior]] = {
    "429-rate-limited": lambda: rate_limited(retry_after=0.05),
    "500-server-error": server_error,
    "timeout": lambda: Hang(seconds=5.0),
    "malformed-json": malformed_json,
    "schema-invalid-answer": lambda: Reply({"answer": "yes", "confidence": "very"}),
}


@pytest.fixture(autouse=True)
def fallback_when_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the runtime is built: a rate-limited turn answers with the fallback reply."""
    monkeypatch.setenv(MODEL_RATE_LIMIT_ENV, "fallback")


@pytest.fixture(scope="module")
def model_server() -> Iterator[OfflineBackedOpenAIServer]:
    with OfflineBackedOpenAIServer() as server:
        yield server


@pytest.fixture
def llm(model_server: OfflineBackedOpenAIServer) -> Iterator[OpenAISchematicLLM]:
    """Overrides the shared `llm` fixture: the runtime talks to the fake server over HTTP."""
    model_server.reset()
    model_server.heal()
    yield OpenAISchematicLLM(
        api_key="sk-test", base_url=model_server.base_url, timeout=CLIENT_TIMEOUT
    )
    model_server.heal()
    model_server.reset()  # releases handlers still hanging after a client timeout


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> RecordedBackoff:
    return record_llm_backoff(monkeypatch)


def say(text: str, update_id: int) -> None:
    assert telegram_says(CHAT, text, update_id)["statusCode"] == 200


def session(runtime: Runtime) -> SessionState:
    return load_session(runtime, SESSION)


def texts(state: SessionState, source: EventSource) -> list[str]:
    return [
        e.text or "" for e in state.events if e.kind is EventKind.MESSAGE and e.source is source
    ]


@pytest.mark.parametrize("fault", list(OUTAGES))
def test_a_model_outage_gives_a_fallback_reply_keeps_the_message_and_the_next_turn_works(
    fault: str,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
) -> None:
    model_server.outage = OUTAGES[fault]()
    say("hi, what is the price of AAPL?", 1)

    assert drain(stack) == [{"batchItemFailures": []}]  # the turn completed despite the outage

    state = session(runtime)
    assert texts(state, EventSource.CUSTOMER) == ["hi, what is the price of AAPL?"]
    (reply,) = [e for e in state.events if e.source is EventSource.AGENT]
    assert (reply.text, reply.data.get("fallback")) == (FALLBACK_REPLY, True)
    trace = runtime.run(runtime.sessions.trace(SESSION, reply.turn_id or ""))
    assert trace is not None
    assert any("composition failed" in note for note in trace["notes"])
    calls = trace["llm_calls"]
    assert calls and all(call["error"] for call in calls)
    transient = fault in ("429-rate-limited", "500-server-error", "timeout")
    if transient:  # retried with backoff, within the turn's retry budget
        assert sum(call["attempts"] - 1 for call in calls) == len(backoff.delays) > 0
        assert len(backoff.delays) <= 4  # AgentConfig.llm_retry_budget
    else:  # one repair attempt per call, no backoff
        assert all(call["attempts"] == 2 for call in calls)
        assert backoff.delays == []
    if fault == "429-rate-limited":
        assert set(backoff.delays) == {0.05}  # the server's Retry-After was honored
    assert model_server.faults_served >= len(calls)
    assert [r.json()["text"] for r in platforms.replies()] == [FALLBACK_REPLY]
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None and entry.status is OutboxStatus.SENT

    model_server.heal()
    say("what is the price of AAPL?", 2)

    assert drain(stack) == [{"batchItemFailures": []}]
    state = session(runtime)
    assert texts(state, EventSource.CUSTOMER) == [
        "hi, what is the price of AAPL?",
        "what is the price of AAPL?",
    ]
    first, second = texts(state, EventSource.AGENT)
    assert first == FALLBACK_REPLY and second not in ("", FALLBACK_REPLY)
    assert [r.json()["text"] for r in platforms.replies()] == [first, second]
    assert queue_depth(stack) == 0


# Two failures in a row, the most one call absorbs before its third and last attempt: the turn's
# guideline checks are one packed call, so every failure below lands on the same request.
TRANSIENT_PAIRS = {
    "rate-limited, then a 5xx": lambda: (rate_limited(retry_after=0.05), server_error()),
    "a 5xx, then a hang": lambda: (server_error(), Hang(seconds=5.0)),
    "a hang, then rate-limited": lambda: (Hang(seconds=5.0), rate_limited(retry_after=0.05)),
}


@pytest.mark.parametrize("failures", TRANSIENT_PAIRS.values(), ids=TRANSIENT_PAIRS.keys())
def test_transient_errors_are_retried_and_the_turn_answers_normally(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
    backoff: RecordedBackoff,
    failures: Any,
) -> None:
    model_server.fail_next(*failures())
    say("hi", 1)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert reply.text != FALLBACK_REPLY and not reply.data.get("fallback")
    trace = runtime.run(runtime.sessions.trace(SESSION, reply.turn_id or ""))
    assert trace is not None
    assert all(call["error"] is None for call in trace["llm_calls"])
    assert sum(call["attempts"] - 1 for call in trace["llm_calls"]) == 2 == len(backoff.delays)
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]


def test_a_malformed_answer_is_repaired_by_one_more_request(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    model_server: OfflineBackedOpenAIServer,
) -> None:
    model_server.fail_next(malformed_json())
    say("hi", 1)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert reply.text != FALLBACK_REPLY
    repaired = [r for r in model_server.chat_requests if "could not be used" in r.prompt]
    assert len(repaired) == 1
    assert len(platforms.replies()) == 1
