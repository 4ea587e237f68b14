"""Model ids per purpose (`AgentConfig.models`, `ModelRef`) and the checks `waypoint validate`
runs on them (`engine.validation.models`): each problem names the setting to fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.agent_config import AgentConfig, LLMPurpose, ModelRef
from engine.authoring.agent_builder import Agent
from engine.errors import InvalidAgentDefinition
from engine.validation.agent import problems
from engine.validation.models import model_id_problem


@pytest.mark.parametrize(
    ("model_id", "provider", "model"),
    [
        ("gpt-4o-mini", None, "gpt-4o-mini"),
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        (
            "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0",
            "bedrock",
            "anthropic.claude-3-5-haiku-20241022-v1:0",
        ),
        ("Bedrock:amazon.nova-lite-v1:0", "bedrock", "amazon.nova-lite-v1:0"),
        # ids with colons of their own are not prefixed
        (
            "anthropic.claude-3-5-haiku-20241022-v1:0",
            None,
            "anthropic.claude-3-5-haiku-20241022-v1:0",
        ),
        ("llama3.1:8b", None, "llama3.1:8b"),
        ("mistral:7b", None, "mistral:7b"),
        ("offline:anything", "offline", "anything"),
    ],
)
def test_a_model_id_names_its_provider_only_by_a_known_prefix(
    model_id: str, provider: str | None, model: str
) -> None:
    assert ModelRef.parse(model_id) == ModelRef(provider, model)


@pytest.mark.parametrize(
    "model_id",
    [
        "gpt-4o-mini",
        "openai:gpt-4o-mini",
        "mistral:7b",
        "llama3.1:8b",
        "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0",
        "bedrock:us.anthropic.claude-3-5-haiku-20241022-v1:0",
        "bedrock:amazon.nova-micro-v1:0",
        "bedrock:arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-sonnet-20240620-v1:0",
    ],
)
def test_well_formed_model_ids_pass(model_id: str) -> None:
    assert model_id_problem(model_id) is None


@pytest.mark.parametrize(
    ("model_id", "says"),
    [
        ("bedrok:anthropic.claude-3-5-haiku-20241022-v1:0", "did you mean 'bedrock:'?"),
        ("OpenAl:gpt-4o", "did you mean 'openai:'?"),
        ("anthropic:claude-3-5-haiku", "Claude runs on Bedrock: bedrock:anthropic.claude-"),
        ("ollama:llama3", "openai:<model> with OPENAI_BASE_URL"),
        ("bedrock:", "names no model after 'bedrock:'"),
        ("bedrock:Claude 3 Haiku", "contains spaces"),
        ("bedrock:claude-3-haiku", "is not a Bedrock model id"),
        ("", "is empty"),
    ],
)
def test_malformed_model_ids_say_what_is_wrong(model_id: str, says: str) -> None:
    problem = model_id_problem(model_id)
    assert problem is not None and says in problem


def agent(config: AgentConfig) -> Agent:
    built = Agent(id="routing", name="Routing", config=config)
    built.create_guideline("the customer says hello", "greet them")
    return built


def test_each_routing_problem_names_the_purpose_it_is_set_for() -> None:
    config = AgentConfig(
        default_model="gpt-4o-mini",
        models={
            LLMPurpose.MATCH_GUIDELINES: "bedrock:amazon.nova-micro-v1:0",
            LLMPurpose.COMPOSE: "bedrok:anthropic.claude-3-5-sonnet-20240620-v1:0",
            LLMPurpose.CALL_TOOLS: "bedrock:",
        },
    )

    with pytest.raises(InvalidAgentDefinition) as raised:
        agent(config).build()

    assert [p for p in raised.value.problems if "agent.config" in p] == [
        "agent.config.models.compose: unknown provider 'bedrok' in "
        "'bedrok:anthropic.claude-3-5-sonnet-20240620-v1:0' (providers: openai, bedrock, "
        "offline); did you mean 'bedrock:'?",
        "agent.config.models.call_tools: 'bedrock:' names no model after 'bedrock:'",
    ]


def test_an_agent_routed_to_several_providers_is_valid() -> None:
    config = AgentConfig(
        default_model="openai:gpt-4o-mini",
        models={
            LLMPurpose.MATCH_GUIDELINES: "bedrock:amazon.nova-micro-v1:0",
            LLMPurpose.SELECT_JOURNEY_NODE: "bedrock:us.anthropic.claude-3-5-haiku-20241022-v1:0",
            LLMPurpose.COMPOSE: "gpt-4o",
        },
    )

    snapshot = agent(config).build()

    assert problems(snapshot) == []
    assert (
        snapshot.config.model_for(LLMPurpose.MATCH_GUIDELINES) == "bedrock:amazon.nova-micro-v1:0"
    )
    assert snapshot.config.model_for(LLMPurpose.CALL_TOOLS) == "openai:gpt-4o-mini"


def test_a_purpose_that_does_not_exist_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"models\.matching"):
        AgentConfig.model_validate({"models": {"matching": "gpt-4o-mini"}})
