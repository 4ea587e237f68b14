"""A model and a provider per purpose: `build_routed_llm()` (`infra.llm.routing.ModelRouter`) under
`engine.llm.TurnLLM`, each call reaching the real adapter of its model's provider — Bedrock on a
fake on the wire (`tests.fakes.bedrock_runtime`), OpenAI through the `openai` client against the
fake OpenAI server — and the embedder's provider chosen by its model id."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.agent_config import AgentConfig, LLMPurpose
from engine.llm import TurnLLM
from engine.trace import TurnTrace
from infra.llm.bedrock_embedder import BedrockEmbedder
from infra.llm.bedrock_llm import BedrockSchematicLLM
from infra.llm.factory import build_embedder, build_llm, build_routed_llm
from infra.llm.openai_embedder import OpenAIEmbedder
from infra.llm.routing import ModelRouter
from infra.offline import OfflineLLM
from tests.fakes.bedrock_runtime import FakeBedrockRuntime, ToolAnswer
from tests.fakes.openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[2]
NOVA = "amazon.nova-micro-v1:0"
HAIKU = "anthropic.claude-3-5-haiku-20241022-v1:0"
SETTINGS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "WAYPOINT_LLM_PROVIDER",
    "WAYPOINT_LLM_TIMEOUT",
    "WAYPOINT_LLM_MAX_TOKENS",
    "WAYPOINT_EMBEDDING_MODEL",
    "WAYPOINT_EMBEDDING_DIMENSIONS",
    "WAYPOINT_BEDROCK_REGION",
    "WAYPOINT_BEDROCK_ENDPOINT_URL",
)


class Answer(BaseModel):
    ok: bool


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")


@pytest.fixture
def bedrock() -> Iterator[FakeBedrockRuntime]:
    with FakeBedrockRuntime() as fake:
        fake.answer_with(lambda request: ToolAnswer({"ok": True}))
        yield fake


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def turn(llm: ModelRouter | object, config: AgentConfig) -> tuple[TurnLLM, TurnTrace]:
    trace = TurnTrace(turn_id="t1", session_id="s1", agent_id="a1", agent_version="1")
    return TurnLLM(llm, config, trace), trace  # type: ignore[arg-type]


async def test_matching_composing_and_tools_go_to_separate_models_and_providers(
    monkeypatch: pytest.MonkeyPatch,
    bedrock: FakeBedrockRuntime,
    openai_server: FakeOpenAIServer,
) -> None:
    openai_server.reset()
    openai_server.queue_chat(Reply({"ok": True}))
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "bedrock")  # the deployment's default
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    config = AgentConfig(
        default_model=HAIKU,  # no prefix: the default provider
        models={
            LLMPurpose.MATCH_GUIDELINES: f"bedrock:{NOVA}",
            LLMPurpose.COMPOSE: "openai:gpt-4o-mini",
        },
    )
    llm, trace = turn(build_routed_llm(), config)

    for purpose in (LLMPurpose.MATCH_GUIDELINES, LLMPurpose.CALL_TOOLS, LLMPurpose.COMPOSE):
        assert (await llm.generate(purpose, f"{purpose.value}?", Answer)).value.ok

    assert [r.model_id for r in bedrock.converse_requests] == [NOVA, HAIKU]
    assert [r.prompt for r in bedrock.converse_requests] == ["match_guidelines?", "call_tools?"]
    assert [r.model for r in openai_server.chat_requests] == ["gpt-4o-mini"]
    assert [(c.purpose, c.model) for c in trace.llm_calls] == [
        ("match_guidelines", NOVA),
        ("call_tools", HAIKU),
        ("compose", "gpt-4o-mini"),
    ]


async def test_a_provider_is_built_on_its_first_call_only(bedrock: FakeBedrockRuntime) -> None:
    router = build_routed_llm("bedrock")
    assert isinstance(router, ModelRouter) and router.providers_built == ["bedrock"]

    await router.generate("ready?", Answer, model=f"bedrock:{NOVA}")
    await router.generate("ready?", Answer, model=HAIKU)

    assert router.providers_built == ["bedrock"]  # no OpenAI client for an agent never routed there
    assert isinstance(router.adapter("bedrock"), BedrockSchematicLLM)


async def test_an_offline_deployment_answers_every_purpose_offline(
    bedrock: FakeBedrockRuntime,
) -> None:
    router = build_routed_llm("offline")

    assert router.route(f"bedrock:{NOVA}") == ("offline", NOVA)
    assert router.route("openai:gpt-4o") == ("offline", "gpt-4o")
    assert isinstance(router.adapter("offline"), OfflineLLM)
    assert bedrock.converse_requests == []


def test_the_bedrock_adapter_takes_its_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, bedrock: FakeBedrockRuntime
) -> None:
    monkeypatch.setenv("WAYPOINT_LLM_TIMEOUT", "12")
    monkeypatch.setenv("WAYPOINT_LLM_MAX_TOKENS", "800")
    monkeypatch.setenv("WAYPOINT_BEDROCK_REGION", "us-west-2")

    llm = build_llm("bedrock")

    assert isinstance(llm, BedrockSchematicLLM) and llm.region == "us-west-2"
    client = llm._connection.client()
    assert (client.meta.config.read_timeout, client.meta.region_name) == (12.0, "us-west-2")
    assert llm._max_tokens == 800


def test_the_embedding_model_id_chooses_the_embedding_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the deployment's default: openai
    monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", "bedrock:amazon.titan-embed-text-v2:0")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_DIMENSIONS", "512")

    embedder = build_embedder()

    assert isinstance(embedder, BedrockEmbedder)
    assert (embedder.model, embedder.dimensions) == ("amazon.titan-embed-text-v2:0", 512)
    monkeypatch.delenv("WAYPOINT_EMBEDDING_DIMENSIONS")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", "openai:text-embedding-3-large")
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "bedrock")
    assert isinstance(build_embedder(), OpenAIEmbedder)
    monkeypatch.delenv("WAYPOINT_EMBEDDING_MODEL")
    assert isinstance(build_embedder(), BedrockEmbedder)  # Titan v2 by default on Bedrock
    assert build_embedder().dimensions == 1024
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "offline")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", "bedrock:amazon.titan-embed-text-v2:0")
    assert not isinstance(build_embedder(), BedrockEmbedder)  # offline means offline


def test_importing_the_bedrock_adapters_creates_no_client_and_imports_no_openai() -> None:
    code = (
        "import sys\n"
        "import infra.llm.bedrock_llm, infra.llm.bedrock_embedder, infra.llm.routing\n"
        "from infra.llm.bedrock_llm import BedrockSchematicLLM\n"
        "BedrockSchematicLLM(region='us-east-1')\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
        "assert 'infra.aws.clients' not in sys.modules or "
        "not __import__('infra.aws.clients').aws.clients._clients\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
