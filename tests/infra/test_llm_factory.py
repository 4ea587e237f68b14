"""Choosing LLM / embedding providers from the environment (`infra.llm.factory`)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from engine.errors import LLMError, LLMTransientError
from engine.ports import Embedder, SchematicLLM
from infra.llm.factory import build_embedder, build_llm, resolve_provider
from infra.llm.openai_embedder import OpenAIEmbedder
from infra.llm.openai_llm import OpenAISchematicLLM
from tests.fakes.openai_server import FakeOpenAIServer, Hang, Reply

SETTINGS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "WAYPOINT_LLM_PROVIDER",
    "WAYPOINT_LLM_TIMEOUT",
    "WAYPOINT_EMBEDDING_MODEL",
    "WAYPOINT_EMBEDDING_DIMENSIONS",
)


class Answer(BaseModel):
    ok: bool


class StubOfflineLLM:
    async def generate(self, prompt, schema, *, model):  # pragma: no cover - never called
        raise NotImplementedError


class StubHashingEmbedder:
    dimensions = 384

    async def embed(self, texts):  # pragma: no cover - never called
        raise NotImplementedError


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def offline_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins for the offline providers, which other modules implement."""
    offline = types.ModuleType("infra.offline")
    offline.OfflineLLM = StubOfflineLLM  # type: ignore[attr-defined]
    embeddings = types.ModuleType("infra.embeddings")
    embeddings.HashingEmbedder = StubHashingEmbedder  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "infra.offline", offline)
    monkeypatch.setitem(sys.modules, "infra.embeddings", embeddings)


@pytest.fixture
def offline_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import` raise ImportError.
    monkeypatch.setitem(sys.modules, "infra.offline", None)
    monkeypatch.setitem(sys.modules, "infra.embeddings", None)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def test_without_a_key_the_provider_is_offline() -> None:
    assert resolve_provider() == "offline"


def test_an_api_key_selects_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    assert resolve_provider() == "openai"
    llm, embedder = build_llm(), build_embedder()
    assert isinstance(llm, OpenAISchematicLLM) and isinstance(llm, SchematicLLM)
    assert isinstance(embedder, OpenAIEmbedder) and isinstance(embedder, Embedder)


def test_an_explicit_provider_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "openai")

    assert resolve_provider("offline") == "offline"
    monkeypatch.setenv("WAYPOINT_LLM_PROVIDER", "Offline")
    assert resolve_provider() == "offline"


def test_an_unknown_provider_is_rejected_with_the_choices() -> None:
    with pytest.raises(
        LLMError, match=r"unknown LLM provider 'anthropic'.*openai, bedrock, offline"
    ):
        resolve_provider("anthropic")


@pytest.mark.usefixtures("offline_installed")
def test_offline_builds_the_offline_providers() -> None:
    llm = build_llm()
    embedder = build_embedder()

    assert isinstance(llm, StubOfflineLLM) and isinstance(llm, SchematicLLM)
    assert isinstance(embedder, StubHashingEmbedder) and isinstance(embedder, Embedder)


@pytest.mark.usefixtures("offline_missing")
def test_a_missing_offline_provider_says_how_to_get_one() -> None:
    with pytest.raises(LLMError, match=r"set OPENAI_API_KEY.*offline provider"):
        build_llm()
    with pytest.raises(LLMError, match=r"set OPENAI_API_KEY.*offline provider"):
        build_embedder()


async def test_openai_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer
) -> None:
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.queue_chat(Reply({"ok": True}))

    generation = await build_llm().generate("Ready?", Answer, model="gpt-4o-mini")

    assert generation.value == Answer(ok=True)
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_a_keyless_compatible_server_can_be_chosen_explicitly(
    monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer
) -> None:
    server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.queue_chat(Reply({"ok": True}))

    generation = await build_llm("openai").generate("Ready?", Answer, model="llama3")

    assert generation.value == Answer(ok=True)


async def test_the_request_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, server: FakeOpenAIServer
) -> None:
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("WAYPOINT_LLM_TIMEOUT", "0.2")
    server.queue_chat(Hang())

    with pytest.raises(LLMTransientError, match="timed out"):
        await build_llm().generate("Ready?", Answer, model="gpt-4o-mini")
    server.reset()


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_a_bad_timeout_is_rejected(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("WAYPOINT_LLM_TIMEOUT", value)

    with pytest.raises(LLMError, match="WAYPOINT_LLM_TIMEOUT must be a positive number"):
        build_llm()


def test_embedding_model_and_size_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_MODEL", "text-embedding-3-large")
    monkeypatch.setenv("WAYPOINT_EMBEDDING_DIMENSIONS", "256")

    embedder = build_embedder()

    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model, embedder.dimensions) == ("text-embedding-3-large", 256)
