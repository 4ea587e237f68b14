"""Fault injectors for the reliability suites: a fake OpenAI server that answers like the offline
model unless told to fail, an LLM that fails at random, a DynamoDB client that throttles or
conflicts on demand, fast (recorded) LLM backoff, and a recording LLM.

Each injector fails the way the real dependency fails (HTTP statuses and bodies through the real
`openai` client, botocore `ClientError`s with DynamoDB's codes), so the code under test takes its
real error paths.
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

import engine.turn
from engine.clock import SystemClock
from engine.errors import LLMTransientError
from engine.llm import TurnLLM
from engine.ports import Generation
from infra.offline import OfflineLLM
from infra.offline.llm import RESPONDERS
from tests.fakes.openai_server import (
    Behavior,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    _chat_response,
)

# --------------------------------------------------------------------------------------------------
# The model, over HTTP


SCHEMAS: dict[str, type[BaseModel]] = {schema.__name__: schema for schema in RESPONDERS}


class OfflineBackedOpenAIServer(FakeOpenAIServer):
    """`FakeOpenAIServer` whose unscripted chat completions are answered by the offline model, so
    the real `OpenAISchematicLLM` can drive whole engine turns. Faults:

    - `fail_next(*behaviors)`: the next requests get these (429, 500, hang, malformed …);
    - `outage = behavior`: every request gets it until `outage = None`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.outage: Behavior | None = None
        self._faults: deque[Behavior] = deque()
        self._offline = OfflineLLM()
        self.faults_served = 0

    def fail_next(self, *behaviors: Behavior) -> None:
        self._faults.extend(behaviors)

    def heal(self) -> None:
        self.outage = None
        self._faults.clear()

    async def _answer_chat(self, request: RecordedRequest) -> JSONResponse:
        body = request.body
        model = str(body.get("model", ""))
        behavior = self.outage or (self._faults.popleft() if self._faults else None)
        if behavior is not None:
            self.faults_served += 1
            if isinstance(behavior, Reply):
                return _chat_response(behavior, model)
            return await self._fail_or_hang(behavior)
        schema = SCHEMAS[body["response_format"]["json_schema"]["name"]]
        prompt = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        generation = await self._offline.generate(prompt, schema, model=model)
        return _chat_response(Reply(generation.value.model_dump(mode="json")), model)


# --------------------------------------------------------------------------------------------------
# Backoff without waiting


@dataclass
class RecordedBackoff:
    """Stands in for `asyncio.sleep` in `TurnLLM`: records each backoff, yields, never waits."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


def record_llm_backoff(monkeypatch: pytest.MonkeyPatch) -> RecordedBackoff:
    """Every `TurnLLM` the engine builds from now on backs off through a `RecordedBackoff`.
    Process-wide, so worker threads (the local server's poller) are covered too."""
    backoff = RecordedBackoff()
    monkeypatch.setattr(engine.turn, "TurnLLM", functools.partial(TurnLLM, sleep=backoff))
    return backoff


# --------------------------------------------------------------------------------------------------
# LLMs that misbehave or watch


class FlakyLLM:
    """Wraps a `SchematicLLM`; each call fails with probability `rate` (seeded, thread-safe):
    mostly a transient error (429/503, retried by `TurnLLM`), sometimes `crash_share` of them a
    plain exception — an adapter bug, which fails the whole turn so SQS retries it."""

    def __init__(self, inner: Any, *, rate: float, seed: int = 8, crash_share: float = 0.0) -> None:
        self.inner = inner
        self.rate = rate
        self.crash_share = crash_share
        self.calls = 0
        self.transient_errors = 0
        self.crashes = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        with self._lock:
            self.calls += 1
            fail = self._rng.random() < self.rate
            crash = fail and self._rng.random() < self.crash_share
            if crash:
                self.crashes += 1
            elif fail:
                self.transient_errors += 1
        if crash:
            raise RuntimeError("injected: the LLM adapter crashed")
        if fail:
            raise LLMTransientError("injected: 503 from the model provider", status=503)
        return await self.inner.generate(prompt, schema, model=model)


class RecordingLLM:
    """Wraps a `SchematicLLM` and keeps every prompt it was sent (thread-safe)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        with self._lock:
            self.prompts.append(prompt)
        return await self.inner.generate(prompt, schema, model=model)


# --------------------------------------------------------------------------------------------------
# Time


class ShiftedClock(SystemClock):
    """The system clock, moved forward on demand: a lease runs out without waiting for it."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return super().now() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


# --------------------------------------------------------------------------------------------------
# DynamoDB


def dynamo_error(code: str, operation: str, *, reasons: list[str] | None = None) -> ClientError:
    """A botocore `ClientError` as DynamoDB returns it (with cancellation reasons for a
    cancelled transaction)."""
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": f"injected {code}"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, operation)  # type: ignore[arg-type]


def throttled(operation: str) -> ClientError:
    """What botocore raises once its own retries on a throttled request are used up."""
    return dynamo_error("ProvisionedThroughputExceededException", operation)


def throttled_transaction(items: int) -> ClientError:
    """A transaction cancelled because one of its items was throttled."""
    return dynamo_error(
        "TransactionCanceledException",
        "TransactWriteItems",
        reasons=["ThrottlingError", *["None"] * (items - 1)],
    )


@dataclass
class _Injection:
    errors: deque[Exception]
    when: Callable[[dict[str, Any]], bool]


class FaultyDynamoDB:
    """A low-level DynamoDB client that raises injected errors on chosen operations (optionally
    only for calls whose arguments match `when`), and otherwise delegates to the real client."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._injections: dict[str, list[_Injection]] = {}
        self.raised: list[tuple[str, str]] = []  # (operation, error code)

    def inject(
        self,
        operation: str,
        *errors: Exception,
        when: Callable[[dict[str, Any]], bool] = lambda _: True,
    ) -> None:
        self._injections.setdefault(operation, []).append(_Injection(deque(errors), when))

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._real, name)
        if name not in self._injections:
            return attribute

        def call(**kwargs: Any) -> Any:
            for injection in self._injections[name]:
                if injection.errors and injection.when(kwargs):
                    error = injection.errors.popleft()
                    code = (
                        error.response["Error"]["Code"]
                        if isinstance(error, ClientError)
                        else type(error).__name__
                    )
                    self.raised.append((name, code))
                    raise error
            return attribute(**kwargs)

        return call


def commits_a_turn(kwargs: dict[str, Any]) -> bool:
    """`when=` for the session store's turn commit (not session creation): it writes a TURN#."""
    return any(
        item.get("Put", {}).get("Item", {}).get("sk", {}).get("S", "").startswith("TURN#")
        for item in kwargs.get("TransactItems", [])
    )


def takes_the_outbox_lease(kwargs: dict[str, Any]) -> bool:
    """`when=` for the outbox's `take` (the first write after a turn's commit)."""
    key = kwargs.get("Key", {}).get("sk", {}).get("S", "")
    return key.startswith("OUTBOX#") and ":sending" in kwargs.get("ExpressionAttributeValues", {})


def marks_sent(kwargs: dict[str, Any]) -> bool:
    """`when=` for the outbox's SENT mark, after the platform accepted the reply."""
    key = kwargs.get("Key", {}).get("sk", {}).get("S", "")
    return key.startswith("OUTBOX#") and "= :sent" in kwargs.get("UpdateExpression", "")


def install_faulty_dynamodb(monkeypatch: pytest.MonkeyPatch) -> FaultyDynamoDB:
    """Every store built from now on (sessions, inbox, outbox, agents) talks to DynamoDB through
    one `FaultyDynamoDB` (the real client of the current local stack underneath)."""
    from infra.aws import clients, dynamo_table

    real_client = clients.client
    faulty = FaultyDynamoDB(real_client("dynamodb"))

    def client(service: str) -> Any:
        return faulty if service == "dynamodb" else real_client(service)

    monkeypatch.setattr(clients, "client", client)
    monkeypatch.setattr(dynamo_table, "client", client)  # ItemBodies, _Table look it up there
    return faulty
