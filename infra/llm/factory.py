"""Choosing the LLM and embedding providers from the environment.

Provider: the `provider` argument, else `WAYPOINT_LLM_PROVIDER`, else "openai" when
`OPENAI_API_KEY` is set, else "offline" (no key, no network). Settings:

| variable                        | used by       | meaning                                         |
|---------------------------------|---------------|-------------------------------------------------|
| `OPENAI_API_KEY`                | openai        | API key (optional for a keyless compatible URL) |
| `OPENAI_BASE_URL`               | openai        | any OpenAI-compatible server, e.g. .../v1       |
| `WAYPOINT_LLM_TIMEOUT`          | openai        | seconds per request (default 30)                |
| `WAYPOINT_EMBEDDING_MODEL`      | openai        | default text-embedding-3-small                  |
| `WAYPOINT_EMBEDDING_DIMENSIONS` | openai        | shortened vectors (text-embedding-3 models)     |

Providers are imported only when chosen, so building the offline provider never imports `openai`.
"""

from __future__ import annotations

import os
from typing import Literal, TypeVar, cast

from pydantic import BaseModel

from engine.errors import LLMError
from engine.ports import Embedder, Generation, SchematicLLM

T = TypeVar("T", bound=BaseModel)

Provider = Literal["openai", "offline"]
PROVIDERS: tuple[Provider, ...] = ("openai", "offline")
DEFAULT_TIMEOUT = 30.0
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


def resolve_provider(provider: str | None = None) -> Provider:
    """The provider to use; see the module docstring for the order of precedence."""
    chosen = provider or os.environ.get("WAYPOINT_LLM_PROVIDER") or None
    if chosen is None:
        return "openai" if os.environ.get("OPENAI_API_KEY") else "offline"
    chosen = chosen.strip().lower()
    if chosen not in PROVIDERS:
        raise LLMError(f"unknown LLM provider {chosen!r}; use one of: {', '.join(PROVIDERS)}")
    return chosen


def build_llm(provider: str | None = None) -> SchematicLLM:
    """The `SchematicLLM` adapter for `provider` (or the one the environment selects)."""
    if resolve_provider(provider) == "openai":
        from infra.llm.openai_llm import OpenAISchematicLLM

        return OpenAISchematicLLM(timeout=_float_env("WAYPOINT_LLM_TIMEOUT", DEFAULT_TIMEOUT))
    try:
        from infra.offline import OfflineLLM
    except ImportError as exc:
        raise LLMError(
            "no LLM provider available: set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible "
            "server) to use OpenAI, or install the offline provider (infra.offline)"
        ) from exc
    return cast(SchematicLLM, OfflineLLM())


class OfflinePredictor:
    """The predictor of speculative turns (`EngineDeps.predictor`, `engine.stages.speculation`):
    the offline model, which answers from the prompt itself in about a millisecond. Imported on
    its first prediction, so deployments whose agents never speculate do not load it."""

    def __init__(self) -> None:
        self._model: SchematicLLM | None = None

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        if self._model is None:
            from infra.offline import OfflineLLM

            self._model = cast(SchematicLLM, OfflineLLM())
        return await self._model.generate(prompt, schema, model=model)


def build_embedder(provider: str | None = None) -> Embedder:
    """The `Embedder` for `provider` (or the one the environment selects)."""
    if resolve_provider(provider) == "openai":
        from infra.llm.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            model=os.environ.get("WAYPOINT_EMBEDDING_MODEL") or DEFAULT_EMBEDDING_MODEL,
            dimensions=_int_env("WAYPOINT_EMBEDDING_DIMENSIONS"),
            timeout=_float_env("WAYPOINT_LLM_TIMEOUT", DEFAULT_TIMEOUT),
        )
    try:
        from infra.embeddings import HashingEmbedder
    except ImportError as exc:
        raise LLMError(
            "no embedding provider available: set OPENAI_API_KEY to use OpenAI embeddings, "
            "or install the offline provider (infra.embeddings)"
        ) from exc
    return cast(Embedder, HashingEmbedder())


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise LLMError(f"{name} must be a positive number of seconds, got {raw!r}")
    return value


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise LLMError(f"{name} must be a positive integer, got {raw!r}")
    return value
