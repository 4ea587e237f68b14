"""The local deployment over real HTTP, with faults: `waypoint.local_server.LocalServer` (moto's
threaded server, the webhook and management apps on one uvicorn port, the SQS poller invoking the
worker Lambda handler) with every chat channel enabled, the platforms' send APIs faked in process,
generic-channel replies POSTed for real to the server's `/local/replies`, and optional faults: an
LLM that fails at random, reply callbacks that answer 503, workers that die after the commit.

The local stack's threaded server runs moto with `infra.aws.moto_fidelity` installed: without
it, moto itself loses concurrent writes, reorders a FIFO group after retries and slows down with
the table's size.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from engine.sessions.session import SessionState
from examples.banking import TOOLS_MODULE
from examples.banking import load as load_bank
from infra.channels.base import ChannelRequest, NormalizedMessage
from infra.channels.registry import build_channels
from infra.channels.signing import generic_headers
from infra.offline import OfflineLLM
from infra.runtime import Runtime, install_runtime
from infra.runtime_settings import RuntimeSettings
from infra.turn_queue import session_id_for
from tests.channels.signed import GENERIC_SECRET, channel_secrets
from tests.functions.conftest import API_KEY
from tests.functions.platforms import BASE_URLS, FakePlatforms
from tests.reliability.faults import FlakyLLM
from waypoint.local_server import LocalServer

AGENT_ID = "bank"
_PLATFORM_HOSTS = frozenset(httpx.URL(url).host for url in BASE_URLS.values())
# What must not leak from the developer's shell into the served stack (no network, no key).
_SCRUBBED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER")


@dataclass(frozen=True)
class Faults:
    """Probabilities (seeded): LLM calls failing (a share of them crashing the turn), reply
    callbacks answering 503, workers dying right after a commit."""

    llm: float = 0.0
    llm_crash_share: float = 0.0
    delivery: float = 0.0
    crash_after_commit: float = 0.0
    seed: int = 8


class _Delivery(httpx.AsyncBaseTransport):
    """Platform APIs → the fake platforms; anything else (the generic channel's callbacks to
    127.0.0.1) → the real network stack, unless the fault dice say 503."""

    def __init__(self, platforms: FakePlatforms, rate: float, rng: random.Random) -> None:
        self._platforms = platforms.transport()
        self._real = httpx.AsyncHTTPTransport()
        self._rate = rate
        self._rng = rng
        self._lock = threading.Lock()
        self.failed = 0
        self.log: list[tuple[float, str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host in _PLATFORM_HOSTS:
            return await self._platforms.handle_async_request(request)
        with self._lock:
            fail = self._rng.random() < self._rate
            self.failed += fail
        payload = json.loads(request.content)
        tag = f"{payload.get('in_reply_to')}"
        if fail:
            self.log.append((time.monotonic(), tag, "503"))
            return httpx.Response(503, json={"error": "injected: the front end is down"})
        self.log.append((time.monotonic(), tag, "send"))
        try:
            r = await self._real.handle_async_request(request)
        except Exception as e:
            self.log.append((time.monotonic(), tag, f"exc {type(e).__name__}"))
            raise
        self.log.append((time.monotonic(), tag, f"got {r.status_code}"))
        return r

    async def aclose(self) -> None:
        await self._real.aclose()


class _CrashAfterCommit:
    """Wraps `outbox.take` (the first step after the commit): dies now and then, as a Lambda
    that hits its timeout right after committing would."""

    def __init__(self, real: Any, rate: float, rng: random.Random) -> None:
        self._real = real
        self._rate = rate
        self._rng = rng
        self.crashes = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._rng.random() < self._rate:
            self.crashes += 1
            raise TimeoutError("injected: the worker died after the commit")
        return await self._real(*args, **kwargs)


class ServedStack:
    """Start with `start()`; see the module docstring. Not thread-safe to start twice."""

    def __init__(
        self, *, faults: Faults | None = None, reply_per_message: bool = False, cache_dir: Path
    ) -> None:
        self.faults = faults or Faults()
        self.reply_per_message = reply_per_message
        self.cache_dir = cache_dir
        self.platforms = FakePlatforms()
        self.server = LocalServer(
            load_bank(),
            tools_module=TOOLS_MODULE,
            management_api_key=API_KEY,
            generic_secret=GENERIC_SECRET,
        )
        self.llm: FlakyLLM | None = None
        self.delivery: _Delivery | None = None
        self.crash_after_commit: _CrashAfterCommit | None = None
        self.runtime: Runtime | None = None
        self.received: dict[str, list[dict[str, Any]]] = {}  # conversation → replies, in order
        self.repeated_replies = 0  # re-sent after an unconfirmed delivery, dropped by reply id
        self._saved_env: dict[str, str | None] = {}
        self._http = httpx.Client(timeout=30)

    # ---- lifecycle

    def start(self) -> ServedStack:
        self._set_env({"WAYPOINT_CACHE_DIR": str(self.cache_dir)}, scrub=_SCRUBBED_ENV)
        self.server.start()
        rng = random.Random(self.faults.seed)
        self.llm = FlakyLLM(
            OfflineLLM(),
            rate=self.faults.llm,
            crash_share=self.faults.llm_crash_share,
            seed=self.faults.seed,
        )
        self.delivery = _Delivery(self.platforms, self.faults.delivery, rng)
        settings = RuntimeSettings.from_env()
        runtime = Runtime(
            RuntimeSettings(**{**vars(settings), "reply_per_message": self.reply_per_message}),
            llm=self.llm,
            channels=build_channels(
                channel_secrets(),
                base_urls=BASE_URLS,
                public_base_url=self.server.base_url,
                callback_hosts=("127.0.0.1",),  # the local server's own reply inbox
            ),
            http=httpx.AsyncClient(transport=self.delivery, timeout=10),
        )
        # Replaces the server's own runtime before any message is queued: the poller picks up
        # the current runtime on its next batch.
        self.runtime = install_runtime(runtime)
        self.crash_after_commit = _CrashAfterCommit(
            runtime.outbox.take, self.faults.crash_after_commit, rng
        )
        runtime.outbox.take = self.crash_after_commit  # type: ignore[method-assign]
        inbox_put = self.server.replies.put
        self.server.replies.put = self._record_reply(inbox_put)  # type: ignore[method-assign]
        return self

    def stop(self) -> None:
        self._http.close()
        self.server.stop()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def __enter__(self) -> ServedStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _set_env(self, values: Mapping[str, str], scrub: tuple[str, ...]) -> None:
        for name in (*values, *scrub):
            self._saved_env.setdefault(name, os.environ.get(name))
        for name in scrub:
            os.environ.pop(name, None)
        os.environ.update(values)

    def _record_reply(self, put: Any) -> Any:
        lock = threading.Lock()

        def record(payload: dict[str, Any]) -> bool:
            with lock:  # what the front end keeps: a repeated reply id is dropped by the inbox
                if not put(payload):
                    self.repeated_replies += 1
                    return False
                stamped = {**payload, "received_at": time.monotonic()}
                self.received.setdefault(str(payload.get("conversation_id")), []).append(stamped)
                return True

        return record

    # ---- requests

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def url(self, channel: str) -> str:
        return self.server.webhook_url(channel)

    def post(self, channel: str, body: bytes, headers: Mapping[str, str]) -> httpx.Response:
        return self._http.post(self.url(channel), content=body, headers=dict(headers))

    def generic_body(self, conversation: str, event_id: str, text: str) -> bytes:
        return json.dumps(
            {
                "event_id": event_id,
                "conversation_id": conversation,
                "customer_id": f"customer-{conversation}",
                "text": text,
                "callback_url": self.server.replies_url,
            }
        ).encode()

    @staticmethod
    def generic_headers(body: bytes) -> dict[str, str]:
        return generic_headers(GENERIC_SECRET, body, int(time.time()))

    # ---- what happened

    def normalized(
        self, channel: str, body: bytes, headers: Mapping[str, str]
    ) -> NormalizedMessage:
        """The message a request carries, as the channel reads it (to find its session)."""
        assert self.runtime is not None
        request = ChannelRequest.from_http("POST", self.url(channel), headers=headers, body=body)
        (message,) = self.runtime.channels[channel].handle(request).messages
        return message

    @staticmethod
    def session_id(channel: str, conversation_key: str) -> str:
        return session_id_for(AGENT_ID, channel, conversation_key)

    def session(self, session_id: str) -> SessionState | None:
        assert self.runtime is not None
        # The stores are sync boto3 underneath: any event loop will do (the poller owns its own).
        return asyncio.run(self.runtime.sessions.load(session_id))

    def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        assert self.runtime is not None
        return asyncio.run(self.runtime.sessions.trace(session_id, turn_id))

    def queue_depth(self, dead_letters: bool = False) -> int:
        sqs = self.server.stack.client("sqs")
        url = (
            self.server.stack.dead_letter_queue_url if dead_letters else self.server.stack.queue_url
        )
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    def wait_until_quiet(self, timeout: float) -> float:
        """Wait until the turn queue is empty (every message answered and deleted) and stays so;
        returns when it became quiet (time.monotonic)."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self.queue_depth() == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= 0.5:
                    return quiet_since
            else:
                quiet_since = None
            time.sleep(0.1)
        raise TimeoutError(
            f"the turn queue still holds {self.queue_depth()} message(s) after {timeout:.0f} s"
        )

    def inbox_claims(self) -> int:
        pages = (
            self.server.stack.client("dynamodb")
            .get_paginator("scan")
            .paginate(TableName=self.server.stack.table_name, ProjectionExpression="pk")
        )
        return sum(
            1 for page in pages for item in page["Items"] if item["pk"]["S"].startswith("INBOX#")
        )
