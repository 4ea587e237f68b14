"""Typed tool parameters (`engine.values.types`): a tool receives the Python value its signature
declares — a `date`, a `Decimal`, `Money`, an `Enum` member, a list — in the process and after a
round trip through the Step Functions wire format; a type the engine cannot read is refused when
the tool is declared, naming the tool, the parameter and the supported types; and a value that
does not read as its type never reaches the tool."""

from __future__ import annotations

import enum
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
from typer.testing import CliRunner

from engine.authoring import load_agent
from engine.compose import ComposedReply
from engine.errors import InvalidAgentDefinition
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.ports import ToolCall, ToolContext
from engine.testing import ScriptedLLM
from engine.toolkit import ToolRegistry, ToolResult, UnsupportedParameterType, json_safe, tool
from engine.tools.calls import ToolCallPlan
from engine.values import Money
from tests.engine.pipeline_kit import compose_echo, match_when, tool_harness
from waypoint.cli import app

RECEIVED: list[dict[str, Any]] = []


class Plan(enum.Enum):
    BASIC = "basic"
    PREMIUM = "premium"


@tool(description="Book a payment", currency="EUR")
def schedule(
    day: date,
    at: time,
    amount: Money,
    fee: Decimal,
    rate: float,
    count: int,
    plan: Plan,
    size: Literal["s", "m"],
    tags: list[str],
    when: datetime | None = None,
) -> ToolResult:
    RECEIVED.append(
        {"day": day, "at": at, "amount": amount, "fee": fee, "rate": rate, "count": count,
         "plan": plan, "size": size, "tags": tags, "when": when}
    )  # fmt: skip
    return ToolResult(data={"ok": True})


ENGINE_VALUES = {
    "day": date(2026, 12, 12),
    "at": time(15, 30),
    "amount": Money(amount=Decimal("40"), currency="EUR"),
    "fee": Decimal("1.50"),
    "rate": Decimal("0.25"),
    "count": 3,
    "plan": "premium",
    "size": "m",
    "tags": ["a", "b"],
}


def test_the_signature_declares_the_types_the_model_and_the_gate_read() -> None:
    spec = schedule.tool_spec  # type: ignore[attr-defined]
    types = {p.name: (p.type, p.items, p.enum, p.currency, p.required) for p in spec.parameters}
    assert types == {
        "day": ("date", None, (), None, True),
        "at": ("time", None, (), None, True),
        "amount": ("money", None, (), "EUR", True),
        "fee": ("number", None, (), None, True),
        "rate": ("number", None, (), None, True),
        "count": ("integer", None, (), None, True),
        "plan": ("string", None, ("basic", "premium"), None, True),
        "size": ("string", None, ("s", "m"), None, True),
        "tags": ("array", "string", (), None, True),
        "when": ("datetime", None, (), None, False),
    }


def _assert_received_types() -> None:
    got = RECEIVED[-1]
    assert got["day"] == date(2026, 12, 12) and type(got["day"]) is date
    assert got["at"] == time(15, 30)
    assert got["amount"] == Money(amount=Decimal("40.00"), currency="EUR")
    assert got["fee"] == Decimal("1.50") and isinstance(got["fee"], Decimal)
    assert got["rate"] == 0.25 and isinstance(got["rate"], float)
    assert got["count"] == 3
    assert got["plan"] is Plan.PREMIUM
    assert got["size"] == "m" and got["tags"] == ["a", "b"]


async def test_a_tool_receives_its_declared_types_in_process() -> None:
    registry = ToolRegistry([schedule])
    call = ToolCall(id="c1", tool="schedule", arguments=dict(ENGINE_VALUES), idempotency_key="k")

    outcome = await registry.invoke(
        call, ToolContext(agent_id="a", session_id="s", customer_id="c", turn_id="t")
    )

    assert outcome.error is None, outcome.error
    _assert_received_types()


async def test_a_tool_receives_its_declared_types_after_the_step_functions_wire() -> None:
    # Step Functions carries JSON: dates, Decimals and Money arrive as text.
    wire = json_safe(dict(ENGINE_VALUES))
    assert wire["day"] == "2026-12-12" and wire["amount"] == "40.00 EUR" and wire["fee"] == "1.50"
    registry = ToolRegistry([schedule])

    outcome = await registry.invoke(
        ToolCall(id="c1", tool="schedule", arguments=wire, idempotency_key="k"),
        ToolContext(agent_id="a", session_id="s", customer_id="c", turn_id="t"),
    )

    assert outcome.error is None, outcome.error
    _assert_received_types()


async def test_text_that_is_not_its_type_never_reaches_the_tool_even_from_the_wire() -> None:
    RECEIVED.clear()
    registry = ToolRegistry([schedule])
    bad = {**json_safe(dict(ENGINE_VALUES)), "day": "3"}

    outcome = await registry.invoke(
        ToolCall(id="c1", tool="schedule", arguments=bad, idempotency_key="k"),
        ToolContext(agent_id="a", session_id="s", customer_id="c", turn_id="t"),
    )

    assert RECEIVED == []
    assert outcome.error is not None and "day" in outcome.error


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [(dict, "dict"), (list, "list"), (object, "object"), (int | str, "int | str"),
     (dict[str, int], "dict[str, int]"), (list[dict[str, int]], "list[dict[str, int]]")],
)  # fmt: skip
def test_a_type_the_engine_cannot_read_is_refused_naming_tool_parameter_and_types(
    annotation: Any, shown: str
) -> None:
    def bad(payload: Any) -> ToolResult:
        return ToolResult()

    bad.__annotations__["payload"] = annotation
    with pytest.raises(UnsupportedParameterType) as refused:
        tool(description="take a payload")(bad)
    text = str(refused.value)
    assert "tool 'bad'" in text and "parameter 'payload'" in text and shown in text
    assert "datetime.date" in text and "Money" in text and "a list of one of these" in text


def test_a_yaml_declaration_of_an_unreadable_type_is_refused_with_the_supported_ones() -> None:
    doc = {
        "agent": {"id": "a", "name": "A"},
        "tools": [{"name": "t", "parameters": [{"name": "payload", "type": "object"}]}],
    }
    with pytest.raises(InvalidAgentDefinition) as refused:
        load_agent(doc)
    text = str(refused.value)
    assert "payload" in text and "unsupported type 'object'" in text and "money" in text


def test_waypoint_validate_refuses_an_unsupported_parameter_type(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("agent: {id: shop, name: Shop}\n")
    (tmp_path / "shop_tools.py").write_text(
        "from engine.toolkit import ToolResult, tool\n\n"
        "@tool(description='Save the basket')\n"
        "def save_basket(basket: dict) -> ToolResult:\n"
        "    return ToolResult()\n\n"
        "TOOLS = [save_basket]\n"
    )
    result = CliRunner().invoke(
        app,
        ["validate", str(tmp_path / "agent.yaml"), "--tools", "shop_tools"],
        env={"PYTHONPATH": str(tmp_path)},
        catch_exceptions=False,
    )
    assert result.exit_code != 0
    out = " ".join(result.output.split())
    assert "tool 'save_basket'" in out and "parameter 'basket'" in out and "supported" in out


async def test_a_date_argument_that_does_not_read_as_a_date_is_asked_again_not_run() -> None:
    """The reviewed failure: a `date` parameter reached the tool as the string '3' and the agent
    answered as if it had succeeded."""
    RECEIVED.clear()
    booked: list[date] = []

    @tool(description="Book a table")
    def book(day: date) -> ToolResult:
        booked.append(day)
        return ToolResult(data={"booked": day.isoformat()})

    rule = Guideline(id="book", condition="wants a table", action="Book it", tools=("book",))
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"table": True}))
    llm.on(
        ToolCallPlan,
        {"calls": [{"tool": "book", "arguments": [{"name": "day", "value": "3"}]}]},
        {"calls": [{"tool": "book", "arguments": [{"name": "day", "value": "2026-12-03"}]}]},
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, book, guidelines=[rule], index=False)
    await h.start()

    out = await h.say("a table on the 3rd please")

    assert booked == []
    assert [c.status for c in out.trace.tool_calls] == ["invalid_arguments"]
    assert "must be a date" in llm.calls_for(ComposedReply)[-1].prompt

    await h.say("on 3 December 2026")
    assert booked == [date(2026, 12, 3)] and type(booked[0]) is date
