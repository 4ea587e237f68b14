"""One `SchematicLLM` over several providers: each call goes to the adapter of its model id's
provider (`engine.agent_config.ModelRef`: `bedrock:anthropic.claude-…`, `openai:gpt-4o-mini`),
ids without a prefix to the deployment's default provider.

`TurnLLM` resolves the model per purpose (`AgentConfig.models`); this router only reads the
prefix, so matching can run on a small model on Bedrock while composing runs on OpenAI, in one
turn. Adapters are built on first use (`build`, normally `infra.llm.factory.build_llm`): a
deployment that never routes to OpenAI never imports `openai`.

When the default provider is `offline` (no key, or `WAYPOINT_LLM_PROVIDER=offline`), every call
is answered offline whatever its prefix: conversation tests, `waypoint chat` and the local stack
run an agent routed to Bedrock without AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from engine.agent_config import ModelRef
from engine.ports import Generation, SchematicLLM

T = TypeVar("T", bound=BaseModel)


class ModelRouter:
    """`SchematicLLM` that sends each call to its model's provider's adapter."""

    def __init__(
        self,
        default_provider: str,
        build: Callable[[str], SchematicLLM],
        adapters: dict[str, SchematicLLM] | None = None,
    ) -> None:
        self.default_provider = default_provider
        self._build = build
        self._adapters: dict[str, SchematicLLM] = dict(adapters or {})

    def route(self, model_id: str) -> tuple[str, str]:
        """(provider, the model id that provider is given) for `model_id`."""
        ref = ModelRef.parse(model_id)
        if self.default_provider == "offline" or ref.provider is None:
            return self.default_provider, ref.model
        return ref.provider, ref.model

    @property
    def providers_built(self) -> list[str]:
        """The providers whose adapters exist so far (built on their first call)."""
        return list(self._adapters)

    def adapter(self, provider: str) -> SchematicLLM:
        """The adapter of `provider`, built on first use."""
        adapter = self._adapters.get(provider)
        if adapter is None:
            adapter = self._adapters[provider] = self._build(provider)
        return adapter

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        provider, routed = self.route(model)
        return await self.adapter(provider).generate(prompt, schema, model=routed)

    async def connect(self) -> None:
        """Build and connect the default provider's adapter now (a Lambda container's init
        phase); others connect on their first call."""
        connect = getattr(self.adapter(self.default_provider), "connect", None)
        if connect is not None:
            await connect()

    async def aclose(self) -> None:
        """Close the running loop's clients of the adapters built so far."""
        for adapter in list(self._adapters.values()):
            close = getattr(adapter, "aclose", None)
            if close is not None:
                await close()
