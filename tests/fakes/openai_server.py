"""A local fake of the OpenAI HTTP API, for exercising the real `openai` client without a network.

`FakeOpenAIServer` serves `POST /v1/chat/completions` and `POST /v1/embeddings` on 127.0.0.1 (a
free port) from a background thread, records every request, and answers chat completions from a
script: a queue of behaviors consumed one per request.

    with FakeOpenAIServer() as server:
        server.queue_chat(rate_limited(retry_after=1.5), Reply({"answer": "yes"}))
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...
        assert server.chat_requests[-1].response_format["type"] == "json_schema"

When the script is empty, a responder set with `answer_chat_with(fn)` answers instead: `fn` gets
the recorded request and returns a behavior (or an awaitable of one) — a server that answers every
schema it is asked, e.g. by the offline model, for runs of many requests.

Embeddings are deterministic by default (a vector derived from a hash of each text, deliberately
not unit-length so callers' normalization is observable); `queue_embeddings` scripts failures.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass(frozen=True)
class Reply:
    """Answer a chat completion with `content` (a dict is sent as its JSON text)."""

    content: str | dict[str, Any] | None
    prompt_tokens: int = 11
    completion_tokens: int = 7
    cached_tokens: int | None = None  # `prompt_tokens_details.cached_tokens`; None: not sent
    model: str | None = None  # None: echo the requested model
    delay: float = 0.0  # seconds to wait before answering (concurrency tests)
    finish_reason: str = "stop"
    refusal: str | None = None


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error in OpenAI's error envelope."""

    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None
    error_type: str = "invalid_request_error"


@dataclass(frozen=True)
class Hang:
    """Never answer in time: wait until the server is reset/stopped (or `seconds` pass)."""

    seconds: float = 10.0


Behavior = Reply | Fail | Hang


Responder = Callable[["RecordedRequest"], "Behavior | Awaitable[Behavior]"]


def rate_limited(retry_after: float | None = None) -> Fail:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return Fail(429, "Rate limit reached", headers=headers, error_type="rate_limit_error")


def server_error() -> Fail:
    return Fail(
        500, "The server had an error while processing your request.", error_type="server_error"
    )


def malformed_json() -> Reply:
    return Reply("{not json")


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def response_format(self) -> dict[str, Any]:
        return dict(self.body.get("response_format") or {})

    def message(self, role: str) -> str:
        """The content of the last message with this role ("" when there is none)."""
        for message in reversed(self.body.get("messages", [])):
            if message.get("role") == role:
                return str(message.get("content", ""))
        return ""

    @property
    def prompt(self) -> str:
        return self.message("user")


def fake_embedding(text: str, dimensions: int) -> npt.NDArray[np.float32]:
    """Deterministic per text; norm ≈ 3·√dim, so an un-normalized result is easy to spot."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return np.random.default_rng(seed).normal(0.0, 3.0, dimensions).astype(np.float32)


class FakeOpenAIServer:
    """The fake server; use as a context manager (or `start()` / `stop()`)."""

    DEFAULT_EMBEDDING_DIMENSIONS = 16

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._chat_script: deque[Behavior] = deque()
        self._responder: Responder | None = None
        self._embedding_script: deque[Behavior] = deque()
        self._reject_json_schema: set[str | None] = set()
        # A threading.Event because tests (main thread) release handlers waiting on the server's
        # own loop; handlers poll it, which keeps the two loops fully independent.
        self._release = threading.Event()
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------------

    def queue_chat(self, *behaviors: Behavior) -> None:
        self._chat_script.extend(behaviors)

    def answer_chat_with(self, responder: Responder | None) -> None:
        """Answer chat completions the script does not cover with `responder(request)`."""
        self._responder = responder

    def queue_embeddings(self, *behaviors: Behavior) -> None:
        self._embedding_script.extend(behaviors)

    def reject_json_schema(self, model: str | None = None) -> None:
        """Behave like a model without structured outputs: every `json_schema` request for
        `model` (any model when None) gets a 400 naming `response_format`."""
        self._reject_json_schema.add(model)

    def reset(self) -> None:
        """Forget requests and script, and release any hanging handler."""
        self._release.set()
        self._chat_script.clear()
        self._embedding_script.clear()
        self._reject_json_schema.clear()
        self._responder = None
        self.requests.clear()
        self.in_flight = self.max_in_flight = 0
        self._release = threading.Event()

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    @property
    def base_url(self) -> str:
        assert self._socket is not None, "server not started"
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only when the
        # listening socket says TCP explicitly; without it every response stalls ~40 ms (Nagle
        # against delayed ACKs).
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the HTTP app ---------------------------------------------------------------------------

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> JSONResponse:
            recorded = await self._record(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await self._answer_chat(recorded)
            finally:
                self.in_flight -= 1

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = (await self._record(request)).body
            if self._embedding_script:
                behavior = self._embedding_script.popleft()
                if not isinstance(behavior, Reply):
                    return await self._fail_or_hang(behavior)
            return _embedding_response(body)

        return app

    async def _record(self, request: Request) -> RecordedRequest:
        body: dict[str, Any] = await request.json()
        recorded = RecordedRequest(request.url.path, body, dict(request.headers))
        self.requests.append(recorded)
        return recorded

    async def _answer_chat(self, request: RecordedRequest) -> JSONResponse:
        body = request.body
        model = str(body.get("model", ""))
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_schema" and (
            None in self._reject_json_schema or model in self._reject_json_schema
        ):
            return _error(
                Fail(
                    400,
                    "Invalid parameter: 'response_format' of type 'json_schema' is not "
                    "supported with this model.",
                    param="response_format",
                )
            )
        if self._chat_script:
            behavior = self._chat_script.popleft()
        elif self._responder is not None:
            answered = self._responder(request)
            behavior = await answered if inspect.isawaitable(answered) else answered
        else:
            return _error(Fail(400, "fake OpenAI server: no behavior scripted for this request"))
        if not isinstance(behavior, Reply):
            return await self._fail_or_hang(behavior)
        if behavior.delay:
            await asyncio.sleep(behavior.delay)
        return _chat_response(behavior, model)

    async def _fail_or_hang(self, behavior: Fail | Hang) -> JSONResponse:
        if isinstance(behavior, Fail):
            return _error(behavior)
        release, deadline = self._release, time.monotonic() + behavior.seconds
        while not release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return _error(Fail(504, "fake OpenAI server: released a hanging request"))


def _error(failure: Fail) -> JSONResponse:
    body = {
        "error": {
            "message": failure.message,
            "type": failure.error_type,
            "param": failure.param,
            "code": None,
        }
    }
    return JSONResponse(body, status_code=failure.status, headers=failure.headers)


def _chat_response(reply: Reply, requested_model: str) -> JSONResponse:
    content = reply.content if not isinstance(reply.content, dict) else json.dumps(reply.content)
    return JSONResponse(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": reply.model or requested_model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": reply.refusal},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                # what OpenAI reports of its prompt cache (absent on providers without one)
                **(
                    {"prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}
                    if reply.cached_tokens is not None
                    else {}
                ),
            },
        }
    )


def _embedding_response(body: dict[str, Any]) -> JSONResponse:
    inputs = body.get("input", [])
    texts = [inputs] if isinstance(inputs, str) else list(inputs)
    dimensions = int(body.get("dimensions") or FakeOpenAIServer.DEFAULT_EMBEDDING_DIMENSIONS)
    as_base64 = body.get("encoding_format") == "base64"  # the openai client's default
    data = []
    for index, text in enumerate(texts):
        vector = fake_embedding(str(text), dimensions)
        embedding: Any = (
            base64.b64encode(vector.tobytes()).decode() if as_base64 else vector.tolist()
        )
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    data.reverse()  # the API does not promise order; callers must sort by `index`
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }
    )
