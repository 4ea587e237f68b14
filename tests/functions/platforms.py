"""Every chat platform's send API, faked in process with `httpx.MockTransport`.

The worker's one httpx client is built on this transport, so `Channel.send` runs its real request
building and answer parsing; nothing leaves the process. Each platform answers like the real one,
unless told to fail the next sends (`fail_next`).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import httpx

BASE_URLS = {
    "telegram": "https://telegram.test",
    "slack": "https://slack.test/api",
    "whatsapp": "https://graph.test",
    "twilio": "https://twilio.test",
}
CALLBACK_URL = "https://client.test/replies"  # the generic channel's callback
PUBLIC_TEST_ADDRESS = "93.184.215.14"  # a public address: what the test hosts "resolve" to


async def resolve_to_public(host: str, port: int) -> list[str]:
    """The generic channel's resolver in tests: no DNS, every host is public."""
    return [PUBLIC_TEST_ADDRESS]


_HOSTS = {
    "telegram.test": "telegram",
    "slack.test": "slack",
    "graph.test": "whatsapp",
    "twilio.test": "twilio",
    "client.test": "generic",
}


@dataclass(frozen=True)
class Sent:
    """One request a channel made."""

    channel: str
    path: str
    body: bytes
    status: int

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode()))

    @property
    def is_reply(self) -> bool:
        """A message to the customer (not Telegram's answerCallbackQuery)."""
        return not self.path.endswith("/answerCallbackQuery")


class FakePlatforms:
    def __init__(self) -> None:
        self.requests: list[Sent] = []
        self._failures: deque[int] = deque()

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """The next `count` sends answer `status` (503: retryable, 403: refused for good)."""
        self._failures.extend([status] * count)

    def replies(self, channel: str | None = None, *, delivered: bool = True) -> list[Sent]:
        """Messages sent to customers (accepted ones unless `delivered=False`)."""
        return [
            r
            for r in self.requests
            if r.is_reply
            and (channel is None or r.channel == channel)
            and (not delivered or r.status < 400)
        ]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        channel = _HOSTS.get(request.url.host, "unknown")
        status = self._failures.popleft() if self._failures else 0
        n = len(self.requests) + 1
        body = request.content
        if status:
            self.requests.append(Sent(channel, request.url.path, body, status))
            return httpx.Response(status, json=_failure(channel, status))
        status, answer = _success(channel, request.url.path, n)
        self.requests.append(Sent(channel, request.url.path, body, status))
        return httpx.Response(status, json=answer)


def _success(channel: str, path: str, n: int) -> tuple[int, dict[str, Any]]:
    if channel == "telegram":
        result: Any = {"message_id": 5000 + n} if path.endswith("/sendMessage") else True
        return 200, {"ok": True, "result": result}
    if channel == "slack":
        return 200, {"ok": True, "channel": "C111", "ts": f"1700000000.{n:06d}"}
    if channel == "whatsapp":
        return 200, {"messaging_product": "whatsapp", "messages": [{"id": f"wamid.out{n}"}]}
    if channel == "twilio":
        return 201, {"sid": f"SM{n:032d}", "status": "queued"}
    return 200, {"id": f"reply-{n}"}


def _failure(channel: str, status: int) -> dict[str, Any]:
    if channel == "telegram":
        return {"ok": False, "error_code": status, "description": "Service Unavailable"}
    if channel == "slack":
        return {"ok": False, "error": "service_unavailable"}
    return {"error": {"message": "unavailable", "code": status}}
