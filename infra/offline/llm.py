"""`OfflineLLM`: the `SchematicLLM` port answered by heuristics, with no key and no network."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from engine.compose import CannedChoice, ComposedReply
from engine.errors import LLMError, LLMOutputInvalid
from engine.matching.guidelines import (
    CustomerDependentBatch,
    DisambiguationVerdict,
    GuidelineMatchBatch,
)
from engine.matching.journey_answer import JourneyNodeSelection
from engine.ports import Generation, Usage
from engine.tools.calls import ToolCallPlan
from infra.offline.compose import choose_canned, compose_reply
from infra.offline.english_only import english_only, foreign_language
from infra.offline.journeys import select_node
from infra.offline.matching import disambiguate, match_customer_dependent, match_guidelines
from infra.offline.tools import plan_tool_calls

T = TypeVar("T", bound=BaseModel)

MODEL_NAME = "offline-heuristic"

Responder = Callable[[str], BaseModel]

RESPONDERS: dict[type[BaseModel], Responder] = {
    GuidelineMatchBatch: match_guidelines,
    CustomerDependentBatch: match_customer_dependent,
    DisambiguationVerdict: disambiguate,
    JourneyNodeSelection: select_node,
    ToolCallPlan: plan_tool_calls,
    ComposedReply: compose_reply,
    CannedChoice: choose_canned,
}


def estimate_tokens(text: str) -> int:
    """About four characters per token — an estimate, there is no tokenizer here."""
    return max(1, len(text) // 4)


class OfflineLLM:
    """Answers every schema the engine asks for by reading the engine's own prompt formats.

    A heuristic for demos and tests, not a model: see the `infra.offline` docstring for what it
    does and where it stops. Deterministic: the same prompt always gets the same answer. The
    `model` argument is ignored; generations report the model `offline-heuristic`.
    """

    model = MODEL_NAME

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        responder = RESPONDERS.get(schema)
        if responder is None:
            known = ", ".join(s.__name__ for s in RESPONDERS)
            raise LLMError(
                f"the offline provider cannot answer {schema.__name__}: it knows only the engine's "
                f"schemas ({known}); use a real model (set OPENAI_API_KEY) for other prompts"
            )
        started = time.perf_counter()
        foreign = foreign_language(prompt)
        try:
            if foreign is not None:  # it reads English only: it says so and decides nothing
                answer = english_only(prompt, schema, foreign)
            else:
                answer = responder(prompt)
        except LLMError:
            raise
        except Exception as exc:  # a heuristic's bug must not lose the customer's turn
            raise LLMError(
                f"the offline provider failed on a {schema.__name__} prompt: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        value = _as_schema(answer, schema)
        latency_ms = round((time.perf_counter() - started) * 1000, 3)
        usage = Usage(
            prompt_tokens=estimate_tokens(prompt),
            completion_tokens=estimate_tokens(value.model_dump_json()),
        )
        return Generation(value=value, usage=usage, model=MODEL_NAME, latency_ms=latency_ms)


def _as_schema(answer: Any, schema: type[T]) -> T:
    if isinstance(answer, schema):
        return answer
    try:  # a subclass of the schema, or a look-alike: validate like a real answer would be
        return schema.model_validate(cast(BaseModel, answer).model_dump())
    except (ValidationError, AttributeError) as exc:  # pragma: no cover - a bug in a responder
        raise LLMOutputInvalid(f"offline answer does not fit {schema.__name__}: {exc}") from exc
