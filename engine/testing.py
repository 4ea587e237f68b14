"""Test doubles for the engine's ports, usable by Waypoint's tests and by users testing their agents.

`ScriptedLLM` answers each schema with a handler you register; it checks what it was asked (an
unexpected schema fails loudly) and validates every answer against the schema, like a real adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import LLMError, LLMOutputInvalid
from engine.ports import Generation, Usage

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class RecordedCall:
    prompt: str
    schema: type[BaseModel]
    model: str

    @property
    def schema_name(self) -> str:
        return self.schema.__name__


Answer = BaseModel | dict[str, Any] | str | Exception
Handler = Callable[[str], Answer]


class ScriptedLLM:
    """A fake `SchematicLLM`: `llm.on(SchemaClass, handler)` where handler(prompt) returns a model,
    a dict, a JSON string or an exception to raise. Register a list to answer in order."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        self._otherwise: dict[str, Handler] = {}
        self.calls: list[RecordedCall] = []

    def on(self, schema: type[BaseModel] | str, *handlers: Handler | Answer) -> ScriptedLLM:
        name = schema if isinstance(schema, str) else schema.__name__
        queue = self._handlers.setdefault(name, [])
        for h in handlers:
            queue.append(h if callable(h) and not isinstance(h, BaseModel) else _constant(h))
        return self

    def otherwise(self, schema: type[BaseModel] | str, answer: Handler | Answer) -> ScriptedLLM:
        """Answer `schema` with `answer` whenever the test scripts nothing for it (`on`): a call
        the test does not pin, such as the secret reading of an agent that declares a secret
        (`SecretsSaid`, answered `{"values": []}`), without failing it."""
        name = schema if isinstance(schema, str) else schema.__name__
        if callable(answer) and not isinstance(answer, BaseModel):
            self._otherwise[name] = answer
        else:
            self._otherwise[name] = _constant(answer)
        return self

    def calls_for(self, schema: type[BaseModel] | str) -> list[RecordedCall]:
        name = schema if isinstance(schema, str) else schema.__name__
        return [c for c in self.calls if c.schema_name == name]

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        self.calls.append(RecordedCall(prompt, schema, model))
        queue = self._handlers.get(schema.__name__)
        fallback = self._otherwise.get(schema.__name__)
        if queue:
            handler = queue[0] if len(queue) == 1 else queue.pop(0)
        elif fallback is not None:
            handler = fallback
        else:
            raise AssertionError(f"ScriptedLLM: unexpected call for schema {schema.__name__}")
        answer = handler(prompt)
        if isinstance(answer, Exception):
            raise answer
        value = _validate(schema, answer)
        return Generation(
            value=value,
            usage=Usage(prompt_tokens=len(prompt) // 4, completion_tokens=20),
            model=model,
            latency_ms=0.0,
        )


def _constant(answer: Answer) -> Handler:
    return lambda _prompt: answer


def _validate(schema: type[T], answer: Answer) -> T:
    try:
        if isinstance(answer, schema):
            return answer
        if isinstance(answer, BaseModel):
            return schema.model_validate(answer.model_dump())
        if isinstance(answer, str):
            return schema.model_validate_json(answer)
        return schema.model_validate(answer)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise LLMOutputInvalid(f"scripted answer does not fit {schema.__name__}: {exc}") from exc
    except TypeError as exc:  # pragma: no cover - a broken script, not a model answer
        raise LLMError(str(exc)) from exc
