"""`SchematicLLM` on Amazon Bedrock's Converse API (`bedrock-runtime`), through the function's IAM
role: no API key, the data staying in the account.

Structured output by forced tool use: the schema (the same JSON schema the OpenAI adapter sends,
strict-shaped when the schema allows it) is the `inputSchema` of one tool, and `toolChoice` forces
the model to call it; the call's input is validated into the schema's pydantic model by the same
code as an OpenAI answer (`infra.llm.answer`). What the model gets wrong is `LLMOutputInvalid`, so
`TurnLLM`'s one repair attempt covers it: a tool input that does not fit the schema, an answer cut
off at the token limit, and text instead of the tool call (accepted only when the text itself is
JSON that fits). A model that rejects a forced `toolChoice` (a ValidationException naming it) is
asked again with `toolChoice: auto` and an instruction to call the tool, and from then on.

Prompt caching: a prompt that marks its stable prefix (`engine.prompt_text.Prompt`) is sent as
that prefix, a `cachePoint` block and the rest, on the models and prefix lengths
`infra.llm.bedrock_cache.CachePolicy` allows. A request Bedrock refuses while it carries a cache
point (a ValidationException, or a refusal that names caching) is sent again without one, and the
model gets none from then on: a cache point may miss, never fail a call.

Errors map as in `infra.llm.bedrock_client`; retries, the repair, budgets and the trace are
`engine.llm.TurnLLM`'s, so this adapter makes one request per call (two on the fallback above).
boto3 is synchronous: each request runs in a worker thread, never blocking the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.errors import LLMOutputInvalid
from engine.ports import Generation, Usage
from engine.prompt_text import stable_chars
from infra.llm.answer import parse_answer, validate_answer
from infra.llm.bedrock_cache import CachePolicy, with_cache_point
from infra.llm.bedrock_client import TRANSIENT_CODES, BedrockConnection, map_bedrock_error
from infra.llm.openai_llm import json_schema_format

T = TypeVar("T", bound=BaseModel)

TOOL_DESCRIPTION = "Give your answer by calling this tool, its input exactly as the schema says."
AUTO_CHOICE_INSTRUCTIONS = (
    "Answer only by calling the tool {name} once, with input that matches its schema. "
    "Do not answer in text."
)
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_BLOCKED = frozenset({"guardrail_intervened", "content_filtered"})
log = logging.getLogger(__name__)


class _ToolChoiceRejected(Exception):
    """The model does not support a forced `toolChoice`."""


class _CachePointRejected(Exception):
    """Bedrock refused a request that carried a cache point (maybe for it)."""


class BedrockSchematicLLM:
    """Prompt + pydantic schema → validated object, through `bedrock-runtime` `Converse`.

    `model` is a Bedrock model id (`anthropic.claude-3-5-haiku-20241022-v1:0`), an inference
    profile id (`us.anthropic…`) or an ARN. `timeout` is each request's read timeout (sized to
    one generation within the turn); `max_tokens` caps the answer (the model's default when
    None); `client` injects a ready-made `bedrock-runtime` client."""

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout: float = 30.0,
        max_tokens: int | None = None,
        client: Any = None,
        caching: CachePolicy | None = None,
    ) -> None:
        self._connection = BedrockConnection(
            region=region, endpoint_url=endpoint_url, timeout=timeout, client=client
        )
        self._max_tokens = max_tokens
        self._caching = CachePolicy.from_env() if caching is None else caching
        self._auto_choice: set[str] = set()  # models that refused a forced toolChoice
        self._no_cache: set[str] = set()  # models that refused a request with a cache point

    @property
    def region(self) -> str:
        return self._connection.region

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]:
        """One structured generation. Raises `LLMTransientError`, `LLMOutputInvalid`, `LLMError`."""
        started = time.perf_counter()
        name = tool_name(schema)
        forced = model not in self._auto_choice
        caching = None if model in self._no_cache else self._caching
        suspect_cache_point = False
        while True:
            request = converse_request(
                prompt, schema, model, self._max_tokens, forced=forced, caching=caching
            )
            try:
                response = await self._converse(request, may_reject_choice=forced)
                break
            except _ToolChoiceRejected:
                self._auto_choice.add(model)
                forced = False
            except _CachePointRejected:
                # sent again without it: should Bedrock take that, the cache point was the trouble
                caching, suspect_cache_point = None, True
        if suspect_cache_point:
            self._no_cache.add(model)
            log.warning("Bedrock refused a cache point for model %s: none sent to it again", model)
        latency_ms = round((time.perf_counter() - started) * 1000, 2)
        value = read_tool_answer(response, schema, name)
        return Generation(
            value=value,
            usage=usage_of(response),
            model=model,
            latency_ms=latency_ms,
        )

    async def connect(self) -> None:
        """Create the client now, before a first request needs it (a Lambda container's init
        phase: `infra.runtime.Runtime.prepare_for_turns`)."""
        await asyncio.to_thread(self._connection.client)

    def forces_tool_choice(self, model: str) -> bool:
        """Whether calls to `model` force the answer tool (False after the model refused it)."""
        return model not in self._auto_choice

    def sends_cache_points(self, model: str) -> bool:
        """Whether requests to `model` may carry a cache point (False after it refused one)."""
        return model not in self._no_cache and self._caching.min_tokens(model) is not None

    async def _converse(
        self, request: dict[str, Any], *, may_reject_choice: bool = True
    ) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._connection.client()
        model = str(request["modelId"])
        try:
            response: dict[str, Any] = await asyncio.to_thread(client.converse, **request)
        except (BotoCoreError, ClientError) as exc:
            if may_reject_choice and _rejects_tool_choice(exc):
                raise _ToolChoiceRejected from exc
            if has_cache_point(request) and _may_reject_cache_point(exc):
                raise _CachePointRejected from exc
            raise map_bedrock_error(exc, model=model, region=self.region) from exc
        return response


def tool_name(schema: type[BaseModel]) -> str:
    """The answer tool's name: the schema's, in the characters Bedrock allows (64 at most)."""
    return _TOOL_NAME.sub("_", schema.__name__)[:64] or "answer"


def converse_request(
    prompt: str,
    schema: type[BaseModel],
    model: str,
    max_tokens: int | None = None,
    *,
    forced: bool = True,
    caching: CachePolicy | None = None,
) -> dict[str, Any]:
    """The `Converse` request: the prompt as one user message, the schema as the only tool,
    forced (`toolChoice.tool`) or, for models that refuse that, offered with an instruction.
    With `caching`, a cache point after the prompt's stable prefix where the policy allows one
    (the tool definition and the system text come before it: they count in the prefix)."""
    name = tool_name(schema)
    body = json_schema_format(schema)["json_schema"]["schema"]
    tool = {
        "toolSpec": {"name": name, "description": TOOL_DESCRIPTION, "inputSchema": {"json": body}}
    }
    system = None if forced else AUTO_CHOICE_INSTRUCTIONS.format(name=name)
    at = None
    if caching is not None and stable_chars(prompt):
        ahead = len(json.dumps(tool, ensure_ascii=False)) + len(system or "")
        at = caching.cache_point_at(prompt, model, ahead_chars=ahead)
    request: dict[str, Any] = {
        "modelId": model,
        "messages": [{"role": "user", "content": with_cache_point(str(prompt), at)}],
        "toolConfig": {
            "tools": [tool],
            "toolChoice": {"tool": {"name": name}} if forced else {"auto": {}},
        },
    }
    if system is not None:
        request["system"] = [{"text": system}]
    if max_tokens is not None:
        request["inferenceConfig"] = {"maxTokens": max_tokens}
    return request


def has_cache_point(request: dict[str, Any]) -> bool:
    """Whether a Converse request carries a cache point (in its messages)."""
    return any(
        "cachePoint" in block
        for message in request.get("messages", [])
        for block in message.get("content", [])
    )


def read_tool_answer(response: dict[str, Any], schema: type[T], name: str) -> T:
    """The answer tool's input, validated into `schema`. Raises `LLMOutputInvalid` (for the
    repair attempt) when the model stopped early, was blocked, or did not call the tool."""
    message = (response.get("output") or {}).get("message") or {}
    blocks: list[dict[str, Any]] = list(message.get("content") or [])
    text = "".join(str(block.get("text") or "") for block in blocks)
    stop = response.get("stopReason")
    if stop == "max_tokens":
        raise LLMOutputInvalid(
            "the answer was cut off at the output token limit; answer more briefly", raw=text
        )
    if stop in _BLOCKED:
        raise LLMOutputInvalid(f"the answer was blocked ({stop})", raw=text)
    uses = [block["toolUse"] for block in blocks if isinstance(block.get("toolUse"), dict)]
    use = next((u for u in uses if u.get("name") == name), uses[0] if uses else None)
    if use is None:
        if not text.strip():
            raise LLMOutputInvalid(f"the answer neither called the tool {name} nor said anything")
        try:
            return parse_answer(text, schema)  # JSON in text is still the answer
        except LLMOutputInvalid as exc:
            raise LLMOutputInvalid(
                f"the answer was text instead of a call of the tool {name}; call the tool {name} "
                "with your answer as its input",
                raw=exc.raw,
            ) from exc
    data = use.get("input")
    if isinstance(data, str):  # some models send the input as JSON text
        return parse_answer(data, schema)
    return validate_answer(data, schema, raw=json.dumps(data, ensure_ascii=False, default=str))


def usage_of(response: dict[str, Any]) -> Usage:
    """Bedrock's token counts: `inputTokens` excludes what was read from or written to the
    prompt cache, so the prompt's size is the sum of the three."""
    usage = response.get("usage") or {}
    read = int(usage.get("cacheReadInputTokens") or 0)
    write = int(usage.get("cacheWriteInputTokens") or 0)
    return Usage(
        prompt_tokens=int(usage.get("inputTokens") or 0) + read + write,
        completion_tokens=int(usage.get("outputTokens") or 0),
        cached_prompt_tokens=read,
        cache_write_tokens=write,
    )


def _may_reject_cache_point(exc: Exception) -> bool:
    """A refusal the cache point may have caused: any ValidationException (the request is sent
    again without it, which settles it), or another refusal that names caching ("You invoked an
    unsupported model or your request did not allow prompt caching")."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    error = response.get("Error", {})
    code = error.get("Code")
    if code in TRANSIENT_CODES:  # a busy model refused nothing: the turn retries it as it is
        return False
    return code == "ValidationException" or "cach" in str(error.get("Message", "")).lower()


def _rejects_tool_choice(exc: Exception) -> bool:
    """A ValidationException about `toolChoice`, e.g. "This model doesn't support the
    toolConfig.toolChoice.tool field. Remove toolConfig.toolChoice.tool and try again." """
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    error = response.get("Error", {})
    return (
        error.get("Code") == "ValidationException"
        and "toolchoice" in str(error.get("Message", "")).lower()
    )
