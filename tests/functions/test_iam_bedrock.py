"""Bedrock through the functions' roles, least privilege: template.yaml grants bedrock:InvokeModel
on exactly the models its parameters list (`BedrockModelIds`, `BedrockInferenceProfileIds`), to
the functions that call models, never on `*`; the calls a publish and a turn really make on
Bedrock (recorded from the boto3 clients, as in test_iam_derived.py) are all allowed and use every
grant, and a call to a model that is not configured is refused, with an error naming the model
and the permission to add."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import httpx
import pytest
from pydantic import BaseModel

from engine.agent_config import LLMPurpose
from engine.errors import LLMError
from engine.sessions.session import EventSource
from examples.banking import load as load_bank
from infra.aws.local_stack import LocalStack
from infra.channels.registry import build_channels
from infra.llm.bedrock_client import template_parameters
from infra.llm.bedrock_embedder import BedrockEmbedder
from infra.llm.bedrock_llm import BedrockSchematicLLM
from infra.runtime import Runtime, install_runtime, reset_runtime
from infra.runtime_settings import RuntimeSettings
from infra.turn_queue import session_id_for
from tests.channels.signed import PUBLIC_BASE_URL, channel_secrets
from tests.fakes.bedrock_runtime import FakeBedrockRuntime
from tests.functions.conftest import invoke_worker, load_session, receive_all, telegram_says
from tests.functions.iam_policy import (
    PROFILE_DESTINATION,
    ApiCall,
    CallRecorder,
    IamRequest,
    Policy,
    Statement,
    function_policies,
    iam_requests,
    recording,
)
from tests.functions.lambda_events import records_from_queue, sqs_event
from tests.functions.platforms import BASE_URLS, FakePlatforms, resolve_to_public
from tests.functions.test_template import _transform
from tests.reliability.test_bedrock_turns import answer_like_the_offline_model

HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
NOVA_PROFILE = "us.amazon.nova-micro-v1:0"
# Derived from the configuration, as `waypoint validate` prints them for an agent.
PARAMETERS = {"Stage": "local", **template_parameters([HAIKU, NOVA_PROFILE, TITAN])}
CALLERS = ("WorkerFunction", "ManagementFunction")
CHAT = 6262


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    """Overrides the shared `stack`: deployed with Bedrock models configured."""
    with LocalStack(parameters=PARAMETERS) as local:
        yield local


@pytest.fixture
def policies(stack: LocalStack) -> dict[str, Policy]:
    return function_policies(_transform(PARAMETERS), stack)


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch, stack: LocalStack) -> Iterator[FakeBedrockRuntime]:
    monkeypatch.setenv("WAYPOINT_BEDROCK_REGION", stack.region)
    monkeypatch.setenv("WAYPOINT_BEDROCK_ENDPOINT_URL", "https://vpce-0a1b2c.bedrock-runtime.test")
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "bedrock")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", TITAN)
    monkeypatch.setenv("WAYPOINT_EMBEDDING_DIMENSIONS", "256")
    with FakeBedrockRuntime() as fake:
        fake.answer_with(answer_like_the_offline_model)
        yield fake


@pytest.fixture
def recorder(
    policies: dict[str, Policy], stack: LocalStack, bedrock: FakeBedrockRuntime
) -> Iterator[CallRecorder]:
    with recording(policies, stack.region, enforce=True) as active:
        yield active
    reset_runtime()
    asyncio.set_event_loop(None)


def bedrock_grants(policy: Policy) -> set[str]:
    return {resource for _, action, resource in policy.grants() if action.startswith("bedrock:")}


def bedrock_statements(policy: Policy) -> list[Statement]:
    return [s for s in policy.statements if any(a.startswith("bedrock:") for a in s.actions)]


def allows(policy: Policy, requests: list[IamRequest]) -> bool:
    return all(policy.allows(request) for request in requests)


def invoke(model_id: str, region: str) -> list[IamRequest]:
    """What IAM evaluates when a function in the stack calls `model_id` in `region`."""
    return iam_requests(ApiCall("bedrock", "Converse", {"modelId": model_id}), region)


def test_the_template_parameters_split_foundation_models_from_inference_profiles() -> None:
    parameters = template_parameters([HAIKU, NOVA_PROFILE, TITAN, HAIKU])
    assert parameters["BedrockModelIds"] == f"{HAIKU},{TITAN}"
    assert parameters["BedrockInferenceProfileIds"] == NOVA_PROFILE


def test_invoke_model_is_granted_on_exactly_the_configured_models(
    policies: dict[str, Policy], stack: LocalStack
) -> None:
    region, elsewhere = stack.region, "eu-west-3"
    for function in CALLERS:
        policy = policies[function]
        # the configured models, in the stack's region; no other model, nowhere else
        assert allows(policy, invoke(HAIKU, region)) and allows(policy, invoke(TITAN, region))
        assert not allows(policy, invoke(HAIKU, elsewhere))
        assert not allows(policy, invoke("anthropic.claude-3-opus-20240229-v1:0", region))
        # the profile in the stack's region, and its model where it routes the call to
        assert allows(policy, invoke(NOVA_PROFILE, region))
        assert not allows(policy, invoke(NOVA_PROFILE, elsewhere))
        assert not allows(policy, invoke("eu.amazon.nova-micro-v1:0", region))  # another profile
        # the profile's model only through the profile, never called directly
        assert not allows(policy, invoke("amazon.nova-micro-v1:0", region))
        assert not allows(policy, invoke("amazon.nova-micro-v1:0", PROFILE_DESTINATION))
        actions = {a for _, a, _ in policy.grants() if a.startswith("bedrock:")}
        assert actions == {"bedrock:InvokeModel"}
        assert {s.sid for s in bedrock_statements(policy)} == {
            "InvokeConfiguredBedrockModels",
            "InvokeConfiguredBedrockProfiles",
            "InvokeProfileModelsThroughConfiguredProfiles",
        }
    for function, policy in policies.items():
        if function not in CALLERS:  # the webhook, the sweep, the tools: no model at all
            assert bedrock_grants(policy) == set()
        assert all(resource != "*" for _, _, resource in policy.grants())


@pytest.mark.parametrize(
    ("models", "profiles"),
    [
        (12, 0),  # foundation models only: no profile statement
        (0, 5),  # profiles only: no foundation-model statement
        (9, 6),  # past the four (and two) slots the template once had
    ],
)
def test_any_number_of_models_and_profiles_is_granted_each_exactly(
    models: int, profiles: int
) -> None:
    model_ids = [f"vendor{i}.model-{i}-v1:0" for i in range(models)]
    profile_ids = [f"us.vendor{i}.routed-{i}-v1:0" for i in range(profiles)]
    parameters = {"Stage": "local", **template_parameters([*model_ids, *profile_ids])}
    with LocalStack(parameters=parameters) as local:
        policy = function_policies(_transform(parameters), local)["WorkerFunction"]
        region = local.region
    for model in model_ids:
        assert allows(policy, invoke(model, region)) and not allows(
            policy, invoke(model, "ap-south-1")
        )
    for profile in profile_ids:
        assert allows(policy, invoke(profile, region))
        assert not allows(policy, invoke(profile.split(".", 1)[1], region))  # its model, directly
    assert not allows(policy, invoke("vendor99.model-99-v1:0", region))
    assert not allows(policy, invoke("us.vendor99.routed-99-v1:0", region))
    sids = {s.sid for s in bedrock_statements(policy)}
    assert ("InvokeConfiguredBedrockModels" in sids) == bool(models)
    assert ("InvokeConfiguredBedrockProfiles" in sids) == bool(profiles)
    grants = bedrock_grants(policy)
    assert len([g for g in grants if ":foundation-model/vendor" in g]) == models
    assert len([g for g in grants if ":inference-profile/" in g]) == profiles


def test_an_id_cannot_widen_the_grant() -> None:
    """The parameters admit only ids: no wildcard, no empty item, nothing past the id (a comma
    is only a separator), so no value turns into a broader ARN."""
    import re

    from infra.aws.cfn_template import load_template

    parameters = load_template()["Parameters"]
    for name, good, bad in (
        ("BedrockModelIds", f"{HAIKU},{TITAN}", ["*", f"{HAIKU},", f"{HAIKU},,{TITAN}", "a/b"]),
        (
            "BedrockInferenceProfileIds",
            f"{NOVA_PROFILE},eu.{HAIKU}",
            ["us.*", f"{HAIKU}", f"{NOVA_PROFILE},"],
        ),
    ):
        pattern = re.compile(parameters[name]["AllowedPattern"])
        assert pattern.fullmatch(good) and pattern.fullmatch("")
        assert not any(pattern.fullmatch(value) for value in bad), name


def test_without_bedrock_models_no_function_may_invoke_one() -> None:
    transformed = _transform({})
    with LocalStack() as default:
        assert not default.condition("UsesBedrock")
        policies = function_policies(transformed, default)
    assert all(bedrock_grants(policy) == set() for policy in policies.values())


def test_a_publish_and_a_turn_on_bedrock_need_exactly_the_granted_models(
    recorder: CallRecorder,
    stack: LocalStack,
    platforms: FakePlatforms,
    bedrock: FakeBedrockRuntime,
    policies: dict[str, Policy],
) -> None:
    runtime = install_runtime(
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
        )
    )
    bank = load_bank()
    config = bank.config.model_copy(
        update={
            "default_model": f"bedrock:{HAIKU}",
            "models": {LLMPurpose.MATCH_GUIDELINES: f"bedrock:{NOVA_PROFILE}"},
        }
    )
    with recorder.acting_as("ManagementFunction"):
        runtime.run(runtime.publish_agent(bank.model_copy(update={"config": config})))
    assert telegram_says(CHAT, "hi, what is the price of AAPL?", 1)["statusCode"] == 200
    messages = receive_all(stack)
    with recorder.acting_as("WorkerFunction"):
        response = invoke_worker(sqs_event(records_from_queue(messages)))

    assert response == {"batchItemFailures": []}
    session = load_session(runtime, session_id_for("bank", "telegram", f"tg:700100200:{CHAT}"))
    (reply,) = [e for e in session.events if e.source is EventSource.AGENT]
    trace = runtime.run(runtime.sessions.trace(session.id, reply.turn_id or ""))
    assert trace is not None and all(call["error"] is None for call in trace["llm_calls"])
    used = {
        request.resource
        for function in CALLERS
        for call, request in recorder.requests(function)
        if call.service == "bedrock"
    }
    assert {r.model_id for r in bedrock.converse_requests} == {HAIKU, NOVA_PROFILE}
    # Every call was allowed (the recorder refuses the others), and every grant was used.
    requests = [
        request
        for function in CALLERS
        for call, request in recorder.requests(function)
        if call.service == "bedrock"
    ]
    assert {r.resource for r in requests} == used
    for statement in bedrock_statements(policies["WorkerFunction"]):
        assert any(statement.allows(r) for r in requests), statement.sid


class Answer(BaseModel):
    ok: bool


async def test_a_model_that_is_not_configured_is_denied_with_what_to_grant(
    recorder: CallRecorder, bedrock: FakeBedrockRuntime
) -> None:
    opus = "anthropic.claude-3-opus-20240229-v1:0"
    with recorder.acting_as("WorkerFunction"):
        with pytest.raises(LLMError, match=r"refused model .*AccessDeniedException") as raised:
            await BedrockSchematicLLM().generate("ready?", Answer, model=opus)
        with pytest.raises(LLMError, match="AccessDeniedException"):
            await BedrockEmbedder("amazon.titan-embed-text-v1").embed(["hello"])

    assert f"bedrock:InvokeModel on {opus!r}" in str(raised.value)
    assert bedrock.converse_requests == [] and bedrock.invoke_requests == []  # refused by IAM
    denied = [request.resource for _, request in recorder.requests("WorkerFunction")]
    assert f"arn:aws:bedrock:{recorder.region}::foundation-model/{opus}" in denied
