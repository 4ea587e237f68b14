"""LLM and embedding adapters behind `engine.ports.SchematicLLM` / `Embedder`.

`build_routed_llm()` / `build_embedder()` pick the providers from the environment (see `factory`),
each call going to the provider its model id names (`routing`). Importing this package is cheap:
`openai` is imported only when an OpenAI client is first used, and no boto3 client is created
before a Bedrock call needs one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy_names import lazy_names

if TYPE_CHECKING:
    from infra.llm.bedrock_embedder import BedrockEmbedder
    from infra.llm.bedrock_llm import BedrockSchematicLLM
    from infra.llm.factory import build_embedder, build_llm, build_routed_llm, resolve_provider
    from infra.llm.openai_embedder import OpenAIEmbedder
    from infra.llm.openai_llm import OpenAISchematicLLM
    from infra.llm.routing import ModelRouter

# Each name from its module on first use (PEP 562): a submodule (`infra.llm.bedrock_client`,
# read by `waypoint validate` for the template's parameters) is imported without the adapters
# and numpy — 190 ms of every such CLI command's start.
_HOMES = {
    "BedrockEmbedder": "infra.llm.bedrock_embedder",
    "BedrockSchematicLLM": "infra.llm.bedrock_llm",
    "ModelRouter": "infra.llm.routing",
    "OpenAIEmbedder": "infra.llm.openai_embedder",
    "OpenAISchematicLLM": "infra.llm.openai_llm",
    "build_embedder": "infra.llm.factory",
    "build_llm": "infra.llm.factory",
    "build_routed_llm": "infra.llm.factory",
    "resolve_provider": "infra.llm.factory",
}


__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())


__all__ = [
    "BedrockEmbedder",
    "BedrockSchematicLLM",
    "ModelRouter",
    "OpenAIEmbedder",
    "OpenAISchematicLLM",
    "build_embedder",
    "build_llm",
    "build_routed_llm",
    "resolve_provider",
]
