"""A local stand-in for every platform's send API, on 127.0.0.1 (a free port), so `Channel.send`
runs over real HTTP without a network.

    with FakePlatform() as platform:
        platform.script(Scripted(429, {"ok": False, "error_code": 429, …}))
        channel = TelegramChannel(…, base_url=platform.url("telegram"))
        …
        request = platform.requests[-1]   # method, path, headers, body, json(), form()

Unscripted requests get a success answer shaped like the platform's (chosen by path prefix).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from fastapi import FastAPI, Request, Response


@dataclass(frozen=True)
class Scripted:
    """The next answer: a status, a JSON body (or raw text) and headers."""

    status: int
    body: dict[str, Any] | str = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode(), keep_blank_values=True))


class FakePlatform:
    """Records every request; answers from the script, else with a platform-shaped success."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: deque[Scripted] = deque()
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def url(self, prefix: str = "") -> str:
        assert self._socket is not None, "server not started"
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}/{prefix}".rstrip("/")

    def script(self, *answers: Scripted) -> None:
        self._script.extend(answers)

    def reset(self) -> None:
        self.requests.clear()
        self._script.clear()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakePlatform:
        # IPPROTO_TCP: lets asyncio set TCP_NODELAY on accepted sockets (no 40 ms Nagle stalls).
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._server = uvicorn.Server(
            uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake platform server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> FakePlatform:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the HTTP app ---------------------------------------------------------------------------

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{path:path}", methods=["GET", "POST"])
        async def anything(request: Request, path: str) -> Response:
            body = await request.body()
            self.requests.append(Recorded(request.method, "/" + path, dict(request.headers), body))
            answer = self._script.popleft() if self._script else _success(path, len(self.requests))
            content = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
            media_type = "text/plain" if isinstance(answer.body, str) else "application/json"
            return Response(content, answer.status, answer.headers, media_type=media_type)

        return app


def _success(path: str, n: int) -> Scripted:
    if path.startswith("telegram/"):
        return Scripted(
            200, {"ok": True, "result": {"message_id": 1000 + n} if "sendMessage" in path else True}
        )
    if path.startswith("slack/"):
        return Scripted(200, {"ok": True, "channel": "C111", "ts": f"1700000000.{n:06d}"})
    if path.startswith("graph/"):
        return Scripted(
            200, {"messaging_product": "whatsapp", "messages": [{"id": f"wamid.out{n}"}]}
        )
    if path.startswith("twilio/"):
        return Scripted(201, {"sid": f"SM{n:032d}", "status": "queued"})
    return Scripted(200, {"id": f"cb-{n}"})
