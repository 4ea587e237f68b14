"""Hostile HTTP against the served stack (uvicorn in front of the webhook and management apps,
as `waypoint serve` runs them): what only shows on a real socket — chunked bodies with no
Content-Length, a Content-Length that lies, oversized headers, garbage request lines, odd paths
and methods → refused, and nothing written (no inbox claim, no queued message, no session)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.sessions.session import PendingInterrupt, SessionState
from infra.channels.ingress import DEFAULT_MAX_BODY_BYTES
from tests.functions.conftest import API_KEY
from tests.functions.test_management import FORM_CALL, MOVERS
from tests.reliability.channel_requests import BUILDERS
from tests.reliability.served_stack import ServedStack


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedStack]:
    with ServedStack(cache_dir=Path(tmp_path_factory.mktemp("cache"))) as stack:
        yield stack


@pytest.fixture(autouse=True)
def environment() -> None:
    """Replaces the Lambda tests' environment fixture: the served stack set its own."""


@pytest.fixture(autouse=True)
def nothing_written(served: ServedStack) -> Iterator[None]:
    claims = served.inbox_claims()
    yield
    assert served.inbox_claims() == claims
    assert served.queue_depth() == 0


def raw_exchange(served: ServedStack, request: bytes) -> int:
    """Send raw bytes to the server and return the response's status code (0 if it hung up)."""
    host, port = served.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        try:
            head = connection.recv(64)
        except (ConnectionResetError, TimeoutError):
            return 0
    parts = head.split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def genuine(served: ServedStack, channel: str, text: str = "hi") -> tuple[bytes, dict[str, str]]:
    request = BUILDERS[channel](
        served.url(channel), text, 424242, 4242, callback_url=served.server.replies_url
    )
    return request.body, request.headers


def test_a_chunked_body_over_the_limit_is_413_before_it_is_all_read(served: ServedStack) -> None:
    body, headers = genuine(served, "generic", "x" * (DEFAULT_MAX_BODY_BYTES + 10))

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 16 * 1024):
            yield body[start : start + 16 * 1024]

    response = httpx.post(served.url("generic"), content=chunks(), headers=headers, timeout=30)

    assert response.status_code == 413
    assert "content-length" not in {k.lower() for k in headers}


def test_a_content_length_shorter_than_the_body_does_not_pass_verification(
    served: ServedStack,
) -> None:
    body, headers = genuine(served, "generic")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST /webhooks/generic HTTP/1.1\r\nHost: x\r\n{head}Content-Length: 20\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body

    assert raw_exchange(served, request) in (400, 401)


def test_oversized_headers_are_refused_by_the_server(served: ServedStack) -> None:
    body, headers = genuine(served, "telegram")
    headers = {**headers, "X-Padding": "p" * 200_000}

    try:
        status = httpx.post(served.url("telegram"), content=body, headers=headers).status_code
    except httpx.TransportError:
        status = 0  # h11 refuses the head and hangs up (a reset or a closed connection)
    assert status in (0, 400, 413, 431)


@pytest.mark.parametrize(
    "request_line",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /webhooks/telegram HTTP/9.9\r\nHost: x\r\n\r\n",
        b"POST /webhooks/telegram HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST /webhooks/telegram HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS hello on the plain port
    ],
    ids=["garbage", "http-9.9", "negative-length", "bad-chunk", "tls-hello"],
)
def test_malformed_http_is_refused(served: ServedStack, request_line: bytes) -> None:
    status = raw_exchange(served, request_line)

    assert status == 0 or 400 <= status < 500 or status == 505


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("PROPFIND", "/webhooks/telegram", 405),
        ("DELETE", "/webhooks/generic", 405),
        ("POST", "/webhooks/%2e%2e%2fapi%2fsessions", 404),
        ("POST", "/webhooks/telegram/../../api/sessions", 401),  # the client resolves the ..
        ("POST", "/webhooks/%F0%9F%92%B8", 404),
        ("POST", "/api/sessions", 401),
        ("GET", "/api/sessions/anything/events", 401),
        ("GET", "/local/replies", 404),
    ],
)
def test_odd_methods_and_paths_reach_nothing(
    served: ServedStack, method: str, path: str, status: int
) -> None:
    body, headers = genuine(served, "telegram")

    response = httpx.request(method, served.base_url + path, content=body, headers=headers)

    assert response.status_code == status


def test_a_forged_reply_callback_is_refused_by_the_local_inbox(served: ServedStack) -> None:
    """The local reply inbox (what `waypoint serve` offers a front end) verifies signatures too."""
    response = httpx.post(
        served.server.replies_url,
        content=b'{"conversation_id": "c", "text": "you won a prize"}',
        headers={"x-waypoint-timestamp": "1", "x-waypoint-signature": "sha256=00"},
    )

    assert response.status_code == 401
    assert "c" not in served.received


def test_the_management_api_over_http_wants_its_key(served: ServedStack) -> None:
    refused = httpx.get(served.base_url + "/api/agents/bank")
    allowed = httpx.get(served.base_url + "/api/agents/bank", headers={"x-api-key": API_KEY})

    assert refused.status_code == 401
    assert allowed.status_code == 200 and allowed.json()["id"] == "bank"


def test_a_form_result_reaches_its_session_through_the_served_management_api(
    served: ServedStack,
) -> None:
    """`waypoint serve` hosts the management app under /api: a form service posts its result."""
    assert served.runtime is not None
    headers = {"x-api-key": API_KEY}
    # forced: the served registry (the banking tools) has no `address_form`; the form's result
    # is delivered by the management API, not by running the tool
    published = httpx.post(
        served.base_url + "/api/agents", params={"force": "true"}, json=MOVERS, headers=headers
    )
    assert published.status_code == 201
    session = SessionState(
        id="served-move",
        agent_id="movers",
        customer_id="u1",
        channel="api",
        journey_paths={"move": ("form",)},
        pending_interrupt=PendingInterrupt(
            tool="address_form",
            call_id=FORM_CALL,
            kind="interrupter",
            journey_id="move",
            node_id="form",
        ),
    )
    asyncio.run(served.runtime.sessions.create(session))
    url = f"{served.base_url}/api/sessions/served-move/interrupts/{FORM_CALL}"

    first = httpx.post(url, json={"result": {"street": "Main St 1"}}, headers=headers, timeout=60)
    again = httpx.post(url, json={"result": {"street": "Main St 1"}}, headers=headers, timeout=60)

    assert first.status_code == 200 and first.json()["reply"]["text"]
    assert again.status_code == 200 and again.json()["replayed"] is True
    resumed = served.session("served-move")
    assert resumed is not None and resumed.pending_interrupt is None
    assert resumed.collected_values()["street"] == "Main St 1"
