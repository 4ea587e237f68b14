"""`SchematicLLM` on OpenAI's chat completions API, or any server that speaks it.

Every call asks for structured output with the schema's strict JSON schema. Models (or servers)
that reject `json_schema` with a 400 about `response_format` get one retry in JSON mode, with the
schema described in a system message, and JSON mode is used for that model from then on. When the
400 says the schema itself is invalid, only that schema falls back, not every call to the model.

Retries, the repair attempt, budgets and tracing live in `engine.llm.TurnLLM`, so the client is
built with `max_retries=0`: this adapter makes exactly one request per call (two on fallback).
Importing this module does not import `openai` (see `infra.llm.openai_client`).

The request goes through the client's own `post` (its transport, authentication, timeouts and
errors), not `client.chat.completions.create`: that resource's modules import the streaming
helpers and the pagination and parsing types (≈ 26 modules, ≈ 35 ms of a cold start) for a call
that sends three fields, and its `ChatCompletion` answer is a model built on the first response
(≈ 10 ms) to read four of them. The answer is read from its JSON (`_content`, `_usage`).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from engine.errors import LLMOutputInvalid
from engine.ports import Generation, Usage
from infra.llm.answer import parse_answer
from infra.llm.openai_client import OpenAIConnection, map_openai_error, post_json
from infra.llm.strict_schema import NotStrictCompatible, pydantic_schema, strict_json_schema

if TYPE_CHECKING:
    from openai import AsyncOpenAI

T = TypeVar("T", bound=BaseModel)

JSON_MODE_INSTRUCTIONS = (
    "Answer with one JSON object and nothing else (no prose, no code fences). "
    "It must validate against this JSON schema, named {name}:\n{schema}"
)


class _ResponseFormatRejected(Exception):
    """The server refused `response_format: json_schema`; `schema_only` when it blamed the schema
    rather than the model's support for structured outputs."""

    def __init__(self, *, schema_only: bool) -> None:
        super().__init__()
        self.schema_only = schema_only


class OpenAISchematicLLM:
    """Prompt + pydantic schema → validated object, through `openai.AsyncOpenAI`.

    `api_key` / `base_url` default to the client's own environment variables (`OPENAI_API_KEY`,
    `OPENAI_BASE_URL`); `client` injects a ready-made `AsyncOpenAI` (its retries should be 0).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self._connection = OpenAIConnection(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0, client=client
        )
        # (model, None): the model lacks structured outputs; (model, schema): that schema failed.
        self._json_mode: set[tuple[str, str | None]] = set()

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        """One structured generation. Raises `LLMTransientError`, `LLMOutputInvalid`, `LLMError`."""
        started = time.perf_counter()
        response = await self._complete(prompt, schema, model)
        latency_ms = round((time.perf_counter() - started) * 1000, 2)
        value = parse_answer(_content(response), schema)
        return Generation(
            value=value,
            usage=_usage(response.get("usage")),
            model=response.get("model") or model,
            latency_ms=latency_ms,
        )

    async def connect(self) -> None:
        """Import `openai` and create the running loop's client now, before a first request
        needs it (a Lambda container's init phase: `infra.runtime.Runtime.prepare_for_turns`)."""
        self._connection.client()

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (see `OpenAIConnection.aclose`)."""
        await self._connection.aclose()

    def uses_json_mode(self, model: str, schema: type[BaseModel] | None = None) -> bool:
        """Whether calls to `model` (with `schema`) fell back to JSON mode after a rejection."""
        return (model, None) in self._json_mode or (
            schema is not None and (model, schema.__name__) in self._json_mode
        )

    async def _complete(self, prompt: str, schema: type[BaseModel], model: str) -> dict[str, Any]:
        if not self.uses_json_mode(model, schema):
            try:
                return await self._create(
                    model,
                    [{"role": "user", "content": prompt}],
                    json_schema_format(schema),
                    may_reject_format=True,
                )
            except _ResponseFormatRejected as rejected:
                self._json_mode.add((model, schema.__name__ if rejected.schema_only else None))
        return await self._create(
            model, json_mode_messages(prompt, schema), {"type": "json_object"}
        )

    async def _create(
        self,
        model: str,
        messages: list[dict[str, str]],
        response_format: dict[str, Any],
        *,
        may_reject_format: bool = False,
    ) -> dict[str, Any]:
        """One chat completion; its answer as the server sent it (a JSON object)."""
        client = self._connection.client()  # imports openai on first use
        import openai

        try:
            answer = await post_json(
                client,
                "/chat/completions",
                {"model": model, "messages": messages, "response_format": response_format},
            )
        except openai.OpenAIError as exc:
            rejected = _response_format_rejection(exc) if may_reject_format else None
            if rejected is not None:
                raise rejected from exc
            raise map_openai_error(
                exc, model=model, base_url=self._connection.described_base_url
            ) from exc
        if not isinstance(answer, dict):
            raise LLMOutputInvalid(f"the response was not a JSON object: {str(answer)[:200]}")
        return answer


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The `response_format` for structured outputs: strict when the schema allows it."""
    try:
        body, strict = strict_json_schema(schema), True
    except NotStrictCompatible:
        # Still constrained, just not guaranteed: validation and the repair attempt cover the rest.
        body, strict = pydantic_schema(schema), False
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": body, "strict": strict},
    }


def json_mode_messages(prompt: str, schema: type[BaseModel]) -> list[dict[str, str]]:
    """JSON mode only promises JSON, so the schema goes into a system message."""
    body = json_schema_format(schema)["json_schema"]["schema"]
    instructions = JSON_MODE_INSTRUCTIONS.format(
        name=schema.__name__, schema=json.dumps(body, separators=(",", ":"))
    )
    return [{"role": "system", "content": instructions}, {"role": "user", "content": prompt}]


def _response_format_rejection(exc: Exception) -> _ResponseFormatRejected | None:
    """A 400 about `response_format` / `json_schema`, e.g. "'response_format' of type
    'json_schema' is not supported with this model" or "Invalid schema for response_format 'X'"."""
    import openai

    if not isinstance(exc, openai.BadRequestError):
        return None
    text = f"{exc.param or ''} {exc.message}".lower()
    if "response_format" not in text and "json_schema" not in text:
        return None
    return _ResponseFormatRejected(schema_only="invalid schema" in text)


def _content(response: dict[str, Any]) -> str:
    """The answer's text; refusals and truncation are invalid output (the repair may help)."""
    choices = response.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise LLMOutputInvalid("the response contained no choices")
    choice = choices[0]
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    refusal = message.get("refusal")
    if refusal:
        raise LLMOutputInvalid(f"the model refused to answer: {refusal}", raw=str(refusal))
    content = message.get("content") or ""
    if not isinstance(content, str):
        raise LLMOutputInvalid(f"the answer was not text: {str(content)[:200]}")
    if choice.get("finish_reason") == "length":
        raise LLMOutputInvalid(
            "the answer was cut off at the output token limit; answer more briefly", raw=content
        )
    return content


def _usage(usage: Any) -> Usage:
    """Tokens of the answer: prompt, completion, and the prompt tokens OpenAI's prompt cache
    served (`prompt_tokens_details.cached_tokens`; absent on servers without a cache)."""
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(cached or 0),
    )
