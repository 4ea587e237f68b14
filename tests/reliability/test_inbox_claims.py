"""The webhook's inbox claim under the two faults that used to lose a message for good: the
claim's response lost after DynamoDB applied it (botocore retries, the retry failed its own
condition, the webhook answered "duplicate" without queuing), and the webhook dying between the
claim and the enqueue (every platform retry was a "duplicate" for 8 days). Either way the message
must be queued exactly once and answered exactly once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import ReadTimeoutError
from moto.core.models import botocore_stubber

from engine.sessions.session import EventSource
from examples.banking import load as load_bank
from functions import webhook
from infra.aws import clients
from infra.aws.local_stack import LocalStack
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.functions.conftest import drain, inbox_items, load_session, queue_depth, telegram_says
from tests.functions.platforms import FakePlatforms
from tests.reliability.faults import ShiftedClock

CHAT = 8282
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")


class LambdaKilled(BaseException):
    """The Lambda runtime ending an invocation (timeout, out of memory): no `except Exception`
    clause of ours runs, nothing is released."""


class LostResponses:
    """A botocore `before-send` hook: the request is delivered to DynamoDB (moto applies it),
    then its response is lost on the way back — a read timeout, which botocore's retry handler
    answers by sending the same request again, within the client's budget."""

    def __init__(
        self,
        client: Any,
        operation: str,
        when: Callable[[bytes], bool],
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self.client, self.event = client, f"before-send.dynamodb.{operation}"
        self.when, self.on_lost = when, on_lost
        self.remaining = 0
        self.sent = 0
        self.lost = 0

    def lose_next(self, count: int = 1) -> None:
        self.remaining += count

    def __call__(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> None:
        if not self.when(request.body or b""):
            return None  # moto's own before-send handler answers it
        self.sent += 1
        if not self.remaining:
            return None
        self.remaining -= 1
        if botocore_stubber(event_name, request) is None:  # moto's threaded server: over HTTP
            self.client._endpoint.http_session.send(request)
        self.lost += 1
        self.on_lost()
        raise ReadTimeoutError(endpoint_url=request.url)

    def __enter__(self) -> LostResponses:
        self.client.meta.events.register_first(self.event, self)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.meta.events.unregister(self.event, self)


@pytest.fixture
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime], clock: ShiftedClock) -> Runtime:
    installed = make_runtime(clock=clock)
    installed.run(installed.publish_agent(load_bank()))
    return installed


def inbox_states(stack: LocalStack) -> list[str]:
    return [item["state"]["S"] for item in inbox_items(stack)]


def assert_answered_once(runtime: Runtime, platforms: FakePlatforms, text: str) -> None:
    state = load_session(runtime, SESSION)
    assert [e.text for e in state.events if e.source is EventSource.CUSTOMER] == [text]
    (reply,) = [e for e in state.events if e.source is EventSource.AGENT]
    assert [r.json()["text"] for r in platforms.replies()] == [reply.text]


def is_an_inbox_claim(body: bytes) -> bool:
    return b'"INBOX#telegram#' in body


def test_a_claim_whose_response_was_lost_is_recognised_by_its_own_retry_and_queued_once(
    runtime: Runtime, stack: LocalStack, platforms: FakePlatforms
) -> None:
    ddb = clients.client("dynamodb")
    assert runtime.inbox._table.ddb is ddb  # the hook sits on the client the inbox really uses
    applied: list[list[str]] = []
    with LostResponses(
        ddb, "PutItem", is_an_inbox_claim, on_lost=lambda: applied.append(inbox_states(stack))
    ) as network:
        network.lose_next()
        assert telegram_says(CHAT, "hi", 601)["statusCode"] == 200

    assert applied == [["CLAIMED"]]  # DynamoDB had applied the claim when its response was lost
    assert (network.sent, network.lost) == (2, 1)  # and botocore sent it again
    assert queue_depth(stack) == 1
    assert inbox_states(stack) == ["QUEUED"]

    assert telegram_says(CHAT, "hi", 601)["statusCode"] == 200  # the platform retries anyway
    assert queue_depth(stack) == 1
    assert drain(stack) == [{"batchItemFailures": []}]
    assert_answered_once(runtime, platforms, "hi")


def test_a_webhook_killed_between_the_claim_and_the_enqueue_is_taken_over_by_the_retry(
    runtime: Runtime,
    stack: LocalStack,
    platforms: FakePlatforms,
    clock: ShiftedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_enqueue = runtime.enqueue
    kills = [LambdaKilled("injected: the webhook Lambda timed out after the claim")]

    def enqueue_unless_killed(queued: Any) -> str:
        if kills:
            raise kills.pop()
        return real_enqueue(queued)

    monkeypatch.setattr(runtime, "enqueue", enqueue_unless_killed)
    monkeypatch.setattr(webhook, "IN_FLIGHT_WAIT_SECONDS", 0.2)

    # No `except` of ours ran; Mangum turns the dead invocation into a 500 (AWS: no answer).
    assert telegram_says(CHAT, "hi", 602)["statusCode"] >= 500
    assert queue_depth(stack) == 0 and inbox_states(stack) == ["CLAIMED"]

    # An immediate retry cannot tell a dead claimant from a slow one: 503, retry later.
    retry = telegram_says(CHAT, "hi", 602)
    assert retry["statusCode"] == 503 and queue_depth(stack) == 0

    clock.advance(webhook.CLAIM_LEASE_SECONDS)  # the claimant is certainly dead by now
    assert telegram_says(CHAT, "hi", 602)["statusCode"] == 200
    assert queue_depth(stack) == 1 and inbox_states(stack) == ["QUEUED"]

    assert telegram_says(CHAT, "hi", 602)["statusCode"] == 200  # later retries: duplicates
    assert queue_depth(stack) == 1
    assert drain(stack) == [{"batchItemFailures": []}]
    assert_answered_once(runtime, platforms, "hi")
