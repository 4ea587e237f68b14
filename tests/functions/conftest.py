"""Fixtures for the Lambda handlers: the moto stack from template.yaml, a runtime wired to it with
every channel enabled and the platforms faked, the banking agent published, and helpers that
invoke the handlers the way Lambda does."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.ports import Generation
from engine.sessions.session import SessionState
from examples.banking import load as load_bank
from functions import management, webhook, worker
from infra.aws.lambda_routing import LocalLambdaContext
from infra.aws.local_stack import LocalStack
from infra.channels.registry import ChannelSecrets, build_channels
from infra.offline import OfflineLLM
from infra.runtime import Runtime, install_runtime, reset_runtime
from infra.runtime_settings import RuntimeSettings
from tests.channels.payloads import tg_text_update
from tests.channels.signed import ALL_SECRETS, PUBLIC_BASE_URL, channel_secrets
from tests.functions import signed_events as signed
from tests.functions.lambda_events import records_from_queue, sqs_event
from tests.functions.platforms import BASE_URLS, FakePlatforms, resolve_to_public

API_KEY = "test-management-key-0123456789"
DIGEST_KEY = "test-secret-digest-key-0123456789abcdef"
AGENT_ID = "bank"


class CountingLLM:
    """The offline provider, counting calls (a replayed turn must not make any) and keeping
    the prompts."""

    def __init__(self) -> None:
        self.inner = OfflineLLM()
        self.calls = 0
        self.prompts: list[str] = []  # every prompt, in order: what a model was ever shown

    async def generate(self, prompt: str, schema: Any, *, model: str) -> Generation[Any]:
        self.calls += 1
        self.prompts.append(prompt)
        return await self.inner.generate(prompt, schema, model=model)


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline, tracing off, no secret from the developer's shell."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    for field in ChannelSecrets.model_fields:
        monkeypatch.delenv(f"WAYPOINT_{field.upper()}", raising=False)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "WaypointTest")
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WAYPOINT_AGENT_ID", AGENT_ID)
    monkeypatch.setenv("WAYPOINT_TOOLS_MODULE", "examples.banking.tools")
    monkeypatch.setenv("WAYPOINT_MANAGEMENT_API_KEY", API_KEY)
    monkeypatch.setenv("WAYPOINT_SECRET_DIGEST_KEY", DIGEST_KEY)
    monkeypatch.delenv("WAYPOINT_REPLY_PER_MESSAGE", raising=False)
    monkeypatch.delenv("WAYPOINT_TOOL_STATE_MACHINE_ARN", raising=False)


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


@pytest.fixture
def platforms() -> FakePlatforms:
    return FakePlatforms()


@pytest.fixture
def llm() -> CountingLLM:
    return CountingLLM()


@pytest.fixture
def make_runtime(
    stack: LocalStack, platforms: FakePlatforms, llm: CountingLLM
) -> Iterator[Callable[..., Runtime]]:
    """`make_runtime(**settings)`: install a runtime on the stack (settings from the env, then
    overridden), with every channel enabled and pointed at the fake platforms."""

    def make(
        public_base_url: str | None = PUBLIC_BASE_URL,
        callback_hosts: tuple[str, ...] = ("client.test",),
        clock: Any = None,
        **settings: Any,
    ) -> Runtime:
        chosen = dataclasses.replace(RuntimeSettings.from_env(), **settings)
        return install_runtime(
            build_runtime(
                chosen,
                llm,
                platforms,
                public_base_url=public_base_url,
                callback_hosts=callback_hosts,
                clock=clock,
            )
        )

    yield make
    reset_runtime()
    asyncio.set_event_loop(None)


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    """A runtime with the banking agent published (embeddings in S3, then the pointer)."""
    installed = make_runtime()
    installed.run(installed.publish_agent(load_bank()))
    return installed


def with_support_relay(runtime: Runtime, channel: str = "CSUPPORT1", team: str = "T111") -> None:
    """Turn the Slack support relay (`infra.handoff_slack`) on for a runtime already built: its
    settings are read from the environment once, when it is made."""
    from infra.channels.support_channel import SupportRelay

    relay = SupportRelay(channel=channel, teams=frozenset({team}))
    runtime.settings = dataclasses.replace(runtime.settings, support_relay=relay)


# -- invoking the handlers --------------------------------------------------------------------


def invoke_webhook(event: dict[str, Any]) -> dict[str, Any]:
    return webhook.handler(event, LocalLambdaContext("waypoint-local-webhook"))


def telegram_says(chat: int, text: str, update_id: int) -> dict[str, Any]:
    """The customer of Telegram chat `chat` writes `text`: a signed webhook call; its response."""
    update = tg_text_update(text, update_id=update_id, chat_id=chat, user_id=chat)
    return invoke_webhook(signed.telegram(update))


def load_session(runtime: Runtime, session_id: str) -> SessionState:
    """The stored session, which must exist."""
    state = runtime.run(runtime.sessions.load(session_id))
    assert state is not None, session_id
    return state


def invoke_worker(event: dict[str, Any]) -> dict[str, Any]:
    return worker.handler(event, LocalLambdaContext("waypoint-local-worker"))


def invoke_management(event: dict[str, Any]) -> dict[str, Any]:
    return management.handler(event, LocalLambdaContext("waypoint-local-management"))


def receive_all(stack: LocalStack) -> list[dict[str, Any]]:
    """Every message now visible on the turn queue (received, so now in flight)."""
    sqs = stack.client("sqs")
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=stack.queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not batch:
            return messages
        messages.extend(batch)


def queue_depth(stack: LocalStack) -> int:
    attributes = stack.client("sqs").get_queue_attributes(
        QueueUrl=stack.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def drain(stack: LocalStack) -> list[dict[str, Any]]:
    """What the event source mapping does: receive a batch, invoke the worker, delete what
    succeeded, make failures visible again at once (instead of after the visibility timeout).
    Returns the worker's responses, one per invocation."""
    sqs = stack.client("sqs")
    responses = []
    messages = receive_all(stack)
    for start in range(0, len(messages), 10):
        batch = messages[start : start + 10]
        response = invoke_worker(sqs_event(records_from_queue(batch)))
        responses.append(response)
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for message in batch:
            if message["MessageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=stack.queue_url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=0,
                )
            else:
                sqs.delete_message(QueueUrl=stack.queue_url, ReceiptHandle=message["ReceiptHandle"])
    return responses


def inbox_items(stack: LocalStack) -> list[dict[str, Any]]:
    items = stack.client("dynamodb").scan(TableName=stack.table_name)["Items"]
    return [item for item in items if item["pk"]["S"].startswith("INBOX#")]


def everything_stored(stack: LocalStack) -> str:
    """Every DynamoDB item and S3 object of the stack as text (gzipped bodies unpacked), and
    every message still on the turn queues: where a secret must never be found."""
    ddb = stack.client("dynamodb")
    parts: list[str] = []
    pages = ddb.get_paginator("scan").paginate(TableName=stack.table_name)
    for item in (i for page in pages for i in page["Items"]):
        for value in item.values():
            if "B" in value:
                raw = bytes(value["B"])
                parts.append(_unpacked(raw))
            else:
                parts.append(json.dumps(value, ensure_ascii=False))
    s3 = stack.client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket):
        for entry in page.get("Contents", []):
            body = s3.get_object(Bucket=stack.bucket, Key=entry["Key"])["Body"].read()
            parts.append(_unpacked(body))
    sqs = stack.client("sqs")
    for url in sqs.list_queues().get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert int(attributes["ApproximateNumberOfMessages"]) == 0, f"{url} still holds messages"
        assert int(attributes["ApproximateNumberOfMessagesNotVisible"]) == 0, url
    return "\n".join(parts)


def _unpacked(raw: bytes) -> str:
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def assert_no_secret_in(text: str) -> None:
    for secret in (*ALL_SECRETS, API_KEY):
        assert secret not in text


def build_runtime(
    settings: RuntimeSettings,
    llm: Any,
    platforms: FakePlatforms,
    *,
    public_base_url: str | None = PUBLIC_BASE_URL,
    callback_hosts: tuple[str, ...] = ("client.test",),
    clock: Any = None,
) -> Runtime:
    """A runtime with every channel enabled and its send APIs pointed at the fake platforms
    (stores on `clock` when one is given; channels keep the real clock for signatures)."""
    return Runtime(
        settings,
        llm=llm,
        clock=clock,
        channels=build_channels(
            channel_secrets(),
            base_urls=BASE_URLS,
            public_base_url=public_base_url,
            callback_hosts=callback_hosts,
            callback_resolver=resolve_to_public,
        ),
        http=httpx.AsyncClient(transport=platforms.transport()),
    )


def fail_once(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, error: Exception) -> None:
    """Make the async method `target.name` raise `error` on its next call, then work again: a
    Lambda killed or timed out at exactly that point."""
    real = getattr(target, name)
    pending = [error]

    async def fail_then_work(*args: Any, **kwargs: Any) -> Any:
        if pending:
            raise pending.pop()
        return await real(*args, **kwargs)

    monkeypatch.setattr(target, name, fail_then_work)
