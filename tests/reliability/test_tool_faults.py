"""Tool faults inside real turns: the banking concierge's stock journey over the worker, with its
price tool replaced by one that fails. Whatever the tool does, the LLM gets an error result (or
truncated data), the tool event is stored, the turn commits and exactly one reply goes out."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from engine.sessions.session import Event, EventKind, EventSource, SessionState
from engine.toolkit import MAX_RESULT_CHARS, InProcessDispatcher, ToolRegistry, ToolResult, tool
from examples.banking import tools as bank_tools
from infra.outbox import OutboxStatus
from infra.runtime import Runtime
from infra.turn_queue import session_id_for
from tests.functions.conftest import drain, load_session, queue_depth, telegram_says
from tests.functions.platforms import FakePlatforms

CHAT = 5151
SESSION = session_id_for("bank", "telegram", f"tg:700100200:{CHAT}")
TIMEOUT = 0.2  # seconds: the failing tools' own limit


class _Opaque:
    """Something a careless tool might return: not JSON, not a pydantic model."""


def price_tool(
    behavior: Callable[[], Any], *, is_async: bool = False, timeout: float = TIMEOUT
) -> Any:
    """A `lookup_stock_price` that behaves badly, with a short timeout by default."""
    decorate = tool(
        name="lookup_stock_price",
        description="Look up the current price of a stock",
        timeout_seconds=timeout,
    )
    if is_async:

        async def lookup_stock_price(symbol: str) -> ToolResult:
            return await behavior()

        return decorate(lookup_stock_price)

    def lookup_stock_price_sync(symbol: str) -> ToolResult:
        return behavior()

    return decorate(lookup_stock_price_sync)


def _raise() -> ToolResult:
    raise ConnectionError("market data feed unreachable")


async def _hang() -> ToolResult:
    await asyncio.sleep(30)
    return ToolResult(data={"price": "never"})


def _block() -> ToolResult:
    time.sleep(1.0)  # a blocking HTTP call without its own timeout
    return ToolResult(data={"price": "late"})


def _huge_data() -> ToolResult:
    return ToolResult(data={"ticks": [{"t": i, "price": "187.20"} for i in range(100_000)]})


def _huge_view() -> ToolResult:
    # ~1.2 MB that does not compress: more than a DynamoDB item even gzipped (offloaded to S3)
    return ToolResult(data={"price": "187.20"}, view={"chart": os.urandom(600_000).hex()})


def _opaque_data() -> ToolResult:
    return ToolResult(data={"price": "187.20", "source": _Opaque()})


def _opaque_view() -> ToolResult:
    return ToolResult(data={"price": "187.20"}, view={"type": "chart", "figure": _Opaque()})


def install_tools(runtime: Runtime, monkeypatch: pytest.MonkeyPatch, price: Any) -> None:
    """The concierge's tools, in process, with `lookup_stock_price` replaced."""
    others = [t for t in bank_tools.TOOLS if t.tool_spec.name != "lookup_stock_price"]
    dispatcher = InProcessDispatcher(ToolRegistry([*others, price]))
    monkeypatch.setitem(runtime.__dict__, "tools", dispatcher)


def ask_for_a_price(stack: Any) -> list[dict[str, Any]]:
    """Two turns: the stock journey asks which company, then runs both of its tools."""
    for update_id, text in ((1, "I would like to know a stock price"), (2, "apple")):
        assert telegram_says(CHAT, text, update_id)["statusCode"] == 200
        responses = drain(stack)
    return responses


def price_event(state: SessionState) -> Event:
    (event,) = [
        e
        for e in state.events
        if e.kind is EventKind.TOOL and e.data["tool"] == "lookup_stock_price"
    ]
    return event


def as_committed(runtime: Runtime, event: Event) -> Event:
    """The event as committed, its channel payload (the view) included: a turn's window leaves
    the payload out (`engine.sessions.history`), the history API reads it back."""
    (stored,) = runtime.run(runtime.sessions.events(SESSION, after=event.offset - 1, limit=1))
    return stored


def assert_the_turn_completed(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, responses: list[dict[str, Any]]
) -> SessionState:
    assert responses == [{"batchItemFailures": []}]
    state = load_session(runtime, SESSION)
    customer = [e for e in state.events if e.source is EventSource.CUSTOMER]
    agent = [e for e in state.events if e.source is EventSource.AGENT]
    assert [e.text for e in customer] == ["I would like to know a stock price", "apple"]
    assert len(agent) == 2 and all(e.text for e in agent)
    for reply in agent:  # each reply went out once (a long one in several platform messages)
        entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
        assert entry is not None and entry.status is OutboxStatus.SENT
    assert len(platforms.replies()) == sum(len(entry_ids(runtime, e)) for e in agent)
    assert queue_depth(stack) == 0
    return state


def entry_ids(runtime: Runtime, reply: Event) -> tuple[str, ...]:
    entry = runtime.run(runtime.outbox.get(SESSION, reply.turn_id or ""))
    assert entry is not None
    return entry.message_ids


def tool_status(runtime: Runtime, event: Event) -> tuple[str, str]:
    trace = runtime.run(runtime.sessions.trace(SESSION, event.turn_id or ""))
    assert trace is not None
    (call,) = [c for c in trace["tool_calls"] if c["tool"] == "lookup_stock_price"]
    return call["status"], call["detail"]


@pytest.mark.parametrize(
    ("price", "error"),
    [
        (price_tool(_raise), "ConnectionError: market data feed unreachable"),
        (price_tool(_hang, is_async=True), f"timed out after {TIMEOUT:g}s"),
    ],
    ids=["exception", "async-timeout"],
)
def test_a_failing_tool_becomes_an_error_result_and_the_turn_completes(
    price: Any,
    error: str,
    runtime: Runtime,
    stack: Any,
    platforms: FakePlatforms,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_tools(runtime, monkeypatch, price)
    started = time.perf_counter()

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    event = price_event(state)
    assert event.data["error"] == error
    assert event.data["llm_view"] == {"error": error}  # what the LLM was shown
    assert tool_status(runtime, event) == ("error", error)
    assert time.perf_counter() - started < 10  # the hanging tool did not hold the turn


def test_a_huge_tool_result_reaches_the_llm_truncated_and_the_turn_completes(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_tools(runtime, monkeypatch, price_tool(_huge_data, timeout=30))  # not a timeout test

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    event = price_event(state)
    view = event.data["llm_view"]
    assert set(view) == {"truncated"} and len(view["truncated"]) == MAX_RESULT_CHARS
    assert tool_status(runtime, event)[0] == "ok"


def test_a_huge_tool_view_is_stored_off_item_and_the_turn_completes(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_tools(runtime, monkeypatch, price_tool(_huge_view, timeout=30))

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    event = as_committed(runtime, price_event(state))
    assert len(event.data["view"]["chart"]) == 1_200_000  # read back from S3, intact
    assert event.data["llm_view"] == {"price": "187.20"}  # the view never reaches the LLM


def test_a_blocking_sync_tool_is_cut_off_at_its_timeout(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by this suite: a sync tool ran on the event loop, out of `wait_for`'s reach."""
    install_tools(runtime, monkeypatch, price_tool(_block))

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    event = price_event(state)
    assert event.data["error"] == f"timed out after {TIMEOUT:g}s"
    assert tool_status(runtime, event) == ("error", f"timed out after {TIMEOUT:g}s")


def test_a_tool_returning_data_that_is_not_json_still_completes_the_turn(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by this suite: the tool event could not be serialized, so every SQS retry failed
    the same way and the message ended in the DLQ unanswered."""
    install_tools(runtime, monkeypatch, price_tool(_opaque_data))

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    view = price_event(state).data["llm_view"]
    assert view["price"] == "187.20" and isinstance(view["source"], str)


def test_a_tool_returning_a_view_that_is_not_json_still_completes_the_turn(
    runtime: Runtime, stack: Any, platforms: FakePlatforms, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_tools(runtime, monkeypatch, price_tool(_opaque_view))

    state = assert_the_turn_completed(runtime, stack, platforms, ask_for_a_price(stack))

    assert isinstance(as_committed(runtime, price_event(state)).data["view"]["figure"], str)
