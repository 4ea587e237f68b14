"""Choosing the LLM and embedding providers from the environment.

Provider: the `provider` argument, else `WAYPOINT_LLM_PROVIDER`, else "openai" when
`OPENAI_API_KEY` is set, else "offline" (no key, no network). That is the deployment's default:
`build_routed_llm()` sends each call to the provider its model id names (`bedrock:…`, `openai:…`,
`engine.agent_config.ModelRef`), ids without a prefix to the default (`infra.llm.routing`).
Settings:

| variable                        | used by        | meaning                                          |
|---------------------------------|----------------|--------------------------------------------------|
| `OPENAI_API_KEY`                | openai         | API key (optional for a keyless compatible URL)  |
| `OPENAI_BASE_URL`               | openai         | any OpenAI-compatible server, e.g. .../v1        |
| `WAYPOINT_BEDROCK_REGION`       | bedrock        | Bedrock's region (default: the function's)       |
| `WAYPOINT_BEDROCK_ENDPOINT_URL` | bedrock        | a VPC endpoint's URL (default: the public one)   |
| `WAYPOINT_LLM_TIMEOUT`          | openai, bedrock| seconds per request (default 30)                 |
| `WAYPOINT_LLM_MAX_TOKENS`       | bedrock        | cap on an answer's tokens (default: the model's) |
| `WAYPOINT_BEDROCK_CACHE_MODELS` | bedrock        | models that take cache points, `pattern=min_tok` |
|                                 |                | items, `defaults`, `none` (infra.llm.bedrock_    |
|                                 |                | cache; default: AWS's list)                      |
| `WAYPOINT_EMBEDDING_MODEL`      | openai, bedrock| `[provider:]model`; default text-embedding-3-    |
|                                 |                | small (openai), amazon.titan-embed-text-v2:0     |
| `WAYPOINT_EMBEDDING_DIMENSIONS` | openai, bedrock| shortened vectors (text-embedding-3, Titan v2)   |

Providers are imported only when chosen, so building the offline provider never imports `openai`
(nor creates a boto3 client).
"""

from __future__ import annotations

import os
from typing import Literal, TypeVar, cast

from pydantic import BaseModel

from engine.agent_config import MODEL_PROVIDERS, ModelRef
from engine.errors import LLMError
from engine.ports import Embedder, Generation, SchematicLLM

T = TypeVar("T", bound=BaseModel)

Provider = Literal["openai", "bedrock", "offline"]
PROVIDERS = cast(tuple[Provider, ...], MODEL_PROVIDERS)
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
    chosen = resolve_provider(provider)
    if chosen == "openai":
        from infra.llm.openai_llm import OpenAISchematicLLM

        return OpenAISchematicLLM(timeout=_float_env("WAYPOINT_LLM_TIMEOUT", DEFAULT_TIMEOUT))
    if chosen == "bedrock":
        from infra.llm.bedrock_llm import BedrockSchematicLLM

        return BedrockSchematicLLM(
            timeout=_float_env("WAYPOINT_LLM_TIMEOUT", DEFAULT_TIMEOUT),
            max_tokens=_int_env("WAYPOINT_LLM_MAX_TOKENS"),
        )
    try:
        from infra.offline import OfflineLLM
    except ImportError as exc:
        raise LLMError(
            "no LLM provider available: set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible "
            "server) to use OpenAI, WAYPOINT_LLM_PROVIDER=bedrock to use Amazon Bedrock, or "
            "install the offline provider (infra.offline)"
        ) from exc
    return cast(SchematicLLM, OfflineLLM())


def build_routed_llm(provider: str | None = None) -> SchematicLLM:
    """A `SchematicLLM` that sends each call to the provider its model id names, ids without
    a prefix to `provider` (or the one the environment selects): what a deployment runs."""
    from infra.llm.routing import ModelRouter

    default = resolve_provider(provider)
    return ModelRouter(default, build_llm, {default: build_llm(default)})


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
    """The `Embedder` for `provider` (or the one the environment selects); a provider prefix
    on `WAYPOINT_EMBEDDING_MODEL` (`bedrock:amazon.titan-embed-text-v2:0`) chooses it, unless
    the deployment is offline."""
    chosen = resolve_provider(provider)
    ref = ModelRef.parse(os.environ.get("WAYPOINT_EMBEDDING_MODEL") or "")
    if chosen != "offline" and ref.provider is not None:
        chosen = resolve_provider(ref.provider)
    if chosen == "openai":
        from infra.llm.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            model=ref.model or DEFAULT_EMBEDDING_MODEL,
            dimensions=_int_env("WAYPOINT_EMBEDDING_DIMENSIONS"),
            timeout=_float_env("WAYPOINT_LLM_TIMEOUT", DEFAULT_TIMEOUT),
        )
    if chosen == "bedrock":
        from infra.llm.bedrock_embedder import DEFAULT_MODEL, BedrockEmbedder

        return BedrockEmbedder(
            model=ref.model or DEFAULT_MODEL,
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
