"""The Bedrock adapters (`infra.llm.bedrock_llm`, `infra.llm.bedrock_embedder`) on real boto3
`bedrock-runtime` clients: against botocore's Stubber (request parameters and response shapes
checked against the service model), and against a fake on the wire (`tests.fakes.bedrock_runtime`:
botocore serializes, signs and parses as for AWS), wrapped in `engine.llm.TurnLLM` exactly as the
engine uses them (retries, repair, trace)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.stub import Stubber
from pydantic import BaseModel, Field

from engine.agent_config import AgentConfig, LLMPurpose
from engine.errors import LLMError, LLMOutputInvalid, LLMTransientError, is_rate_limit
from engine.llm import RetryPolicy, TurnLLM
from engine.trace import TurnTrace
from infra.llm.bedrock_embedder import BedrockEmbedder
from infra.llm.bedrock_llm import TOOL_DESCRIPTION, BedrockSchematicLLM
from infra.llm.openai_llm import json_schema_format
from tests.fakes.bedrock_runtime import (
    FakeBedrockRuntime,
    TextAnswer,
    TimesOut,
    ToolAnswer,
    access_denied,
    model_not_ready,
    throttled,
    unavailable,
    validation,
)

HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
PROFILE = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
MATCH = LLMPurpose.MATCH_GUIDELINES


class Verdict(BaseModel):
    """A small schema shaped like the engine's matching answers."""

    applies: bool
    score: int = Field(ge=0, le=10, description="how strongly the condition holds")
    rationale: str = ""


VALID = {"applies": True, "score": 8, "rationale": "the customer asked"}


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("WAYPOINT_BEDROCK_REGION", "WAYPOINT_BEDROCK_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeBedrockRuntime]:
    with FakeBedrockRuntime() as installed:
        yield installed


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


def turn_llm(
    llm: Any, sleep: RecordingSleep, config: AgentConfig | None = None
) -> tuple[TurnLLM, TurnTrace]:
    trace = TurnTrace(turn_id="t1", session_id="s1", agent_id="a1", agent_version="1")
    config = config or AgentConfig(default_model=HAIKU)
    return TurnLLM(llm, config, trace, retry=RetryPolicy(backoff_base=0.01), sleep=sleep), trace


def stubbed() -> tuple[Any, Stubber]:
    client = boto3.session.Session().client("bedrock-runtime", region_name="eu-west-1")
    return client, Stubber(client)


def converse_response(tool_input: dict[str, Any], **usage: int) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "t-1", "name": "Verdict", "input": tool_input}}
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 300, "outputTokens": 40, "totalTokens": 340, **usage},
        "metrics": {"latencyMs": 512},
    }


# --------------------------------------------------------------------------------------------------
# Stubber: the request and response shapes of the service model


async def test_the_schema_is_a_forced_tool_and_its_input_is_the_answer() -> None:
    client, stubber = stubbed()
    expected = {
        "modelId": HAIKU,
        "messages": [{"role": "user", "content": [{"text": "Does it apply?"}]}],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "Verdict",
                        "description": TOOL_DESCRIPTION,
                        "inputSchema": {
                            "json": json_schema_format(Verdict)["json_schema"]["schema"]
                        },
                    }
                }
            ],
            "toolChoice": {"tool": {"name": "Verdict"}},
        },
        "inferenceConfig": {"maxTokens": 512},
    }
    stubber.add_response(
        "converse",
        converse_response(VALID, cacheReadInputTokens=1200, cacheWriteInputTokens=0),
        expected,
    )
    llm = BedrockSchematicLLM(client=client, max_tokens=512)

    with stubber:
        generation = await llm.generate("Does it apply?", Verdict, model=HAIKU)

    stubber.assert_no_pending_responses()
    assert generation.value == Verdict(**VALID)
    assert generation.model == HAIKU
    # inputTokens excludes the cached part: the prompt was 300 + 1200 tokens, 1200 read from cache
    assert (generation.usage.prompt_tokens, generation.usage.completion_tokens) == (1500, 40)
    assert (generation.usage.cached_prompt_tokens, generation.usage.cache_write_tokens) == (1200, 0)
    assert llm.region == "eu-west-1"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 429),
        ("ServiceUnavailableException", 503),
        ("ModelNotReadyException", 429),
        ("InternalServerException", 500),
        ("ModelTimeoutException", 408),
    ],
)
async def test_busy_or_unavailable_models_are_transient_errors(code: str, status: int) -> None:
    client, stubber = stubbed()
    stubber.add_client_error("converse", code, "slow down", http_status_code=status)
    llm = BedrockSchematicLLM(client=client)

    with stubber, pytest.raises(LLMTransientError, match=code) as raised:
        await llm.generate("Does it apply?", Verdict, model=HAIKU)

    assert raised.value.status == status
    assert HAIKU in str(raised.value)


async def test_throttling_is_a_rate_limit_whatever_http_status_carried_it() -> None:
    """Status 429 marks a rate-limited model to the turn (`is_rate_limit`: the turn is deferred,
    not answered with the fallback), so a ThrottlingException is one even when a proxy or a
    stub carries it with another status."""
    client, stubber = stubbed()
    stubber.add_client_error("converse", "ThrottlingException", "slow down", http_status_code=400)
    llm = BedrockSchematicLLM(client=client)

    with stubber, pytest.raises(LLMTransientError) as raised:
        await llm.generate("Does it apply?", Verdict, model=HAIKU)

    assert is_rate_limit(raised.value)


@pytest.mark.parametrize(
    ("code", "status", "hint"),
    [
        ("ValidationException", 400, r"Check the model id .*supports tool use in the Converse API"),
        ("AccessDeniedException", 403, r"bedrock:InvokeModel on .*enable access to the model"),
        ("ResourceNotFoundException", 404, r"offered in eu-west-1"),
        ("ServiceQuotaExceededException", 400, r"higher Bedrock quota"),
    ],
)
async def test_refused_requests_are_final_and_name_the_model_and_the_fix(
    code: str, status: int, hint: str
) -> None:
    client, stubber = stubbed()
    stubber.add_client_error("converse", code, "nope", http_status_code=status)
    llm = BedrockSchematicLLM(client=client)

    with stubber, pytest.raises(LLMError, match=hint) as raised:
        await llm.generate("Does it apply?", Verdict, model=HAIKU)

    assert not isinstance(raised.value, LLMTransientError)
    assert f"refused model {HAIKU!r} ({code})" in str(raised.value)


# --------------------------------------------------------------------------------------------------
# On the wire, through TurnLLM


def test_the_client_times_out_per_request_and_leaves_retries_to_the_turn(
    fake: FakeBedrockRuntime,
) -> None:
    llm = BedrockSchematicLLM(region="us-west-2", timeout=12.5)
    client = llm._connection.client()
    assert client.meta.config.read_timeout == 12.5
    assert client.meta.config.retries["total_max_attempts"] == 1
    assert client.meta.region_name == "us-west-2"


async def test_throttling_is_retried_with_backoff_then_answers(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(throttled(), model_not_ready(), ToolAnswer(VALID))
    llm, trace = turn_llm(BedrockSchematicLLM(), sleep)

    generation = await llm.generate(MATCH, "Does it apply?", Verdict)

    assert generation.value == Verdict(**VALID)
    assert len(fake.converse_requests) == 3  # one request per attempt: botocore retries nothing
    assert len(sleep.delays) == 2 and all(d > 0 for d in sleep.delays)
    (record,) = trace.llm_calls
    assert (record.attempts, record.error, record.model) == (3, None, HAIKU)
    assert record.prompt_tokens == 120 and record.completion_tokens == 30


async def test_throttling_that_lasts_ends_in_a_transient_error_within_the_budget(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(throttled(), unavailable(), throttled(), ToolAnswer(VALID))
    llm, trace = turn_llm(BedrockSchematicLLM(), sleep)

    with pytest.raises(LLMTransientError, match="ThrottlingException"):
        await llm.generate(MATCH, "Does it apply?", Verdict)

    assert len(fake.converse_requests) == 3  # RetryPolicy.max_attempts
    assert len(sleep.delays) == 2
    assert "LLMTransientError" in (trace.llm_calls[0].error or "")


async def test_a_read_timeout_is_transient(fake: FakeBedrockRuntime, sleep: RecordingSleep) -> None:
    fake.queue(TimesOut(), ToolAnswer(VALID))
    llm, _ = turn_llm(BedrockSchematicLLM(), sleep)

    generation = await llm.generate(MATCH, "Does it apply?", Verdict)

    assert generation.attempts == 2 and len(sleep.delays) == 1


async def test_a_validation_error_is_not_retried(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(validation("The provided model identifier is invalid."))
    llm, _ = turn_llm(BedrockSchematicLLM(), sleep, AgentConfig(default_model="anthropic.nope"))

    with pytest.raises(LLMError, match=r"refused model 'anthropic.nope' \(ValidationException\)"):
        await llm.generate(MATCH, "Does it apply?", Verdict)

    assert len(fake.converse_requests) == 1 and sleep.delays == []


async def test_access_denied_names_the_model_and_the_permission(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(access_denied())
    llm, _ = turn_llm(BedrockSchematicLLM(), sleep, AgentConfig(default_model=PROFILE))

    with pytest.raises(LLMError, match=r"bedrock:InvokeModel on 'us\.anthropic") as raised:
        await llm.generate(MATCH, "Does it apply?", Verdict)

    assert not isinstance(raised.value, LLMTransientError)
    assert len(fake.converse_requests) == 1 and sleep.delays == []


async def test_a_malformed_tool_answer_gets_the_repair_attempt(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(ToolAnswer({"applies": "perhaps", "score": 42}), ToolAnswer(VALID))
    llm, trace = turn_llm(BedrockSchematicLLM(), sleep)

    generation = await llm.generate(MATCH, "Does it apply?", Verdict)

    assert generation.value == Verdict(**VALID)
    first, repair = fake.converse_requests
    assert "could not be used" not in first.prompt
    assert "could not be used" in repair.prompt
    assert "applies" in repair.prompt and "score" in repair.prompt  # the fields that were wrong
    assert repair.tool_choice == {"tool": {"name": "Verdict"}}
    assert trace.llm_calls[0].attempts == 2 and sleep.delays == []


async def test_a_model_that_answers_in_text_is_asked_again_then_the_call_fails(
    fake: FakeBedrockRuntime, sleep: RecordingSleep
) -> None:
    fake.queue(TextAnswer("Yes, it applies."), TextAnswer("I think so."))
    llm, trace = turn_llm(BedrockSchematicLLM(), sleep)

    with pytest.raises(
        LLMOutputInvalid, match="text instead of a call of the tool Verdict"
    ) as raised:
        await llm.generate(MATCH, "Does it apply?", Verdict)

    assert raised.value.raw == "I think so."
    assert len(fake.converse_requests) == 2
    assert "call the tool Verdict" in fake.converse_requests[1].prompt
    assert trace.llm_calls[0].attempts == 2


async def test_json_in_text_or_a_stringified_tool_input_is_still_the_answer(
    fake: FakeBedrockRuntime,
) -> None:
    fake.queue(TextAnswer(json.dumps(VALID)), ToolAnswer(json.dumps(VALID)))
    llm = BedrockSchematicLLM()

    first = await llm.generate("Does it apply?", Verdict, model=HAIKU)
    second = await llm.generate("Does it apply?", Verdict, model=HAIKU)

    assert first.value == second.value == Verdict(**VALID)


async def test_an_answer_cut_off_at_the_token_limit_is_invalid_output(
    fake: FakeBedrockRuntime,
) -> None:
    fake.queue(TextAnswer('{"applies": tr', stop_reason="max_tokens"))

    with pytest.raises(LLMOutputInvalid, match="cut off at the output token limit"):
        await BedrockSchematicLLM().generate("Does it apply?", Verdict, model=HAIKU)


async def test_a_model_that_refuses_a_forced_tool_choice_is_offered_the_tool_from_then_on(
    fake: FakeBedrockRuntime,
) -> None:
    llama = "meta.llama3-1-70b-instruct-v1:0"
    fake.queue(
        validation(
            "This model doesn't support the toolConfig.toolChoice.tool field. Remove "
            "toolConfig.toolChoice.tool and try again."
        ),
        ToolAnswer(VALID),
        ToolAnswer(VALID),
    )
    llm = BedrockSchematicLLM()

    first = await llm.generate("Does it apply?", Verdict, model=llama)
    second = await llm.generate("Does it apply?", Verdict, model=llama)

    assert first.value == second.value == Verdict(**VALID)
    forced, *offered = fake.converse_requests
    assert forced.tool_choice == {"tool": {"name": "Verdict"}}
    assert [r.tool_choice for r in offered] == [{"auto": {}}, {"auto": {}}]
    assert "calling the tool Verdict" in offered[0].body["system"][0]["text"]
    assert not llm.forces_tool_choice(llama) and llm.forces_tool_choice(HAIKU)


# --------------------------------------------------------------------------------------------------
# Embeddings (Titan text embeddings through InvokeModel)


async def test_titan_embeddings_come_back_unit_length_in_order(fake: FakeBedrockRuntime) -> None:
    embedder = BedrockEmbedder(dimensions=256)
    texts = [f"text number {i}" for i in range(9)] + [""]

    vectors = await embedder.embed(texts)

    assert vectors.shape == (10, 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    by_text = {r.body["inputText"]: r for r in fake.invoke_requests}
    assert set(by_text) == {*texts[:-1], " "}  # an empty text is sent as a space
    assert {r.model_id for r in fake.invoke_requests} == {"amazon.titan-embed-text-v2:0"}
    assert by_text["text number 3"].body == {
        "inputText": "text number 3",
        "normalize": True,
        "dimensions": 256,
    }
    again = await embedder.embed(["text number 3"])
    np.testing.assert_allclose(again[0], vectors[3], rtol=1e-6)  # row i is texts[i]'s
    assert embedder.dimensions == 256


async def test_the_embedding_request_and_response_fit_the_service_model() -> None:
    import io

    from botocore.response import StreamingBody

    client, stubber = stubbed()
    payload = json.dumps({"embedding": [3.0, 4.0], "inputTextTokenCount": 2}).encode()
    stubber.add_response(
        "invoke_model",
        {
            "body": StreamingBody(io.BytesIO(payload), len(payload)),
            "contentType": "application/json",
        },
        {
            "modelId": "amazon.titan-embed-text-v2:0",
            "body": json.dumps({"inputText": "hello", "normalize": True}),
            "contentType": "application/json",
            "accept": "application/json",
        },
    )
    stubber.add_client_error("invoke_model", "AccessDeniedException", "no", http_status_code=403)
    embedder = BedrockEmbedder(client=client)

    with stubber:
        vectors = await embedder.embed(["hello"])
        with pytest.raises(
            LLMError, match=r"bedrock:InvokeModel on 'amazon\.titan-embed-text-v2:0'"
        ):
            await embedder.embed(["again"])

    np.testing.assert_allclose(vectors, [[0.6, 0.8]])
    assert embedder.dimensions == 2


def test_titan_vector_sizes_are_checked_before_any_call() -> None:
    assert BedrockEmbedder().dimensions == 1024
    with pytest.raises(LLMError, match="256, 512, 1024 dimensions, not 300"):
        BedrockEmbedder(dimensions=300)
    with pytest.raises(LLMError, match="fixed vector size"):
        BedrockEmbedder("amazon.titan-embed-text-v1", dimensions=512)


async def test_embedding_nothing_makes_no_request(fake: FakeBedrockRuntime) -> None:
    vectors = await BedrockEmbedder().embed([])
    assert vectors.shape == (0, 1024) and fake.invoke_requests == []


async def test_a_throttled_embedding_is_retried_by_the_client(fake: FakeBedrockRuntime) -> None:
    fake.queue_invoke(throttled())

    vectors = await BedrockEmbedder().embed(["hello"])

    assert vectors.shape == (1, 1024)
    assert len(fake.invoke_requests) == 2  # nothing in the engine retries embeddings
