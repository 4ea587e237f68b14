"""Bedrock cache points (`infra.llm.bedrock_cache`, `infra.llm.bedrock_llm`): a request carries
one `cachePoint` block exactly after its prompt's marked stable prefix — on a model that caches,
when the prefix reaches the model's minimum — and the text before it is byte-identical on every
turn of a session and across sessions, so Bedrock's cache serves it. Checked against botocore's
Stubber (the request shape of the service model) with the real prompt builders on the banking
agent, and end to end: the banking conversation through the real engine, the real adapter and a
fake Bedrock on the wire that caches as Bedrock does, its cache reads and writes flowing into the
trace and the cost."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from pydantic import BaseModel

from bench.prompt_costs import Replayed, banking_conversation, replay
from bench.scenarios import BANKING_CONVERSATION
from bench.tokens import EstimateCounter
from engine.agent_config import AgentConfig, LLMPurpose
from engine.compose import (
    CannedChoice,
    ComposedReply,
    CompositionInput,
    Instruction,
    Template,
    build_canned_prompt,
    build_compose_prompt,
)
from engine.errors import LLMError
from engine.llm import RetryPolicy, TurnLLM
from engine.matching import guidelines as gm
from engine.matching.journey_answer import JourneyNodeSelection
from engine.matching.journey_graph import build_node_views
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.model import AgentSnapshot
from engine.prompt_text import Prompt
from engine.tools.calls import ToolCallPlan, build_tool_call_prompt
from engine.trace import TurnTrace
from examples.banking import load as load_bank
from infra.llm.bedrock_cache import (
    CACHE_MODELS_ENV,
    CachePolicy,
    CachingModel,
    base_model_id,
    parse_caching_models,
)
from infra.llm.bedrock_llm import TOOL_DESCRIPTION, BedrockSchematicLLM
from infra.llm.openai_llm import json_schema_format
from infra.offline import OfflineLLM
from tests.engine.test_matching_units import context
from tests.fakes.bedrock_runtime import (
    Behavior,
    ConverseRequest,
    FakeBedrockRuntime,
    ToolAnswer,
    access_denied,
    throttled,
    validation,
)
from tests.reliability.faults import SCHEMAS

SONNET = "anthropic.claude-3-7-sonnet-20250219-v1:0"
LLAMA = "meta.llama3-1-70b-instruct-v1:0"
CACHE_POINT = {"cachePoint": {"type": "default"}}
# Every marked prefix gets a cache point: where it goes, whatever its length.
EVERY_PREFIX = CachePolicy([CachingModel("anthropic.claude-3-7-sonnet-*", 1)])
REFUSED = "You invoked an unsupported model or your request did not allow prompt caching."


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("WAYPOINT_BEDROCK_REGION", "WAYPOINT_BEDROCK_ENDPOINT_URL", CACHE_MODELS_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeBedrockRuntime]:
    with FakeBedrockRuntime() as installed:
        yield installed


def cache_points(request: ConverseRequest | dict[str, Any]) -> list[int]:
    """The positions of the cache points among a request's user content blocks."""
    body = request.body if isinstance(request, ConverseRequest) else request
    blocks = body["messages"][0]["content"]
    return [i for i, block in enumerate(blocks) if "cachePoint" in block]


def cached_text(request: ConverseRequest) -> str | None:
    """The prompt text before the cache point, or None without one."""
    blocks = request.body["messages"][0]["content"]
    points = cache_points(request)
    return "".join(b["text"] for b in blocks[: points[0]]) if points else None


# --------------------------------------------------------------------------------------------------
# Stubber: the cache point exactly after the stable prefix, for each purpose


def bank_prompts() -> dict[str, tuple[Prompt, type[BaseModel], dict[str, Any]]]:
    """Each purpose's prompt from the real builders on the banking agent mid-conversation, its
    schema and an answer that fits it."""
    bank = load_bank()
    ctx = context(
        bank,
        "Hello!",
        "Hi, how can I help?",
        "I want to transfer money",
        terms=bank.terms,
        variables={"customer_tier": "gold"},
    )
    transfer = next(j for j in bank.journeys if j.id == "transfer")
    batch = gm.Batch(gm.BatchKind.ACTIONABLE, tuple(bank.guidelines[:2]))
    data = CompositionInput(instructions=[Instruction("i1", "Ask for the amount", "transfer")])
    canned = [Template("t1", "ask", "How much would you like to transfer?")]
    match = gm.build_match_prompt(ctx, batch)
    node = build_node_selection_prompt(
        ctx,
        transfer,
        build_node_views(transfer),
        [],
        collected={},
        max_depth=5,
        explain=False,
    )
    tools = build_tool_call_prompt(
        ctx, [bank.tool("lookup_account_id")], {"lookup_account_id": "the transfer"}, {}
    )
    return {
        "match_guidelines": (
            match,
            gm.GuidelineMatchBatch,
            {"verdicts": [{"id": "g1", "rationale": "", "applies": False, "score": 1}]},
        ),
        "select_journey_node": (node, JourneyNodeSelection, {"next_step": "NONE"}),
        "call_tools": (tools, ToolCallPlan, {"rationale": "", "calls": []}),
        "compose_fluid": (
            build_compose_prompt(ctx, data),
            ComposedReply,
            {"message": "How much?", "applied": ["i1"]},
        ),
        "compose_canned": (
            build_canned_prompt(ctx, data, canned, {}, strict=True),
            CannedChoice,
            {"template": "t1"},
        ),
    }


def expected_request(prompt: Prompt, schema: type[BaseModel], content: list[Any]) -> dict[str, Any]:
    name = schema.__name__
    return {
        "modelId": SONNET,
        "messages": [{"role": "user", "content": content}],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": name,
                        "description": TOOL_DESCRIPTION,
                        "inputSchema": {
                            "json": json_schema_format(schema)["json_schema"]["schema"]
                        },
                    }
                }
            ],
            "toolChoice": {"tool": {"name": name}},
        },
    }


def answered(schema: type[BaseModel], answer: dict[str, Any], **usage: int) -> dict[str, Any]:
    use = {"toolUseId": "t-1", "name": schema.__name__, "input": answer}
    return {
        "output": {"message": {"role": "assistant", "content": [{"toolUse": use}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120, **usage},
        "metrics": {"latencyMs": 300},
    }


def stubbed() -> tuple[Any, Stubber]:
    client = boto3.session.Session().client("bedrock-runtime", region_name="us-east-1")
    return client, Stubber(client)


@pytest.mark.parametrize(
    "purpose",
    ["match_guidelines", "select_journey_node", "call_tools", "compose_fluid", "compose_canned"],
)
async def test_the_cache_point_comes_exactly_after_each_purposes_stable_prefix(
    purpose: str,
) -> None:
    prompt, schema, answer = bank_prompts()[purpose]
    stable = [{"text": prompt.stable_prefix}, CACHE_POINT, {"text": prompt.turn_part}]
    client, stubber = stubbed()
    stubber.add_response(
        "converse", answered(schema, answer), expected_request(prompt, schema, stable)
    )
    llm = BedrockSchematicLLM(client=client, caching=EVERY_PREFIX)

    with stubber:
        generation = await llm.generate(prompt, schema, model=SONNET)

    stubber.assert_no_pending_responses()  # the request was exactly `stable` (Stubber compares)
    assert generation.value == schema.model_validate(answer)
    assert prompt.stable_prefix.startswith("You ") and "Agent: " in prompt.stable_prefix
    assert "Conversation (most recent last):" not in prompt.stable_prefix
    assert "Customer: I want to transfer money" in prompt.turn_part


async def test_with_the_default_list_only_prefixes_above_the_models_minimum_get_one() -> None:
    """On Claude 3.7 Sonnet (1,024 tokens per checkpoint): the banking agent's node-selection
    prefix (the journey rules and the tool definition) passes; its matching prefix does not, and
    is sent as one text block — the request Bedrock would cache nothing of anyway."""
    prompts = bank_prompts()
    client, stubber = stubbed()
    for purpose in ("select_journey_node", "match_guidelines"):
        prompt, schema, answer = prompts[purpose]
        content = (
            [{"text": prompt.stable_prefix}, CACHE_POINT, {"text": prompt.turn_part}]
            if purpose == "select_journey_node"
            else [{"text": str(prompt)}]
        )
        stubber.add_response(
            "converse", answered(schema, answer), expected_request(prompt, schema, content)
        )
    llm = BedrockSchematicLLM(client=client, caching=CachePolicy())

    with stubber:
        for purpose in ("select_journey_node", "match_guidelines"):
            prompt, schema, _ = prompts[purpose]
            await llm.generate(prompt, schema, model=SONNET)

    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("model", "prompt"),
    [
        (LLAMA, Prompt("You are the agent. " * 2_000 + "\n\nCustomer: hi", 38_002)),  # no caching
        (SONNET, Prompt("You are the agent.\n\nCustomer: hi", 20)),  # far below 1,024 tokens
        (SONNET, "You are the agent. " * 2_000),  # a plain str: no mark
        (SONNET, Prompt("You are the agent. " * 2_000 + "\n\n  ", 38_002)),  # a blank rest
    ],
    ids=["model-outside-the-list", "too-short", "unmarked", "blank-rest"],
)
async def test_no_cache_point_where_it_cannot_help(model: str, prompt: str) -> None:
    client, stubber = stubbed()
    expected = expected_request(Prompt(prompt), ComposedReply, [{"text": str(prompt)}])
    expected["modelId"] = model
    stubber.add_response("converse", answered(ComposedReply, {"message": "hi"}), expected)
    llm = BedrockSchematicLLM(client=client)  # the default list

    with stubber:
        await llm.generate(prompt, ComposedReply, model=model)

    stubber.assert_no_pending_responses()


def test_profiles_and_arns_are_matched_by_their_foundation_model() -> None:
    policy = CachePolicy()
    assert policy.min_tokens(SONNET) == 1_024
    assert policy.min_tokens(f"us.{SONNET}") == 1_024
    assert policy.min_tokens(f"arn:aws:bedrock:us-east-1::foundation-model/{SONNET}") == 1_024
    profile_arn = f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.{SONNET}"
    assert base_model_id(profile_arn) == SONNET and policy.min_tokens(profile_arn) == 1_024
    assert policy.min_tokens("us.anthropic.claude-3-5-haiku-20241022-v1:0") == 2_048
    assert policy.min_tokens("anthropic.claude-haiku-4-5-20251001-v1:0") == 4_096
    assert policy.min_tokens("anthropic.claude-opus-4-5-20251101-v1:0") == 4_096
    assert policy.min_tokens("anthropic.claude-opus-4-1-20250805-v1:0") == 1_024
    assert policy.min_tokens("global.anthropic.claude-sonnet-4-5-20250929-v1:0") == 1_024
    assert policy.min_tokens("amazon.nova-micro-v1:0") == 1_000
    # not cached: Sonnet 3.5 v2 (preview customers only), Llama, an application profile
    assert policy.min_tokens("anthropic.claude-3-5-sonnet-20241022-v2:0") is None
    assert policy.min_tokens(LLAMA) is None
    app = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"
    assert policy.min_tokens(app) is None
    assert CachePolicy(parse_caching_models(f"defaults,{app}=1024")).min_tokens(app) == 1_024


def test_the_list_is_configurable_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_MODELS_ENV, "none")
    assert CachePolicy.from_env().min_tokens(SONNET) is None
    monkeypatch.setenv(CACHE_MODELS_ENV, "meta.llama3-1-*=2048, defaults")
    policy = CachePolicy.from_env()
    assert policy.min_tokens(LLAMA) == 2_048 and policy.min_tokens(SONNET) == 1_024
    monkeypatch.setenv(CACHE_MODELS_ENV, "anthropic.claude-*")
    with pytest.raises(ValueError, match=f"{CACHE_MODELS_ENV}: 'anthropic.claude-\\*' is not"):
        CachePolicy.from_env()


# --------------------------------------------------------------------------------------------------
# A cache point may miss, never fail a call


def long_prompt() -> Prompt:
    stable = "You are the agent described below. " * 200 + "\n\n"
    return Prompt(stable + "Conversation (most recent last):\nCustomer: hi", len(stable))


async def test_a_refused_cache_point_is_dropped_for_the_call_and_for_the_model(
    fake: FakeBedrockRuntime,
) -> None:
    answer = ToolAnswer({"message": "hi"})
    fake.queue(validation(REFUSED), answer, answer)
    llm = BedrockSchematicLLM()

    first = await llm.generate(long_prompt(), ComposedReply, model=SONNET)
    second = await llm.generate(long_prompt(), ComposedReply, model=SONNET)

    assert first.value == second.value == ComposedReply(message="hi")
    refused, again, later = fake.converse_requests
    assert cache_points(refused) == [1] and cache_points(again) == cache_points(later) == []
    assert again.prompt == refused.prompt == str(long_prompt())  # the same text, whole
    assert not llm.sends_cache_points(SONNET)


async def test_a_refusal_that_names_caching_is_one_too(fake: FakeBedrockRuntime) -> None:
    denied = access_denied()
    fake.queue(type(denied)(denied.code, denied.status, REFUSED), ToolAnswer({"message": "hi"}))
    llm = BedrockSchematicLLM()

    await llm.generate(long_prompt(), ComposedReply, model=SONNET)

    assert [cache_points(r) for r in fake.converse_requests] == [[1], []]


async def test_a_refusal_for_another_reason_stays_the_calls_error_and_caching_stays_on(
    fake: FakeBedrockRuntime,
) -> None:
    fake.queue(validation("Input is too long for requested model."), validation("too long"))
    llm = BedrockSchematicLLM()

    with pytest.raises(LLMError, match=r"refused model .*\(ValidationException\): too long"):
        await llm.generate(long_prompt(), ComposedReply, model=SONNET)

    assert [cache_points(r) for r in fake.converse_requests] == [[1], []]
    assert llm.sends_cache_points(SONNET)  # the cache point was not the trouble


async def test_a_model_offered_the_tool_instead_keeps_its_cache_point(
    fake: FakeBedrockRuntime,
) -> None:
    """A model that refuses a forced tool choice gets the tool with an instruction in `system`:
    the cache point stays after the stable prefix (the instruction is part of what it caches)."""
    fake.queue(
        validation("This model doesn't support the toolConfig.toolChoice.tool field."),
        ToolAnswer({"message": "hi"}),
    )
    llm = BedrockSchematicLLM()

    await llm.generate(long_prompt(), ComposedReply, model=SONNET)

    forced, offered = fake.converse_requests
    assert forced.tool_choice == {"tool": {"name": "ComposedReply"}}
    assert offered.tool_choice == {"auto": {}} and "system" in offered.body
    assert cached_text(forced) == cached_text(offered) == long_prompt().stable_prefix
    assert llm.sends_cache_points(SONNET) and not llm.forces_tool_choice(SONNET)


async def test_throttling_keeps_the_cache_point_and_the_turn_retries_it(
    fake: FakeBedrockRuntime,
) -> None:
    fake.queue(throttled(), ToolAnswer({"message": "hi"}))
    llm, _ = turn_llm(BedrockSchematicLLM())

    await llm.generate(LLMPurpose.COMPOSE, long_prompt(), ComposedReply)

    assert [cache_points(r) for r in fake.converse_requests] == [[1], [1]]


def turn_llm(adapter: BedrockSchematicLLM) -> tuple[TurnLLM, TurnTrace]:
    trace = TurnTrace(turn_id="t1", session_id="s1", agent_id="bank", agent_version="1")

    async def no_wait(_: float) -> None:
        return None

    config = AgentConfig(default_model=SONNET)
    return TurnLLM(adapter, config, trace, retry=RetryPolicy(), sleep=no_wait), trace


async def test_the_repair_keeps_the_cache_point_where_it_was(fake: FakeBedrockRuntime) -> None:
    fake.queue(ToolAnswer({"applied": "nothing"}), ToolAnswer({"message": "hi"}))
    llm, trace = turn_llm(BedrockSchematicLLM())

    await llm.generate(LLMPurpose.COMPOSE, long_prompt(), ComposedReply)

    first, repair = fake.converse_requests
    assert cached_text(first) == cached_text(repair) == long_prompt().stable_prefix
    assert "could not be used" in repair.prompt and trace.llm_calls[0].attempts == 2


# --------------------------------------------------------------------------------------------------
# Cache reads and writes: into Usage, the trace and the cost


async def test_cache_reads_and_writes_are_in_the_trace_and_priced_as_such() -> None:
    client, stubber = stubbed()
    prompt = long_prompt()
    content = [{"text": prompt.stable_prefix}, CACHE_POINT, {"text": prompt.turn_part}]
    expected = expected_request(prompt, ComposedReply, content)
    reply = {"message": "hi"}
    stubber.add_response(
        "converse", answered(ComposedReply, reply, cacheWriteInputTokens=1_500), expected
    )
    stubber.add_response(
        "converse", answered(ComposedReply, reply, cacheReadInputTokens=1_500), expected
    )
    llm, trace = turn_llm(BedrockSchematicLLM(client=client))

    with stubber:
        for _ in range(2):
            await llm.generate(LLMPurpose.COMPOSE, prompt, ComposedReply)

    written, read = trace.llm_calls
    # inputTokens (100) leaves out what went to or came from the cache
    assert (written.prompt_tokens, written.cache_write_tokens, written.cached_prompt_tokens) == (
        1_600,
        1_500,
        0,
    )
    assert (read.prompt_tokens, read.cache_write_tokens, read.cached_prompt_tokens) == (
        1_600,
        0,
        1_500,
    )
    # Claude 3.7 Sonnet's example prices: $3 input, $3.75 cache write, $0.30 cache read, $15 output
    assert written.cost_usd == pytest.approx((100 * 3 + 1_500 * 3.75 + 20 * 15) / 1e6)
    assert read.cost_usd == pytest.approx((100 * 3 + 1_500 * 0.30 + 20 * 15) / 1e6)


# --------------------------------------------------------------------------------------------------
# End to end: the banking conversation, two sessions


class CachingBedrock:
    """Answers each forced tool call as the offline model would, and caches as Bedrock does:
    the request's prefix up to its cache point (the tool definition, then the text before the
    point) is read from the cache when an earlier request to the same model wrote the same,
    else written; `inputTokens` is the rest (tokens counted at 4 characters a token)."""

    def __init__(self) -> None:
        self.cache: set[tuple[str, str]] = set()

    def __call__(self, request: ConverseRequest) -> Behavior:
        schema = SCHEMAS[request.tool]
        generation = asyncio.run(OfflineLLM().generate(request.prompt, schema, model="offline"))
        answer = generation.value.model_dump(mode="json")
        tools = json.dumps(request.body["toolConfig"]["tools"])
        total = len(tools + request.prompt) // 4
        prefix = cached_text(request)
        if prefix is None:
            return ToolAnswer(answer, input_tokens=total)
        key = (request.model_id, tools + prefix)
        tokens = len(tools + prefix) // 4
        hit = key in self.cache
        self.cache.add(key)
        return ToolAnswer(
            answer,
            input_tokens=total - tokens,
            cache_read=tokens if hit else 0,
            cache_write=0 if hit else tokens,
        )


def two_sessions(fake: FakeBedrockRuntime, caching: CachePolicy) -> list[list[Replayed]]:
    """The banking conversation in two sessions, every call on Claude 3.7 Sonnet through the real
    adapter and the fake on the wire."""
    fake.answer_with(CachingBedrock())
    conversation = banking_conversation()
    snapshot: AgentSnapshot = conversation.snapshot
    config = snapshot.config.model_copy(update={"default_model": SONNET})
    conversation = type(conversation)(
        conversation.label,
        snapshot.model_copy(update={"config": config}),
        conversation.tools,
        conversation.messages,
    )
    adapter = BedrockSchematicLLM(caching=caching)
    return [
        asyncio.run(replay(conversation, EstimateCounter(), session=name, model=adapter))
        for name in ("first-session", "second-session")
    ]


def test_every_purposes_cached_text_is_byte_identical_across_turns_and_sessions(
    fake: FakeBedrockRuntime,
) -> None:
    two_sessions(fake, EVERY_PREFIX)

    by_tool: dict[str, set[str | None]] = defaultdict(set)
    for request in fake.converse_requests:
        by_tool[request.tool].add(cached_text(request))
    # the purposes the conversation exercises, each with one cached text for all its requests
    purposes = {"GuidelineMatchBatch", "JourneyNodeSelection", "SecretsSaid", "ComposedReply"}
    assert purposes | {"CannedChoice"} <= set(by_tool)
    for tool, texts in by_tool.items():
        assert len(texts) == 1, f"{tool}: the text before the cache point differs"
        (text,) = texts
        assert text is not None and text.startswith("You ") and "Agent: " in text, tool
        for message in BANKING_CONVERSATION:
            assert f"Customer: {message}" not in text, (tool, message)
        assert "Conversation (most recent last):" not in text, tool


def test_cache_hits_flow_into_the_trace_from_the_second_request_on_even_in_a_new_session(
    fake: FakeBedrockRuntime,
) -> None:
    """With the default list, the banking agent's node-selection prompts pass Claude 3.7
    Sonnet's minimum: the first one writes the cache, every later one — the second session's
    first turn included — reads it; the other purposes' prefixes are too short and go without."""
    first, second = two_sessions(fake, CachePolicy())

    with_point = {r.tool for r in fake.converse_requests if cache_points(r)}
    assert with_point == {"JourneyNodeSelection"}
    calls = [
        call
        for session in (first, second)
        for turn in session
        for call in turn.trace.llm_calls
        if call.purpose == "select_journey_node"
    ]
    assert len(calls) > 2
    assert calls[0].cache_write_tokens > 0 and calls[0].cached_prompt_tokens == 0
    assert all(c.cached_prompt_tokens > 0 and c.cache_write_tokens == 0 for c in calls[1:])
    second_first = next(
        c for t in second for c in t.trace.llm_calls if c.purpose == "select_journey_node"
    )
    assert second_first.cached_prompt_tokens == calls[0].cache_write_tokens
    # a read costs a tenth of the input price: the cached call is the cheaper one
    assert all(c.cost_usd is not None for c in calls)
    assert calls[1].cost_usd < calls[0].cost_usd  # type: ignore[operator]
