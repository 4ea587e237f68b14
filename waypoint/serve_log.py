"""`waypoint serve`'s log: one line per HTTP request and one per turn."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
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


class RequestLog:
    """ASGI middleware: `METHOD path status ms`, one line per HTTP request (`waypoint serve`).
    The query string is left out: it may carry a token."""

    def __init__(
        self,
        app: Any,
        log_line: Callable[[str], None],
        *,
        api_turns: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.app = app
        self.log_line = log_line
        self.api_turns = api_turns  # logs the turn a management API call ran, by session

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
            self.log_line(f"request {scope['method']} {scope['path']} {status} {ms:.0f} ms")
        ran = _API_TURN.fullmatch(scope["path"])
        if ran and status == 200 and scope["method"] == "POST" and self.api_turns is not None:
            # a turn the management API ran in the request (not queued: that one is 202)
            await asyncio.to_thread(self.api_turns, [ran["session"]])


# POST /api/sessions/{session}/messages or …/interrupts/{call}: answered with a turn's reply
_API_TURN = re.compile(r"/api/sessions/(?P<session>[^/]+)/(?:messages|interrupts/[^/]+)")
