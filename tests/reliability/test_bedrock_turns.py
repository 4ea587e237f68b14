"""An agent on Amazon Bedrock, end to end on the local stack: Telegram webhook → SQS → worker →
`TurnEngine` → the real `BedrockSchematicLLM` and `BedrockEmbedder` on real boto3
`bedrock-runtime` clients → a fake Bedrock on the wire (`tests.fakes.bedrock_runtime`) that
answers each forced tool call like the offline model, unless told to throttle or misbehave.

The banking agent is published with Titan embeddings in S3 and its calls routed to a Claude model
id; whatever Bedrock does — throttling, a model not ready, a malformed tool input, text instead of
the tool — the turn retries or repairs within its budget, and when that is not enough commits a
clear fallback reply: the customer's message is kept, exactly one reply goes out, the next turn
works, and the record is never dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.agent_config import LLMPurpose
from engine.own_lines import FALLBACK_REPLY
from engine.sessions.session import EventKind, EventSource, SessionState
from examples.banking import load as load_bank
from infra.channels.registry import build_channels
from infra.llm.bedrock_embedder import BedrockEmbedder
from infra.llm.bedrock_llm import BedrockSchematicLLM
from infra.offline import OfflineLLM
from infra.runtime import Runtime, install_runtime, reset_runtime
from infra.runtime_settings import MODEL_RATE_LIMIT_ENV, RuntimeSettings
from infra.turn_queue import session_id_for
from tests.channels.signed import PUBLIC_BASE_URL, channel_secrets
from tests.fakes.bedrock_runtime import (
    Behavior,
    ConverseRequest,
    FakeBedrockRuntime,
    TextAnswer,
    ToolAnswer,
    model_not_ready,
    throttled,
)
from tests.functions.conftest import drain, load_session, queue_depth, telegram_says
from tests.functions.platforms import BASE_URLS, FakePlatforms, resolve_to_public
from tests.reliability.faults import (
    SCHEMAS,
    OfflineBackedOpenAIServer,
    RecordedBackoff,
    record_llm_backoff,
)

CHAT = 5151
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
NOVA = "amazon.nova-micro-v1:0"


def answer_like_the_offline_model(request: ConverseRequest) -> Behavior:
    """The forced tool's input, as the offline model answers the same prompt and schema.
    Runs in botocore's worker thread, which has no event loop of its own."""
    schema = SCHEMAS[request.tool]
    generation = asyncio.run(OfflineLLM().generate(request.prompt, schema, model=request.model_id))
    return ToolAnswer(generation.value.model_dump(mode="json"))


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBedrockRuntime]:
    monkeypatch.setenv("WAYPOINT_BEDROCK_REGION", "us-east-1")
    # A VPC endpoint's URL, not an AWS host: moto's in-process mock would claim those.
    monkeypatch.setenv("WAYPOINT_BEDROCK_ENDPOINT_URL", "https://vpce-0a1b2c.bedrock-runtime.test")
    with FakeBedrockRuntime() as fake:
        fake.answer_with(answer_like_the_offline_model)
        yield fake


def install(
    bedrock: FakeBedrockRuntime, platforms: FakePlatforms, config: dict[str, Any], **parts: Any
) -> Runtime:
    """A runtime on the local stack with the fake platforms (`parts` replace what it would build
    from the environment), the bank published with `config` over its own."""
    installed = install_runtime(
        Runtime(
            dataclasses.replace(RuntimeSettings.from_env()),
            channels=build_channels(
                channel_secrets(),
                base_urls=BASE_URLS,
                public_base_url=PUBLIC_BASE_URL,
                callback_hosts=("client.test",),
                callback_resolver=resolve_to_public,
            ),
            http=httpx.AsyncClient(transport=platforms.transport()),
            **parts,
        )
    )
    bank = load_bank()
    routed = bank.model_copy(update={"config": bank.config.model_copy(update=config)})
    published = installed.run(installed.publish_agent(routed))
    assert published.embedded and bedrock.invoke_requests  # Titan vectors, in S3
    return installed


@pytest.fixture
def runtime(stack: Any, platforms: FakePlatforms, bedrock: FakeBedrockRuntime) -> Iterator[Runtime]:
    """Overrides the shared `runtime`: the Bedrock adapters (their clients built from the shared
    boto3 session, as a deployment builds them), the bank published with Titan vectors and its
    calls routed to Claude on Bedrock."""
    yield install(
        bedrock,
        platforms,
        {"default_model": HAIKU},
        llm=BedrockSchematicLLM(timeout=5.0),
        embedder=BedrockEmbedder(dimensions=256),
    )
    reset_runtime()
    asyncio.set_event_loop(None)


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


def trace_of(runtime: Runtime, turn_id: str | None) -> dict[str, Any]:
    trace = runtime.run(runtime.sessions.trace(SESSION, turn_id or ""))
    assert trace is not None
    return trace


def test_an_agent_answers_through_bedrock_with_titan_vectors(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, bedrock: FakeBedrockRuntime
) -> None:
    embedded_at_publish = len(bedrock.invoke_requests)
    say("hi, what is the price of AAPL?", 1)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert reply.text and reply.text != FALLBACK_REPLY and not reply.data.get("fallback")
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
    trace = trace_of(runtime, reply.turn_id)
    assert trace["llm_calls"] and all(call["error"] is None for call in trace["llm_calls"])
    assert {call["model"] for call in trace["llm_calls"]} == {HAIKU}
    assert {r.model_id for r in bedrock.converse_requests} == {HAIKU}
    assert all(r.tool_choice == {"tool": {"name": r.tool}} for r in bedrock.converse_requests)
    assert len(bedrock.invoke_requests) > embedded_at_publish  # the turn's query, by Titan


def test_throttling_is_retried_within_the_turn_and_the_turn_answers_normally(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    bedrock: FakeBedrockRuntime,
    backoff: RecordedBackoff,
) -> None:
    bedrock.queue(throttled(), model_not_ready())
    say("hi", 1)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert reply.text != FALLBACK_REPLY and not reply.data.get("fallback")
    trace = trace_of(runtime, reply.turn_id)
    assert all(call["error"] is None for call in trace["llm_calls"])
    assert sum(call["attempts"] - 1 for call in trace["llm_calls"]) == 2 == len(backoff.delays)
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]


def test_a_malformed_tool_answer_is_repaired_by_one_more_request(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, bedrock: FakeBedrockRuntime
) -> None:
    bedrock.queue(ToolAnswer({"not": "the schema"}))
    say("hi", 1)

    assert drain(stack) == [{"batchItemFailures": []}]

    (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
    assert reply.text != FALLBACK_REPLY
    repaired = [r for r in bedrock.converse_requests if "could not be used" in r.prompt]
    assert len(repaired) == 1
    assert len(platforms.replies()) == 1


OUTAGES = {
    "throttled throughout": throttled,
    "text instead of the tool": lambda: TextAnswer("Sure! Happy to help with that."),
}


@pytest.fixture
def fallback_when_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the runtime is built: a rate-limited turn answers with the fallback reply (the
    deployment's `ModelRateLimit: fallback`; the default defers it)."""
    monkeypatch.setenv(MODEL_RATE_LIMIT_ENV, "fallback")


def test_bedrock_throttling_throughout_defers_the_turn_by_default(
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    bedrock: FakeBedrockRuntime,
    backoff: RecordedBackoff,
) -> None:
    """A ThrottlingException is the rate limit `ModelRateLimit: defer` waits out: the record
    goes back to the queue, nothing is committed or sent, and the turn is answered once the
    model has room again."""
    bedrock.answer_with(lambda request: throttled())
    say("hi, what is the price of AAPL?", 1)

    ((failed,),) = [response["batchItemFailures"] for response in drain(stack)]
    assert failed["itemIdentifier"]
    assert platforms.replies() == []
    state = session(runtime)
    assert texts(state, EventSource.CUSTOMER) == [] and texts(state, EventSource.AGENT) == []

    bedrock.answer_with(answer_like_the_offline_model)  # the model has room again
    assert drain(stack) == [{"batchItemFailures": []}]
    state = session(runtime)
    assert texts(state, EventSource.CUSTOMER) == ["hi, what is the price of AAPL?"]
    (reply,) = texts(state, EventSource.AGENT)
    assert reply != FALLBACK_REPLY
    assert [r.json()["text"] for r in platforms.replies()] == [reply]
    assert queue_depth(stack) == 0


@pytest.mark.parametrize("outage", OUTAGES.values(), ids=OUTAGES.keys())
def test_a_bedrock_outage_gives_a_fallback_reply_keeps_the_message_and_the_next_turn_works(
    outage: Any,
    fallback_when_rate_limited: None,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    bedrock: FakeBedrockRuntime,
    backoff: RecordedBackoff,
) -> None:
    bedrock.answer_with(lambda request: outage())
    say("hi, what is the price of AAPL?", 1)

    assert drain(stack) == [{"batchItemFailures": []}]  # answered, not dropped nor stuck

    state = session(runtime)
    assert texts(state, EventSource.CUSTOMER) == ["hi, what is the price of AAPL?"]
    (reply,) = [e for e in state.events if e.source is EventSource.AGENT]
    assert (reply.text, reply.data.get("fallback")) == (FALLBACK_REPLY, True)
    calls = trace_of(runtime, reply.turn_id)["llm_calls"]
    assert calls and all(call["error"] for call in calls)
    if outage is throttled:  # retried with backoff, within the turn's retry budget
        assert 0 < len(backoff.delays) <= 4  # AgentConfig.llm_retry_budget
    else:  # one repair attempt per call, no backoff
        assert all(call["attempts"] == 2 for call in calls) and backoff.delays == []
    assert [r.json()["text"] for r in platforms.replies()] == [FALLBACK_REPLY]

    bedrock.answer_with(answer_like_the_offline_model)
    say("what is the price of AAPL?", 2)

    assert drain(stack) == [{"batchItemFailures": []}]
    first, second = texts(session(runtime), EventSource.AGENT)
    assert first == FALLBACK_REPLY and second not in ("", FALLBACK_REPLY)
    assert [r.json()["text"] for r in platforms.replies()] == [first, second]
    assert queue_depth(stack) == 0


def test_each_purpose_goes_to_its_own_model_and_provider_as_deployed(
    monkeypatch: pytest.MonkeyPatch,
    stack: Any,
    platforms: FakePlatforms,
    bedrock: FakeBedrockRuntime,
) -> None:
    """Built from the environment as a deployment builds it: Bedrock the default provider, the
    replies composed by an OpenAI model (a fake OpenAI server answering like the offline model),
    guideline matching by a small Bedrock model, everything else by Claude on Bedrock."""
    with OfflineBackedOpenAIServer() as openai_server:
        monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "bedrock")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
        monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", "amazon.titan-embed-text-v2:0")
        monkeypatch.setenv("WAYPOINT_EMBEDDING_DIMENSIONS", "256")
        runtime = install(
            bedrock,
            platforms,
            {
                "default_model": HAIKU,
                "models": {
                    LLMPurpose.MATCH_GUIDELINES: f"bedrock:{NOVA}",
                    LLMPurpose.COMPOSE: "openai:gpt-4o-mini",
                },
            },
        )
        try:
            say("hi, what is the price of AAPL?", 1)
            assert drain(stack) == [{"batchItemFailures": []}]

            (reply,) = [e for e in session(runtime).events if e.source is EventSource.AGENT]
            assert reply.text and reply.text != FALLBACK_REPLY
            calls = trace_of(runtime, reply.turn_id)["llm_calls"]
            by_purpose = {(call["purpose"], call["model"]) for call in calls}
            assert ("match_guidelines", NOVA) in by_purpose
            assert ("compose", "gpt-4o-mini") in by_purpose
            assert all(
                model == HAIKU
                for purpose, model in by_purpose
                if purpose not in ("match_guidelines", "compose")
            )
            assert {r.model_id for r in bedrock.converse_requests} <= {NOVA, HAIKU}
            assert NOVA in {r.model_id for r in bedrock.converse_requests}
            assert openai_server.chat_requests  # the reply, composed by OpenAI
            assert {r.model for r in openai_server.chat_requests} == {"gpt-4o-mini"}
            assert [r.json()["text"] for r in platforms.replies()] == [reply.text]
        finally:
            reset_runtime()
            asyncio.set_event_loop(None)
