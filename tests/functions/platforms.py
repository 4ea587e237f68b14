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
        """A message to the customer (not Telegram's answerCallbackQuery, nor a typing
        indicator: Telegram's sendChatAction, Slack's assistant status, WhatsApp's read mark,
        Twilio's typing indicator)."""
        return _is_reply(self.path, self.body)

    @property
    def is_typing(self) -> bool:
        """A typing indicator."""
        return _is_typing(self.path, self.body)


def _is_typing(path: str, body: bytes) -> bool:
    return (
        path.endswith(
            ("/sendChatAction", "/assistant.threads.setStatus", "/Indicators/Typing.json")
        )
        or b'"typing_indicator"' in body
    )


def _is_reply(path: str, body: bytes) -> bool:
    return not path.endswith("/answerCallbackQuery") and not _is_typing(path, body)


class FakePlatforms:
    def __init__(self) -> None:
        self.requests: list[Sent] = []
        self._failures: deque[int] = deque()
        self.typing_status = 0  # answer every typing indicator with this status (0: success)

    def fail_typing(self, status: int = 500) -> None:
        """Every typing indicator from now on fails with `status`."""
        self.typing_status = status

    def typing(self, channel: str | None = None) -> list[Sent]:
        """The typing indicators sent."""
        return [r for r in self.requests if r.is_typing and channel in (None, r.channel)]

    def fail_next(self, count: int = 1, status: int = 503) -> None:
        """The next `count` replies answer `status` (503: retryable, 403: refused for good);
        typing indicators are answered normally (see `fail_typing`)."""
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
        body = request.content
        if _is_typing(request.url.path, body):
            status = self.typing_status
        elif _is_reply(request.url.path, body) and self._failures:
            status = self._failures.popleft()
        else:
            status = 0
        n = len(self.requests) + 1
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
