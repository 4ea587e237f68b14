"""LLM and embedding adapters behind `engine.ports.SchematicLLM` / `Embedder`.

`build_llm()` / `build_embedder()` pick a provider from the environment (see `factory`). Importing
this package is cheap: `openai` is imported only when an OpenAI client is first used.
"""

from infra.llm.factory import build_embedder, build_llm, resolve_provider
from infra.llm.openai_embedder import OpenAIEmbedder
from infra.llm.openai_llm import OpenAISchematicLLM

__all__ = [
    "OpenAIEmbedder",
    "OpenAISchematicLLM",
    "build_embedder",
    "build_llm",
    "resolve_provider",
]
