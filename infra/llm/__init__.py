"""LLM and embedding adapters behind `engine.ports.SchematicLLM` / `Embedder`.

`build_routed_llm()` / `build_embedder()` pick the providers from the environment (see `factory`),
each call going to the provider its model id names (`routing`). Importing this package is cheap:
`openai` is imported only when an OpenAI client is first used, and no boto3 client is created
before a Bedrock call needs one.
"""

from infra.llm.bedrock_embedder import BedrockEmbedder
from infra.llm.bedrock_llm import BedrockSchematicLLM
from infra.llm.factory import build_embedder, build_llm, build_routed_llm, resolve_provider
from infra.llm.openai_embedder import OpenAIEmbedder
from infra.llm.openai_llm import OpenAISchematicLLM
from infra.llm.routing import ModelRouter

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
