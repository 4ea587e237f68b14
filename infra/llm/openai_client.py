"""What the OpenAI chat and embedding adapters share: the client (one per event loop, created on
first use) and the mapping of `openai` exceptions onto Waypoint's LLM error types.

`openai` is imported only when a client is first needed: importing it costs about a second
(shared/notes/aws-local.md §8), and Lambdas that never call the model must not pay for it. It is
imported by `infra.llm.openai_import.import_openai`, which defers the re-export lists of its type
packages (most of that second) until something reads them.
"""

from __future__ import annotations

import os
from asyncio import AbstractEventLoop, get_running_loop
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from engine.errors import LLMError, LLMTransientError
from infra.llm.openai_import import import_openai
from infra.tls import default_tls_context

if TYPE_CHECKING:
    from openai import AsyncOpenAI

# Compatible servers (Ollama, vLLM, llama.cpp) usually need no key, but the client insists on one.
_PLACEHOLDER_KEY = "not-needed"
# Statuses worth retrying, as the openai client itself treats them (408 timeout, 409 lock).
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class OpenAIConnection:
    """Settings for reaching an OpenAI-compatible API, and the `AsyncOpenAI` clients built from
    them: one per running event loop. A pooled connection is bound to the loop that opened it, and
    a Lambda worker runs each invocation in a fresh loop (`asyncio.run`), where a shared client
    fails with "Event loop is closed". An injected `client` is used as-is, on any loop."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 0,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self._injected = client
        # Not a WeakKeyDictionary: a client's open connections reference their loop, so weak keys
        # would never die. Clients of closed loops are dropped when the next loop needs one.
        self._clients: dict[AbstractEventLoop, AsyncOpenAI] = {}

    def client(self) -> AsyncOpenAI:
        """The client for the running event loop (created, and `openai` imported, on first use)."""
        if self._injected is not None:
            return self._injected
        loop = get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for closed in [old for old in self._clients if old.is_closed()]:
                del self._clients[closed]
            client = self._clients[loop] = self._new_client()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (not an injected one: its owner closes it). Optional:
        a worker that ends each invocation's loop can call it to release sockets promptly."""
        client = self._clients.pop(get_running_loop(), None)
        if client is not None:
            await client.close()

    @property
    def described_base_url(self) -> str:
        """The base URL requests go to, for error messages."""
        if self._injected is not None:
            return str(self._injected.base_url)
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    def _new_client(self) -> AsyncOpenAI:
        import_openai()
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient, OpenAIError

        api_key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key and (self.base_url or os.environ.get("OPENAI_BASE_URL")):
            api_key = _PLACEHOLDER_KEY
        try:
            return AsyncOpenAI(
                api_key=api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                http_client=DefaultAsyncHttpxClient(verify=default_tls_context()),
            )
        except OpenAIError as exc:
            raise LLMError(
                f"cannot create the OpenAI client: {exc}. Set OPENAI_API_KEY (and OPENAI_BASE_URL "
                "for an OpenAI-compatible server), or use the offline provider."
            ) from exc


async def post_json(client: AsyncOpenAI, path: str, body: dict[str, Any]) -> object:
    """POST `body` to `path` through `client` (its transport, authentication, timeouts, retries
    and errors) and return the answer's JSON as it came: no response model is built, and the
    resource modules that build them (streaming helpers, pagination, parsing types) are never
    imported. The adapters read the few fields they use."""
    return await client.post(
        path,
        body=body,
        cast_to=object,
        options={"security": {"bearer_auth": True}},  # as openai's own resources send it
    )


def map_openai_error(exc: Exception, *, model: str, base_url: str) -> LLMError:
    """Translate an `openai` exception into the error type `TurnLLM`'s policy acts on.

    429 / 408 / 409 / 5xx, timeouts and connection failures are transient (retried with
    backoff); any other 4xx is final, with a message saying what to check."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LLMTransientError(f"request to {base_url} timed out (model {model!r})")
    if isinstance(exc, openai.APIConnectionError):
        return LLMTransientError(
            f"could not connect to {base_url} (model {model!r}): {exc}. "
            "Check OPENAI_BASE_URL and that the server is reachable."
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _error_detail(exc)
        if status in _TRANSIENT_STATUSES or status >= 500:
            return LLMTransientError(
                f"{base_url} answered {status} for model {model!r}: {detail}",
                status=status,
                retry_after=retry_after_seconds(exc.response.headers),
            )
        return LLMError(
            f"{base_url} rejected the request ({status}): {detail}. {_hint(status, model)}"
        )
    if isinstance(exc, openai.OpenAIError):
        return LLMError(f"OpenAI client error for model {model!r}: {exc}")
    return LLMError(f"unexpected error calling {base_url} for model {model!r}: {exc!r}")


def _hint(status: int, model: str) -> str:
    if status == 401:
        return "Check OPENAI_API_KEY: the key is missing, wrong or revoked."
    if status == 403:
        return f"Check that the API key's project may use model {model!r}."
    if status == 404:
        return (
            f"Check the model name {model!r} (AgentConfig.models / default_model) and "
            "OPENAI_BASE_URL (it usually ends in /v1)."
        )
    return f"Check the model name {model!r}, that it supports this request, and OPENAI_BASE_URL."


def _error_detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(getattr(exc, "message", exc))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """How long the server asked us to wait: `retry-after-ms` (OpenAI's, more precise), else
    `Retry-After` as seconds or an HTTP date. None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
