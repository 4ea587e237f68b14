"""A platform that re-sends the same webhook many times — in a row, and all at once from 20
threads — against the served stack over real HTTP: every copy is acknowledged like the original,
one inbox claim, one queued message, one turn and one reply."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from engine.sessions.session import EventSource
from tests.reliability.channel_requests import BUILDERS, CHANNELS, SignedRequest, retried
from tests.reliability.served_stack import ServedStack

COPIES = 20
_ids = itertools.count(9_000_001)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStack]:
    with ServedStack(cache_dir=Path(tmp_path_factory.mktemp("cache"))) as stack:
        yield stack


@pytest.fixture(autouse=True)
def environment() -> None:
    """Replaces the Lambda tests' environment fixture: the served stack set its own."""


def a_message(served: ServedStack, channel: str) -> SignedRequest:
    event = conversation = next(_ids)
    return BUILDERS[channel](
        served.url(channel),
        "hi",
        event,
        conversation,
        callback_url=served.server.replies_url,
    )


def delivered(served: ServedStack, channel: str) -> int:
    if channel == "generic":
        return sum(len(replies) for replies in served.received.values())
    return len(served.platforms.replies(channel))


def assert_one_turn_and_one_reply(
    served: ServedStack, request: SignedRequest, claims_before: int, replies_before: int
) -> None:
    served.wait_until_quiet(timeout=60)
    message = served.normalized(request.channel, request.body, request.headers)
    state = served.session(served.session_id(request.channel, message.conversation_key))
    assert state is not None
    customer = [e for e in state.events if e.source is EventSource.CUSTOMER]
    agent = [e for e in state.events if e.source is EventSource.AGENT]
    assert [e.text for e in customer] == ["hi"]
    assert len(agent) == 1 and agent[0].turn_id == customer[0].turn_id
    assert served.inbox_claims() == claims_before + 1
    assert delivered(served, request.channel) == replies_before + 1


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_webhook_retried_20_times_in_a_row_runs_one_turn(
    channel: str, served: ServedStack
) -> None:
    request = a_message(served, channel)
    claims, replies = served.inbox_claims(), delivered(served, channel)

    responses = [
        served.post(channel, copy.body, copy.headers)
        for copy in (retried(request, attempt) for attempt in range(COPIES))
    ]

    assert {r.status_code for r in responses} == {200}
    assert {r.content for r in responses} == {responses[0].content}  # duplicates look the same
    assert_one_turn_and_one_reply(served, request, claims, replies)


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_webhook_sent_20_times_at_once_from_threads_runs_one_turn(
    channel: str, served: ServedStack
) -> None:
    request = a_message(served, channel)
    claims, replies = served.inbox_claims(), delivered(served, channel)
    start = threading.Barrier(COPIES)

    def deliver(attempt: int) -> int:
        copy = retried(request, attempt)
        with httpx.Client(timeout=30) as client:
            start.wait(timeout=30)
            return client.post(copy.url, content=copy.body, headers=copy.headers).status_code

    with ThreadPoolExecutor(max_workers=COPIES) as pool:
        statuses = list(pool.map(deliver, range(COPIES)))

    assert statuses == [200] * COPIES
    assert_one_turn_and_one_reply(served, request, claims, replies)
