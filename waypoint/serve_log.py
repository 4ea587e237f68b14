"""`waypoint serve`'s log: one line per HTTP request and one per turn.

A request's line shows its route, not its path: a path names sessions, customers, turns and
tool calls (`DELETE /api/customers/telegram/5151` would keep an erased person's id in the log
after their erasure, issue #33), so each path parameter is written as its name
(`/api/customers/{channel}/{customer_id}`). Only a channel, an agent or a studio asset — names of
the deployment, not of people — is shown by its value, and only when the request was answered
below 400 (a value the app did not accept may be anything). A path no route matches keeps only
the words the routes use (`/api/…`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from engine.model import AgentSnapshot
from engine.trace import TraceTitles, TurnTrace


def turn_line(trace: TurnTrace, agent: AgentSnapshot | None = None) -> str:
    """`turn <session> version <v> matched=[…] tools=[…] <ms> ms`: one finished turn, its
    guidelines and journeys by title."""
    names = TraceTitles(agent)
    matched = [names.guideline(m.guideline_id) for m in trace.matches if m.matched]
    tools = [f"{c.tool}:{c.status}" for c in trace.tool_calls]
    ms = sum(s.ms for s in trace.stages)
    return (
        f"turn    {trace.session_id} version {trace.agent_version} "
        f"matched=[{', '.join(matched)}] tools=[{', '.join(tools)}] {ms:.0f} ms"
    )


# Path parameters that name the deployment, not a person: shown when the request succeeded.
NAMING_NO_ONE = frozenset({"channel", "agent_id", "name"})
UNKNOWN = "…"  # a segment of a path no route matches, unless it is a word the routes use


class LoggedPath:
    """How a request path is written in the log: by the route `templates` it matches
    (`/api/sessions/{session_id}`), never by the ids it names."""

    def __init__(self, templates: Iterable[str]) -> None:
        from starlette.routing import compile_path

        unique = sorted(set(templates), key=_static_first)
        self._routes = [compile_path(t)[:2] for t in unique]
        self._words = {s for t in unique for s in t.split("/") if s and "{" not in s}

    def __call__(self, path: str, status: int) -> str:
        for regex, path_format in self._routes:
            found = regex.match(path)
            if found is None:
                continue
            shown = {
                name: value if name in NAMING_NO_ONE and status < 400 else f"{{{name}}}"
                for name, value in found.groupdict().items()
            }
            return path_format.format(**shown)
        segments = path.split("/")
        return "/".join(s if not s or s in self._words else UNKNOWN for s in segments)

    @classmethod
    def of(cls, app: Any) -> LoggedPath:
        """The route templates of a Starlette app, its mounts' (a FastAPI app's from its
        OpenAPI document too) included."""
        return cls(_templates(getattr(app, "routes", []), ""))


def _templates(routes: Iterable[Any], prefix: str) -> Iterator[str]:
    from starlette.routing import Mount, Route

    for route in routes:
        if isinstance(route, Mount):
            inner = prefix + route.path
            openapi = getattr(route.app, "openapi", None)
            if callable(openapi):  # a FastAPI app: its included routers' routes too
                yield from (inner + path for path in openapi().get("paths", {}))
            yield from _templates(getattr(route.app, "routes", []), inner)
        elif isinstance(route, Route):
            yield prefix + route.path


def _static_first(template: str) -> tuple[int, str]:
    # `/agents/check` before `/agents/{agent_id}`: the route Starlette would pick
    return (template.count("{"), template)


class RequestLog:
    """ASGI middleware: `METHOD route status ms`, one line per HTTP request (`waypoint serve`).
    The query string is left out (it may carry a token), and the ids in the path (`path`)."""

    def __init__(
        self,
        app: Any,
        log_line: Callable[[str], None],
        *,
        api_turns: Callable[[Sequence[str]], None] | None = None,
        path: Callable[[str, int], str] | None = None,
    ) -> None:
        self.app = app
        self.log_line = log_line
        self.api_turns = api_turns  # logs the turn a management API call ran, by session
        self.path = path if path is not None else LoggedPath.of(app)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client sees when the app raises before answering

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            ms = (time.perf_counter() - started) * 1000
            logged = self.path(scope["path"], status)
            self.log_line(f"request {scope['method']} {logged} {status} {ms:.0f} ms")
        ran = _API_TURN.fullmatch(scope["path"])
        if ran and status == 200 and scope["method"] == "POST" and self.api_turns is not None:
            # a turn the management API ran in the request (not queued: that one is 202)
            await asyncio.to_thread(self.api_turns, [ran["session"]])


# POST /api/sessions/{session}/messages or …/interrupts/{call}: answered with a turn's reply
_API_TURN = re.compile(r"/api/sessions/(?P<session>[^/]+)/(?:messages|interrupts/[^/]+)")
