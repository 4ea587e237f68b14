"""A fake Amazon Bedrock runtime under real boto3 `bedrock-runtime` clients, without a network.

`FakeBedrockRuntime` hooks the `before-send` event of the process's shared botocore session
(`infra.aws.clients.shared_session`), so every `bedrock-runtime` client the adapters build while it
is installed — with their own timeouts and retry settings — sends to it: botocore serializes each
request exactly as for AWS (the Converse / InvokeModel REST-JSON bodies, signed), the fake reads
that wire request and answers with an HTTP response botocore parses exactly as AWS's, error codes
and all. Requests are recorded (`converse_requests`, `invoke_requests`). Under moto's in-process
mock (the local stack), point the clients elsewhere (`WAYPOINT_BEDROCK_ENDPOINT_URL`, as a VPC
endpoint would): moto's own `before-send` handler runs too, and fails requests to AWS hosts it
does not implement.

Converse answers come from a script (`queue(...)`: one behavior per request) and, when it is
empty, from `answer_with(fn)` (the request → a behavior); InvokeModel (Titan embeddings) answers
with a deterministic vector per text, deliberately not unit-length, unless `queue_invoke(...)`
scripted errors.

    with FakeBedrockRuntime() as fake:
        fake.queue(throttled(), ToolAnswer({"applies": True}))
        llm = BedrockSchematicLLM(region="us-east-1")
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError


@dataclass(frozen=True)
class ToolAnswer:
    """The model calls the requested tool with `input` (a dict, or a string as some models send)."""

    input: Any
    input_tokens: int = 120
    output_tokens: int = 30
    cache_read: int | None = None
    cache_write: int | None = None
    tool_name: str | None = None  # None: the tool the request offered


@dataclass(frozen=True)
class TextAnswer:
    """The model answers in text instead of calling the tool."""

    text: str
    stop_reason: str = "end_turn"


@dataclass(frozen=True)
class Error:
    """An AWS error response: `code` (ThrottlingException …) with its HTTP status."""

    code: str
    status: int
    message: str = "error"


@dataclass(frozen=True)
class TimesOut:
    """The read times out (botocore's ReadTimeoutError, as a hung connection gives)."""


Behavior = ToolAnswer | TextAnswer | Error | TimesOut


def throttled() -> Error:
    return Error("ThrottlingException", 429, "Too many requests, please wait before trying again.")


def unavailable() -> Error:
    return Error("ServiceUnavailableException", 503, "Bedrock is unable to process your request.")


def model_not_ready() -> Error:
    return Error("ModelNotReadyException", 429, "Model is not ready to serve inference requests.")


def validation(message: str = "The provided model identifier is invalid.") -> Error:
    return Error("ValidationException", 400, message)


def access_denied() -> Error:
    return Error(
        "AccessDeniedException",
        403,
        "You don't have access to the model with the specified model ID.",
    )


@dataclass
class ConverseRequest:
    """One Converse request as it went over the wire."""

    model_id: str
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return "".join(
            block.get("text", "")
            for message in self.body.get("messages", [])
            if message.get("role") == "user"
            for block in message.get("content", [])
        )

    @property
    def tool(self) -> str:
        return str(self.body["toolConfig"]["tools"][0]["toolSpec"]["name"])

    @property
    def tool_choice(self) -> dict[str, Any]:
        return dict(self.body["toolConfig"]["toolChoice"])


@dataclass
class InvokeRequest:
    model_id: str
    body: dict[str, Any]


def fake_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic, not unit-length vector per text."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return [float(x) for x in np.random.default_rng(seed).normal(size=dimensions) * 3.0]


@dataclass
class FakeBedrockRuntime:
    region: str = "us-east-1"
    converse_requests: list[ConverseRequest] = field(default_factory=list)
    invoke_requests: list[InvokeRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._script: deque[Behavior] = deque()
        self._invoke_script: deque[Error] = deque()
        self._responder: Callable[[ConverseRequest], Behavior] | None = None
        self._lock = threading.Lock()
        self._hook = f"fake-bedrock-{id(self)}"
        self.embedding_dimensions = 1024

    def __enter__(self) -> FakeBedrockRuntime:
        from infra.aws.clients import reset_clients, shared_session

        shared_session().register("before-send.bedrock-runtime", self._send, unique_id=self._hook)
        reset_clients()  # a cached client was built without the hook (clients copy the events)
        return self

    def __exit__(self, *_: object) -> None:
        from infra.aws.clients import reset_clients, shared_session

        shared_session().unregister("before-send.bedrock-runtime", unique_id=self._hook)
        reset_clients()  # and one built with it must not outlive it

    def queue(self, *behaviors: Behavior) -> None:
        with self._lock:
            self._script.extend(behaviors)

    def queue_invoke(self, *errors: Error) -> None:
        """The next InvokeModel (embedding) requests fail with these."""
        with self._lock:
            self._invoke_script.extend(errors)

    def answer_with(self, responder: Callable[[ConverseRequest], Behavior] | None) -> None:
        self._responder = responder

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._invoke_script.clear()
            self.converse_requests.clear()
            self.invoke_requests.clear()

    # ---- the wire

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        path = unquote(urlsplit(request.url).path)
        assert path.startswith("/model/"), path
        model_id, operation = path[len("/model/") :].rsplit("/", 1)
        body = json.loads(request.body or b"{}")
        assert request.headers.get("Authorization", b""), "the request is signed"
        if operation == "converse":
            return self._converse(request.url, ConverseRequest(model_id, body))
        assert operation == "invoke", operation
        return self._invoke(request.url, InvokeRequest(model_id, body))

    def _converse(self, url: str, request: ConverseRequest) -> AWSResponse:
        with self._lock:
            self.converse_requests.append(request)
            behavior = self._script.popleft() if self._script else None
        if behavior is None:
            if self._responder is None:
                raise AssertionError(f"unscripted Converse request: {request.body}")
            behavior = self._responder(request)
        if isinstance(behavior, TimesOut):
            raise ReadTimeoutError(endpoint_url=url)
        if isinstance(behavior, Error):
            return _error(url, behavior)
        if isinstance(behavior, TextAnswer):
            content: list[dict[str, Any]] = [{"text": behavior.text}]
            return _json(url, 200, _converse_body(content, behavior.stop_reason, 100, 20))
        tool_use = {
            "toolUseId": "tooluse_1",
            "name": behavior.tool_name or request.tool,
            "input": behavior.input,
        }
        body = _converse_body(
            [{"toolUse": tool_use}], "tool_use", behavior.input_tokens, behavior.output_tokens
        )
        if behavior.cache_read is not None:
            body["usage"]["cacheReadInputTokens"] = behavior.cache_read
        if behavior.cache_write is not None:
            body["usage"]["cacheWriteInputTokens"] = behavior.cache_write
        return _json(url, 200, body)

    def _invoke(self, url: str, request: InvokeRequest) -> AWSResponse:
        with self._lock:
            self.invoke_requests.append(request)
            error = self._invoke_script.popleft() if self._invoke_script else None
        if error is not None:
            return _error(url, error)
        size = int(request.body.get("dimensions") or self.embedding_dimensions)
        vector = fake_vector(str(request.body["inputText"]), size)
        return _json(url, 200, {"embedding": vector, "inputTextTokenCount": 3})


def _converse_body(
    content: list[dict[str, Any]], stop: str, input_tokens: int, output_tokens: int
) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        },
        "metrics": {"latencyMs": 42},
    }


class _Raw(io.BytesIO):
    """What botocore reads a response from (urllib3's `stream()`, a StreamingBody's `read()`)."""

    def stream(self, amt: int = 1024, decode_content: bool | None = None) -> Iterator[bytes]:
        while chunk := self.read(amt):
            yield chunk


def _json(url: str, status: int, body: dict[str, Any]) -> AWSResponse:
    data = json.dumps(body).encode()
    headers = {"content-type": "application/json", "content-length": str(len(data))}
    return AWSResponse(url, status, headers, _Raw(data))


def _error(url: str, error: Error) -> AWSResponse:
    data = json.dumps({"message": error.message}).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(data)),
        "x-amzn-errortype": f"{error.code}:http://internal.amazon.com/coral/com.amazon.bedrock/",
    }
    return AWSResponse(url, error.status, headers, _Raw(data))
