"""The OpenAI adapters through the real `openai` client against a local fake server, wrapped in
`engine.llm.TurnLLM` exactly as the engine uses them (routing, budget, retries, repair, trace)."""

from __future__ import annotations

import asyncio
import base64
import gc
import socket
import subprocess
import sys
import uuid
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel, Field

from engine.agent_config import AgentConfig, LLMPurpose, TurnBudget
from engine.errors import (
    LLMBudgetExceeded,
    LLMError,
    LLMOutputInvalid,
    LLMTransientError,
)
from engine.llm import RetryPolicy, TurnLLM
from engine.pricing import ModelPrice
from engine.trace import TurnTrace
from infra.llm.openai_embedder import OpenAIEmbedder, decoded_vector
from infra.llm.openai_llm import OpenAISchematicLLM
from infra.llm.vector_size import normalize
from tests.fakes.openai_server import (
    Fail,
    FakeOpenAIServer,
    Hang,
    Reply,
    fake_embedding,
    malformed_json,
    rate_limited,
    server_error,
)

REPO = Path(__file__).resolve().parents[2]
MATCH = LLMPurpose.MATCH_GUIDELINES


class Verdict(BaseModel):
    """A small schema shaped like the engine's matching answers."""

    applies: bool
    score: int = Field(ge=0, le=10, description="how strongly the condition holds")
    rationale: str = ""


VALID = {"applies": True, "score": 8, "rationale": "the customer asked"}


class RecordingSleep:
    """Stands in for asyncio.sleep in TurnLLM: no real backoff waits, delays are recorded."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture(scope="module")
def running_server():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def server(running_server: FakeOpenAIServer):
    running_server.reset()
    yield running_server
    running_server.reset()  # releases handlers still hanging after a client timeout


@pytest.fixture
def llm(server: FakeOpenAIServer) -> OpenAISchematicLLM:
    return OpenAISchematicLLM(api_key="sk-test", base_url=server.base_url, timeout=2.0)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def new_trace() -> TurnTrace:
    return TurnTrace(turn_id="t1", session_id="s1", agent_id="a1", agent_version="v1")


def turn_llm(
    adapter: OpenAISchematicLLM,
    sleep: RecordingSleep,
    config: AgentConfig | None = None,
    *,
    max_attempts: int = 3,
) -> tuple[TurnLLM, TurnTrace]:
    trace = new_trace()
    policy = RetryPolicy(max_attempts=max_attempts)
    return TurnLLM(adapter, config or AgentConfig(), trace, retry=policy, sleep=sleep), trace


# -- success, routing, request shape -------------------------------------------------------------


async def test_success_records_tokens_model_latency_and_purpose_in_the_trace(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(
        Reply(VALID, prompt_tokens=120, completion_tokens=30, model="gpt-4o-mini-2024-07-18")
    )
    turn, trace = turn_llm(llm, sleep)

    generation = await turn.generate(
        MATCH, "Does the guideline apply?", Verdict, label="actionable"
    )

    assert generation.value == Verdict(**VALID)
    assert (generation.usage.prompt_tokens, generation.usage.completion_tokens) == (120, 30)
    [record] = trace.llm_calls
    assert record.purpose == "match_guidelines"
    assert record.schema_name == "Verdict"
    assert record.label == "actionable"
    assert record.model == "gpt-4o-mini-2024-07-18"  # what the server says it ran
    assert (record.prompt_tokens, record.completion_tokens) == (120, 30)
    assert record.latency_ms > 0
    assert record.attempts == 1 and record.error is None
    assert generation.latency_ms > 0


async def test_cached_prompt_tokens_are_read_from_the_usage_and_priced_as_cached(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(
        Reply(VALID, prompt_tokens=2_000, completion_tokens=100, cached_tokens=1_536),
        Reply(VALID, prompt_tokens=2_000, completion_tokens=100),  # no prompt_tokens_details
    )
    config = AgentConfig(
        default_model="gpt-priced",
        prices={"gpt-priced": ModelPrice(input=1.0, cached_input=0.25, output=4.0)},
    )
    turn, trace = turn_llm(llm, sleep, config=config)

    cached = await turn.generate(MATCH, "Does the guideline apply?", Verdict)
    uncached = await turn.generate(MATCH, "Does the guideline apply?", Verdict)

    assert cached.usage.cached_prompt_tokens == 1_536
    assert uncached.usage.cached_prompt_tokens == 0
    first, second = trace.llm_calls
    assert first.cached_prompt_tokens == 1_536
    # 464 uncached at $1, 1,536 cached at $0.25, 100 completion at $4 per 1M tokens
    assert first.cost_usd == pytest.approx((464 * 1.0 + 1_536 * 0.25 + 100 * 4.0) / 1e6)
    assert second.cost_usd == pytest.approx((2_000 * 1.0 + 100 * 4.0) / 1e6)
    assert trace.cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert trace.cached_prompt_tokens == 1_536


async def test_a_model_without_a_price_leaves_the_cost_unknown_not_zero(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(Reply(VALID, prompt_tokens=500, completion_tokens=20))
    turn, trace = turn_llm(llm, sleep, config=AgentConfig(default_model="my-own-finetune"))

    await turn.generate(MATCH, "Does the guideline apply?", Verdict)

    assert trace.llm_calls[0].cost_usd is None
    assert trace.cost_usd is None


async def test_request_asks_for_strict_json_schema_and_routes_the_model_per_purpose(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    config = AgentConfig(
        models={LLMPurpose.SELECT_JOURNEY_NODE: "gpt-journeys"}, default_model="gpt-default"
    )
    server.queue_chat(Reply(VALID), Reply(VALID))
    turn, _ = turn_llm(llm, sleep, config)

    await turn.generate(LLMPurpose.SELECT_JOURNEY_NODE, "Which step next?", Verdict)
    await turn.generate(MATCH, "Does it apply?", Verdict)

    routed, default = server.chat_requests
    assert (routed.model, default.model) == ("gpt-journeys", "gpt-default")
    assert routed.prompt == "Which step next?"
    assert routed.headers["authorization"] == "Bearer sk-test"
    response_format = routed.response_format
    assert response_format["type"] == "json_schema"
    json_schema = response_format["json_schema"]
    assert (json_schema["name"], json_schema["strict"]) == ("Verdict", True)
    schema = json_schema["schema"]
    assert schema["required"] == ["applies", "score", "rationale"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["rationale"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


async def test_the_request_is_the_one_the_clients_chat_completions_resource_sends(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM
) -> None:
    """The adapter posts through the client (`client.post`) rather than its
    `chat.completions` resource, whose modules it does not import: the same path, body and
    headers, and the same answer read from it."""
    from openai import AsyncOpenAI

    from infra.llm.openai_llm import json_schema_format

    server.queue_chat(
        Reply(VALID, prompt_tokens=50, completion_tokens=9, cached_tokens=20, model="gpt-x"),
        Reply(VALID, prompt_tokens=50, completion_tokens=9, cached_tokens=20, model="gpt-x"),
    )
    generation = await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")
    client = AsyncOpenAI(api_key="sk-test", base_url=server.base_url, timeout=2.0, max_retries=0)
    try:
        resource = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Does it apply?"}],
            response_format=json_schema_format(Verdict),  # type: ignore[arg-type]
        )
    finally:
        await client.close()

    ours, theirs = server.chat_requests
    assert (ours.path, ours.body, ours.headers) == (theirs.path, theirs.body, theirs.headers)
    assert generation.value == Verdict.model_validate_json(resource.choices[0].message.content)
    assert generation.model == resource.model == "gpt-x"
    usage = resource.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert (
        generation.usage.prompt_tokens,
        generation.usage.completion_tokens,
        generation.usage.cached_prompt_tokens,
    ) == (usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_details.cached_tokens)


async def test_a_null_for_a_defaulted_field_means_its_default(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM
) -> None:
    server.queue_chat(Reply({"applies": False, "score": 0, "rationale": None}))

    generation = await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")

    assert generation.value == Verdict(applies=False, score=0, rationale="")


# -- transient failures and retries -------------------------------------------------------------


async def test_rate_limit_is_retried_after_the_servers_retry_after(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(rate_limited(retry_after=1.5), Reply(VALID))
    turn, trace = turn_llm(llm, sleep)

    generation = await turn.generate(MATCH, "Does it apply?", Verdict)

    assert generation.attempts == 2
    assert trace.llm_calls[0].attempts == 2
    assert sleep.delays == [1.5]
    assert len(server.chat_requests) == 2


async def test_server_errors_are_retried_with_backoff_until_success(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(server_error(), server_error(), Reply(VALID))
    turn, trace = turn_llm(llm, sleep)

    generation = await turn.generate(MATCH, "Does it apply?", Verdict)

    assert generation.value == Verdict(**VALID)
    assert trace.llm_calls[0].attempts == 3
    assert len(sleep.delays) == 2 and all(d > 0 for d in sleep.delays)


async def test_timeouts_use_up_the_attempts_then_raise_a_transient_error(
    server: FakeOpenAIServer, sleep: RecordingSleep
) -> None:
    # 1 s: with 0.2 s a loaded machine was seen timing out before the request reached the server.
    impatient = OpenAISchematicLLM(api_key="sk-test", base_url=server.base_url, timeout=1.0)
    server.queue_chat(Hang(), Hang(), Hang())
    turn, trace = turn_llm(impatient, sleep, max_attempts=3)

    with pytest.raises(LLMTransientError, match="timed out"):
        await turn.generate(MATCH, "Does it apply?", Verdict)

    [record] = trace.llm_calls
    assert record.attempts == 3
    assert record.error is not None and record.error.startswith("LLMTransientError")
    assert len(sleep.delays) == 2
    assert len(server.chat_requests) == 3


async def test_the_retry_budget_is_shared_by_all_calls_of_a_turn(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    config = AgentConfig(llm_retry_budget=3)
    # First call spends two retries; the second may retry once more, then must give up.
    server.queue_chat(server_error(), server_error(), Reply(VALID), server_error(), server_error())
    turn, trace = turn_llm(llm, sleep, config, max_attempts=3)

    await turn.generate(MATCH, "first", Verdict)
    with pytest.raises(LLMTransientError):
        await turn.generate(MATCH, "second", Verdict)

    assert [c.attempts for c in trace.llm_calls] == [3, 2]
    assert len(sleep.delays) == 3
    assert len(server.chat_requests) == 5


async def test_an_unreachable_server_is_a_transient_error_naming_the_base_url(
    sleep: RecordingSleep,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    unreachable = OpenAISchematicLLM(api_key="sk-test", base_url=base_url, timeout=1.0)

    with pytest.raises(LLMTransientError, match=f"could not connect to {base_url}"):
        await unreachable.generate("Does it apply?", Verdict, model="gpt-4o-mini")


# -- final client errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "hint"),
    [(401, "OPENAI_API_KEY"), (404, "model name 'gpt-nope'"), (400, "OPENAI_BASE_URL")],
)
async def test_client_errors_are_final_and_say_what_to_check(
    server: FakeOpenAIServer,
    llm: OpenAISchematicLLM,
    sleep: RecordingSleep,
    status: int,
    hint: str,
) -> None:
    server.queue_chat(Fail(status, "nope"))
    turn, trace = turn_llm(llm, sleep, AgentConfig(default_model="gpt-nope"))

    with pytest.raises(LLMError, match=hint) as raised:
        await turn.generate(MATCH, "Does it apply?", Verdict)

    assert not isinstance(raised.value, LLMTransientError)
    assert trace.llm_calls[0].attempts == 1
    assert sleep.delays == []


# -- invalid output and the repair attempt ------------------------------------------------------


async def test_malformed_json_gets_one_repair_attempt_that_names_the_error(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.queue_chat(malformed_json(), Reply(VALID, prompt_tokens=50, completion_tokens=5))
    turn, trace = turn_llm(llm, sleep)

    generation = await turn.generate(MATCH, "Does it apply?", Verdict)

    assert generation.value == Verdict(**VALID)
    first, repair = server.chat_requests
    assert first.prompt == "Does it apply?"
    assert repair.prompt.startswith("Does it apply?")
    assert "not valid JSON" in repair.prompt
    assert trace.llm_calls[0].attempts == 2
    assert sleep.delays == []  # a repair is not a backoff retry


@pytest.mark.parametrize(
    "bad_answer",
    [
        Reply({"applies": "perhaps", "score": 99}),
        Reply(None, refusal="I can't help with that."),
        Reply('{"applies": true, "sc', finish_reason="length"),
    ],
    ids=["schema-invalid", "refusal", "truncated"],
)
async def test_invalid_output_twice_raises_output_invalid_with_the_raw_answer(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep, bad_answer: Reply
) -> None:
    server.queue_chat(malformed_json(), bad_answer)
    turn, trace = turn_llm(llm, sleep)

    with pytest.raises(LLMOutputInvalid) as raised:
        await turn.generate(MATCH, "Does it apply?", Verdict)

    assert raised.value.raw
    assert len(server.chat_requests) == 2
    assert trace.llm_calls[0].error is not None


async def test_schema_errors_are_described_by_field_for_the_repair(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM
) -> None:
    server.queue_chat(Reply({"applies": True, "score": 99}))

    with pytest.raises(
        LLMOutputInvalid, match=r"Verdict schema: score: .*less than or equal to 10"
    ):
        await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")


# -- structured outputs unsupported → JSON mode -------------------------------------------------


async def test_rejected_json_schema_falls_back_to_json_mode_and_remembers_it(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    server.reject_json_schema(model="legacy-model")
    server.queue_chat(Reply(VALID), Reply(VALID))
    turn, trace = turn_llm(llm, sleep, AgentConfig(default_model="legacy-model"))

    first = await turn.generate(MATCH, "Does it apply?", Verdict)
    second = await turn.generate(MATCH, "And now?", Verdict)

    assert first.value == second.value == Verdict(**VALID)
    formats = [r.response_format["type"] for r in server.chat_requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # rejected only once
    fallback = server.chat_requests[1]
    assert "Verdict" in fallback.message("system") and '"score"' in fallback.message("system")
    assert fallback.prompt == "Does it apply?"
    assert llm.uses_json_mode("legacy-model")  # for every schema
    assert [c.attempts for c in trace.llm_calls] == [1, 1]


async def test_a_rejected_schema_falls_back_alone_not_the_whole_model(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM
) -> None:
    class Other(BaseModel):
        ok: bool

    server.queue_chat(
        Fail(400, "Invalid schema for response_format 'Verdict': bad", param="response_format"),
        Reply(VALID),
        Reply({"ok": True}),
    )

    await llm.generate("Does it apply?", Verdict, model="gpt-4o-mini")
    await llm.generate("Ok?", Other, model="gpt-4o-mini")

    formats = [r.response_format["type"] for r in server.chat_requests]
    assert formats == ["json_schema", "json_object", "json_schema"]
    assert llm.uses_json_mode("gpt-4o-mini", Verdict)
    assert not llm.uses_json_mode("gpt-4o-mini", Other)


# -- budget and concurrency ---------------------------------------------------------------------


async def test_an_exhausted_budget_raises_before_any_request(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    config = AgentConfig(budget=TurnBudget(max_llm_calls=1))  # the one call is kept for composing
    turn, trace = turn_llm(llm, sleep, config)

    with pytest.raises(LLMBudgetExceeded):
        await turn.generate(MATCH, "Does it apply?", Verdict)

    assert server.requests == []
    assert trace.llm_calls == [] and trace.notes


async def test_parallel_calls_respect_the_concurrency_limit(
    server: FakeOpenAIServer, llm: OpenAISchematicLLM, sleep: RecordingSleep
) -> None:
    # A model name of its own: engine.llm keys its semaphores by (id(loop), model), and a loop id
    # can be reused by a later test's loop, which would inherit another test's limit.
    model = f"gpt-parallel-{uuid.uuid4().hex[:8]}"
    config = AgentConfig(max_concurrent_llm_calls=2, default_model=model)
    # Each answer takes 0.5 s, so the second call reaches the server while the first is still
    # answered even on a loaded machine (0.1 s was seen to let them run one after the other).
    server.queue_chat(*[Reply(VALID, delay=0.5) for _ in range(5)])
    turn, trace = turn_llm(llm, sleep, config)

    results = await asyncio.gather(*(turn.generate(MATCH, f"batch {i}", Verdict) for i in range(5)))

    assert len(results) == 5
    assert server.max_in_flight == 2
    assert len(trace.llm_calls) == 5


# -- client lifecycle ----------------------------------------------------------------------------


def test_one_adapter_serves_successive_event_loops_without_keeping_them(
    server: FakeOpenAIServer,
) -> None:
    """A Lambda worker runs each invocation in a fresh loop (asyncio.run): a pooled connection
    from a closed loop must not be reused ("Event loop is closed"), nor old loops kept alive."""
    adapter = OpenAISchematicLLM(api_key="sk-test", base_url=server.base_url, timeout=2.0)
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def invocation(close: bool) -> Verdict:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        generation = await adapter.generate("Does it apply?", Verdict, model="gpt-4o-mini")
        if close:
            await adapter.aclose()
        return generation.value

    server.queue_chat(*[Reply(VALID) for _ in range(4)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # unclosed sockets of dropped clients
        results = [asyncio.run(invocation(close=i == 3)) for i in range(4)]
        gc.collect()

    assert results == [Verdict(**VALID)] * 4
    assert [ref() is None for ref in loops] == [True, True, True, True]


def test_importing_the_adapters_does_not_import_openai() -> None:
    code = (
        "import sys\n"
        "import infra.llm, infra.llm.openai_llm, infra.llm.openai_embedder, infra.llm.factory\n"
        "from infra.llm import OpenAIEmbedder, OpenAISchematicLLM\n"
        "OpenAISchematicLLM(api_key='sk-test'); OpenAIEmbedder(api_key='sk-test')\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


# -- embeddings ---------------------------------------------------------------------------------


@pytest.fixture
def embedder(server: FakeOpenAIServer) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        model="text-embedding-3-small",
        api_key="sk-test",
        base_url=server.base_url,
        timeout=2.0,
        max_retries=0,
    )


async def test_embedder_batches_inputs_and_returns_unit_vectors_in_order(
    server: FakeOpenAIServer, embedder: OpenAIEmbedder
) -> None:
    texts = [f"text number {i}" for i in range(600)]

    vectors = await embedder.embed(texts)

    assert [len(r.body["input"]) for r in server.embedding_requests] == [256, 256, 88]
    assert vectors.shape == (600, FakeOpenAIServer.DEFAULT_EMBEDDING_DIMENSIONS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    expected = fake_embedding("text number 300", FakeOpenAIServer.DEFAULT_EMBEDDING_DIMENSIONS)
    np.testing.assert_allclose(vectors[300], expected / np.linalg.norm(expected), rtol=1e-5)
    assert embedder.dimensions == FakeOpenAIServer.DEFAULT_EMBEDDING_DIMENSIONS


async def test_embedder_asks_for_shortened_vectors_when_configured(
    server: FakeOpenAIServer,
) -> None:
    embedder = OpenAIEmbedder(
        dimensions=8, api_key="sk-test", base_url=server.base_url, max_retries=0
    )

    vectors = await embedder.embed(["refund policy", ""])

    assert vectors.shape == (2, 8)
    [request] = server.embedding_requests
    assert request.body["dimensions"] == 8
    assert request.body["input"] == ["refund policy", " "]  # the API rejects empty strings


async def test_the_embedders_request_and_vectors_are_the_embeddings_resources(
    server: FakeOpenAIServer,
) -> None:
    """Posted through the client, not its `embeddings` resource: the same request (base64
    asked for), and the same vectors as the resource decodes them."""
    from openai import AsyncOpenAI

    embedder = OpenAIEmbedder(
        dimensions=8, api_key="sk-test", base_url=server.base_url, max_retries=0
    )
    texts = ["refund policy", "opening hours", "card lost"]
    ours = await embedder.embed(texts)
    client = AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
    try:
        answer = await client.embeddings.create(model=embedder.model, input=texts, dimensions=8)
    finally:
        await client.close()

    mine, theirs = server.embedding_requests
    assert (mine.path, mine.body) == (theirs.path, theirs.body)
    assert list(mine.body) == list(theirs.body)  # the same fields in the same order
    assert mine.body["encoding_format"] == "base64"
    theirs_vectors = np.asarray(
        [item.embedding for item in sorted(answer.data, key=lambda item: item.index)],
        dtype=np.float32,
    )
    np.testing.assert_allclose(ours, normalize(theirs_vectors), rtol=1e-6)


def test_an_embedding_sent_as_a_list_of_numbers_reads_as_its_base64_twin() -> None:
    """A server that ignores `encoding_format` answers with lists of floats: same vector."""
    vector = np.asarray([0.25, -1.5, 3.0], dtype=np.float32)
    as_base64 = decoded_vector(base64.b64encode(vector.tobytes()).decode())
    as_list = decoded_vector([0.25, -1.5, 3.0])
    assert as_base64.dtype == as_list.dtype == np.float32
    np.testing.assert_array_equal(as_base64, as_list)


async def test_embedder_maps_errors_like_the_chat_adapter(
    server: FakeOpenAIServer, embedder: OpenAIEmbedder
) -> None:
    server.queue_embeddings(rate_limited(retry_after=2), Fail(401, "bad key"))

    with pytest.raises(LLMTransientError) as limited:
        await embedder.embed(["hello"])
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        await embedder.embed(["hello"])

    assert (limited.value.status, limited.value.retry_after) == (429, 2.0)


async def test_embedding_nothing_makes_no_request(
    server: FakeOpenAIServer, embedder: OpenAIEmbedder
) -> None:
    vectors = await embedder.embed([])

    assert vectors.shape == (0, 1536)
    assert server.requests == []
