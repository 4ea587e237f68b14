"""Journey node selection end to end: the prompt (golden files), one scripted LLM call, the
verified step and the typed values. A scripted LLM reads the prompt and answers like a model would.

Golden files live in tests/snapshots/. After an intended change of the map or prompt text:
    WAYPOINT_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/engine/test_journey_selection.py
then review the diff of tests/snapshots/ like any other code change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from engine.agent_config import AgentConfig, LLMPurpose
from engine.context import TurnContext
from engine.errors import LLMError
from engine.llm import TurnLLM
from engine.matching.collected_values import CollectedItem, coerce_collected
from engine.matching.journey_answer import JourneyNodeSelection
from engine.matching.journey_graph import build_node_views
from engine.matching.journey_prompt import build_node_selection_prompt, transition_map_text
from engine.matching.journeys import select_journey_step
from engine.model import AgentSnapshot, CollectedField, Journey
from engine.ports import ToolOutcome
from engine.sessions.session import CollectedValue, Event, EventKind, EventSource, SessionState
from engine.testing import ScriptedLLM
from engine.trace import TurnTrace
from tests.engine.test_journey_graph import (
    chat,
    entry,
    fork,
    make_journey,
    tool,
    tool_chain_journey,
)
from tests.golden import assert_snapshot

T0 = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)

# --------------------------------------------------------------------------------------------------
# The banking transfer journey (the concierge's continuation, as a graph)


def transfer_journey() -> Journey:
    return make_journey(
        entry(),
        chat(
            "from_account",
            "Ask which account the money should come from",
            customer="named the account to send from",
            collects=[CollectedField(name="account", type="enum", choices=("checking", "savings"))],
        ),
        chat(
            "amount",
            "Ask how much to send",
            customer="said how much to send",
            collects=[CollectedField(name="amount", type="decimal", gt=0, description="in euros")],
        ),
        tool("check", "get_balance", action="Check that the balance covers the amount"),
        fork("covered"),
        chat(
            "confirm",
            "Read the transfer back and ask for confirmation",
            customer="confirmed or declined the transfer",
            collects=[CollectedField(name="confirmed", type="bool")],
        ),
        chat("too_low", "Explain that the balance is too low and offer a smaller amount"),
        tool("send", "make_transfer"),
        chat("done", "Give the customer the transfer reference"),
        edges=[
            "root -> from_account",
            "from_account -> amount",
            "amount -> check",
            "check -> covered",
            "covered -> confirm: the balance covers the amount",
            "covered -> too_low: the balance is lower than the amount",
            "too_low -> amount: the customer wants to try a smaller amount",
            "too_low -> END: the customer gives up",
            "confirm -> send: the customer confirmed",
            "confirm -> END: the customer declined",
            "send -> done",
            "done -> END",
        ],
        jid="transfer",
        title="Transfer money",
        conditions=("the customer wants to send money",),
        description="Move money from one of the customer's accounts to a saved payee.",
    )


def context(
    *messages: str,
    tool_results: Sequence[ToolOutcome] = (),
    collected: dict[str, Any] | None = None,
) -> TurnContext:
    """Messages alternate customer / agent, starting with the customer."""
    journey = transfer_journey()
    agent = AgentSnapshot(
        id="bank", name="Concierge", description="a retail bank's assistant", journeys=(journey,)
    )
    values = tuple(
        CollectedValue(journey_id=journey.id, node_id="?", name=k, value=v, turn_id="t0")
        for k, v in (collected or {}).items()
    )
    session = SessionState(id="s1", agent_id="bank", customer_id="c1", collected=values)
    events = [
        Event(
            id=f"e{i}",
            offset=i,
            kind=EventKind.MESSAGE,
            source=EventSource.CUSTOMER if i % 2 == 0 else EventSource.AGENT,
            created_at=T0,
            text=text,
        )
        for i, text in enumerate(messages)
    ]
    return TurnContext(agent, session, events, tool_results=tuple(tool_results))


def turn_llm(scripted: ScriptedLLM, trace: TurnTrace | None = None) -> TurnLLM:
    trace = trace or TurnTrace(turn_id="t1", session_id="s1", agent_id="bank", agent_version="v1")
    return TurnLLM(scripted, AgentConfig(), trace)


def step_answer(
    *steps: str,
    next_step: str | None = "",
    back: str | None = None,
    collected: dict[str, str] | None = None,
    applies: bool = True,
) -> dict[str, Any]:
    """A model answer as JSON-ready data (what the adapter would parse)."""
    return {
        "rationale": "scripted",
        "journey_applies": applies,
        "requires_backtracking": back is not None,
        "backtracking_target_step": back,
        "step_advancement": list(steps),
        "next_step": (steps[-1] if steps else None) if next_step == "" else next_step,
        "collected": [{"name": k, "value": v} for k, v in (collected or {}).items()],
    }


BALANCE = ToolOutcome(call_id="c1", tool="get_balance", data={"balance": "1200.00", "ccy": "EUR"})
MID_FLOW = ("from_account", "amount", "check")


# --------------------------------------------------------------------------------------------------
# Golden texts


def test_transition_map_before_the_journey_starts() -> None:
    journey = transfer_journey()
    text = transition_map_text(journey, build_node_views(journey), [], max_depth=3)
    assert_snapshot("journey_map_not_started", text)


def test_transition_map_mid_flow_shows_flags_values_and_horizon() -> None:
    journey = transfer_journey()
    text = transition_map_text(
        journey,
        build_node_views(journey),
        MID_FLOW,
        collected={"account": "savings", "amount": Decimal("300")},
        max_depth=2,
        condition_texts=("the customer asks to pay someone",),
        executed_tools={"get_balance"},
    )
    assert_snapshot("journey_map_mid_flow", text)


def test_node_selection_prompt_compact() -> None:
    journey = transfer_journey()
    ctx = context(
        "I'd like to send money to my landlord",
        "Sure. From which account?",
        "savings",
        "How much would you like to send?",
        "300 euros",
        tool_results=[BALANCE],
    )
    prompt = build_node_selection_prompt(
        ctx,
        journey,
        build_node_views(journey),
        MID_FLOW,
        collected={"account": "savings", "amount": Decimal("300")},
        max_depth=3,
        explain=False,
    )
    assert_snapshot("journey_prompt_compact", prompt)


def test_node_selection_prompt_explain_for_a_new_journey() -> None:
    journey = transfer_journey()
    ctx = context("Can I send 50 euros from checking to my sister?")
    prompt = build_node_selection_prompt(
        ctx, journey, build_node_views(journey), [], collected={}, max_depth=5, explain=True
    )
    assert_snapshot("journey_prompt_explain_new", prompt)


def test_the_prompt_is_a_pure_function_of_its_inputs() -> None:
    journey = transfer_journey()
    views = build_node_views(journey)
    ctx = context("send money please")

    def build(explain: bool) -> str:
        return build_node_selection_prompt(
            ctx, journey, views, [], collected={}, max_depth=5, explain=explain
        )

    assert build(False) == build(False)
    compact, explain = build(False).splitlines(), build(True).splitlines()
    changed = [line for line in explain if line not in compact]
    assert len(changed) == 1 and "why each transition" in changed[0]


# --------------------------------------------------------------------------------------------------
# One call per journey, or none


async def test_auto_return_after_a_tool_makes_no_llm_call() -> None:
    scripted = ScriptedLLM()
    journey = transfer_journey()
    previous = (*MID_FLOW, "covered", "confirm", "send")
    result = await select_journey_step(
        turn_llm(scripted),
        context("yes, send it"),
        journey,
        previous,
        executed_tools={"make_transfer"},
    )
    assert scripted.calls == []
    assert not result.used_llm
    assert result.step.node_id == "done" and result.step.path == (*previous, "done")


async def test_auto_return_walks_through_single_exit_forks_without_the_llm() -> None:
    scripted = ScriptedLLM()
    result = await select_journey_step(
        turn_llm(scripted),
        context("my account number is 12345"),
        tool_chain_journey(),
        ["ask", "run"],
        executed_tools={"get_balance"},
    )
    assert scripted.calls == []
    assert result.step.path == ("ask", "run", "f1", "f2", "done")
    assert result.step.node_id == "done" and not result.used_llm


async def test_node_selection_is_one_traced_call_per_journey() -> None:
    scripted = ScriptedLLM().on(JourneyNodeSelection, step_answer("2"))
    trace = TurnTrace(turn_id="t1", session_id="s1", agent_id="bank", agent_version="v1")
    await select_journey_step(
        turn_llm(scripted, trace),
        context("send money"),
        transfer_journey(),
        ["from_account"],
        executed_tools=set(),
    )
    assert len(scripted.calls) == 1
    [record] = trace.llm_calls
    assert record.purpose == LLMPurpose.SELECT_JOURNEY_NODE.value
    assert record.label == "transfer" and record.schema_name == "JourneyNodeSelection"


async def test_llm_failures_propagate_to_the_pipeline() -> None:
    scripted = ScriptedLLM().on(JourneyNodeSelection, LLMError("provider down"))
    with pytest.raises(LLMError):
        await select_journey_step(
            turn_llm(scripted), context("hi"), transfer_journey(), [], executed_tools=set()
        )


# --------------------------------------------------------------------------------------------------
# Behaviour (scripted)


async def test_customer_dependent_step_waits_for_the_answer() -> None:
    def model(prompt: str) -> dict[str, Any]:
        # the map tells the model what the customer still owes at the current step
        assert "STEP 2: Ask which account the money should come from" in prompt
        assert "CUSTOMER DEPENDENT — complete only once the customer has: named the account" in (
            prompt
        )
        assert "Current step: step 2 (executed last)" in prompt
        return step_answer("2")

    scripted = ScriptedLLM().on(JourneyNodeSelection, model)
    result = await select_journey_step(
        turn_llm(scripted),
        context("send money", "From which account?", "what's the difference between them?"),
        transfer_journey(),
        ["from_account"],
        executed_tools=set(),
    )
    assert result.step.outcome == "stay" and result.step.node_id == "from_account"
    assert result.collected == {}


async def test_a_customer_who_drops_the_journey_exits_it() -> None:
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer(applies=False, collected={"amount": "300"})
    )
    result = await select_journey_step(
        turn_llm(scripted),
        context("send money", "How much?", "forget it, what's my balance?"),
        transfer_journey(),
        ["from_account", "amount"],
        executed_tools=set(),
    )
    assert result.step.outcome == "exit"
    assert result.step.path == ("from_account", "amount", None)
    assert result.collected == {} and result.notes


async def test_given_values_are_typed_and_the_walk_stops_at_the_tool_step() -> None:
    scripted = ScriptedLLM().on(
        JourneyNodeSelection,
        step_answer("2", "3", "4", "5", "6", collected={"account": "SAVINGS", "amount": "300"}),
    )
    result = await select_journey_step(
        turn_llm(scripted),
        context("send 300 from savings"),
        transfer_journey(),
        ["from_account"],
        executed_tools=set(),
    )
    assert result.step.path == ("from_account", "amount", "check")
    assert result.step.node_id == "check" and result.step.outcome == "advance"
    assert result.collected == {"account": "savings", "amount": Decimal("300")}
    assert isinstance(result.collected["amount"], Decimal)


async def test_an_invalid_value_is_rejected_and_its_step_asked_again() -> None:
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer("3", "4", collected={"amount": "-5"})
    )
    result = await select_journey_step(
        turn_llm(scripted),
        context("send money", "How much?", "-5"),
        transfer_journey(),
        ["from_account", "amount"],
        executed_tools=set(),
    )
    assert result.collected == {}
    assert "rejected amount='-5': must be greater than 0" in result.notes
    assert result.step.outcome == "stay" and result.step.node_id == "amount"
    assert any("failed validation" in r for r in result.step.repairs)


async def test_a_correction_backtracks_and_updates_the_value() -> None:
    def model(prompt: str) -> dict[str, Any]:
        assert 'collects "amount" (number > 0, in euros): known = 200' in prompt
        assert "VISITED — done earlier in this run" in prompt
        return step_answer("3", "4", back="3", collected={"amount": "300"})

    scripted = ScriptedLLM().on(JourneyNodeSelection, model)
    previous = (*MID_FLOW, "covered", "confirm")
    result = await select_journey_step(
        turn_llm(scripted),
        context(
            "send money",
            "Send 200 from savings?",
            "actually make it 300",
            collected={"account": "savings", "amount": Decimal("200")},
        ),
        transfer_journey(),
        previous,
        executed_tools=set(),
    )
    assert result.step.outcome == "backtrack"
    assert result.step.path == (*previous, "amount", "check")
    assert result.collected == {"amount": Decimal("300")}


async def test_values_for_steps_not_reached_are_dropped_unless_the_customer_said_them() -> None:
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer("2", collected={"confirmed": "yes", "colour": "red"})
    )
    result = await select_journey_step(
        turn_llm(scripted),
        context("send money"),
        transfer_journey(),
        ["from_account"],
        executed_tools=set(),
    )
    assert result.collected == {}
    # 'confirmed' belongs to a step ahead, and nothing in the customer's words says it
    # (tests/engine/test_values_ahead.py has the values that are kept).
    assert (
        "ignored confirmed=True for a step ahead: not in the customer's words this turn"
        in result.notes
    )
    assert "ignored a value for unknown field 'colour'" in result.notes


async def test_completion_keeps_the_values_of_the_finished_run() -> None:
    scripted = ScriptedLLM().on(
        JourneyNodeSelection, step_answer("6", next_step="NONE", collected={"confirmed": "no"})
    )
    previous = (*MID_FLOW, "covered", "confirm")
    result = await select_journey_step(
        turn_llm(scripted),
        context("no, don't send it"),
        transfer_journey(),
        previous,
        executed_tools=set(),
    )
    assert result.step.outcome == "completed" and result.step.path == (*previous, None)
    assert result.collected == {"confirmed": False}


async def test_a_tool_step_that_ran_may_be_passed_in_the_same_turn() -> None:
    def model(prompt: str) -> dict[str, Any]:
        assert "TOOL STEP (get_balance) — its tools ran this turn" in prompt
        assert "get_balance" in prompt.split("## Context")[1]
        return step_answer("4", "5", "6")

    scripted = ScriptedLLM().on(JourneyNodeSelection, model)
    result = await select_journey_step(
        turn_llm(scripted),
        context("send 300 from savings", tool_results=[BALANCE]),
        transfer_journey(),
        MID_FLOW,
        executed_tools={"get_balance"},
    )
    assert result.step.path == (*MID_FLOW, "covered", "confirm")


# --------------------------------------------------------------------------------------------------
# Value coercion


def _coerce(field: CollectedField, raw: str) -> tuple[dict[str, Any], list[str]]:
    journey = make_journey(entry(), chat("a", "Ask", collects=[field]), edges=["root -> a"])
    return coerce_collected(journey, [CollectedItem(name=field.name, value=raw)], ["a"])


@pytest.mark.parametrize(
    ("field", "raw", "expected"),
    [
        (CollectedField(name="n", type="int", ge=1, le=10), "7", 7),
        (CollectedField(name="n", type="int"), "7.0", 7),
        (CollectedField(name="x", type="decimal"), "1,234.50", Decimal("1234.50")),
        (CollectedField(name="x", type="decimal", gt=0), "€ 300", Decimal("300")),
        (CollectedField(name="b", type="bool"), "Yes", True),
        (CollectedField(name="d", type="date"), "2025-03-14", date(2025, 3, 14)),
        (
            CollectedField(name="e", type="enum", choices=("Checking", "Savings")),
            "savings",
            "Savings",
        ),
        (CollectedField(name="s", type="str"), "  Ada Lovelace ", "Ada Lovelace"),
    ],
)
def test_values_are_typed(field: CollectedField, raw: str, expected: Any) -> None:
    values, notes = _coerce(field, raw)
    assert values == {field.name: expected} and notes == []
    assert type(values[field.name]) is type(expected)


@pytest.mark.parametrize(
    ("field", "raw", "reason"),
    [
        (CollectedField(name="x", type="decimal", gt=0), "-5", "must be greater than 0"),
        (CollectedField(name="x", type="decimal", gt=0), "0", "must be greater than 0"),
        (CollectedField(name="n", type="int", le=10), "11", "must be at most 10"),
        (CollectedField(name="n", type="int"), "2.5", "must be a whole number"),
        (CollectedField(name="x", type="decimal"), "1,5", "is not an unambiguous number"),
        (CollectedField(name="x", type="decimal"), "lots", "is not a number"),
        (CollectedField(name="x", type="decimal"), "NaN", "is not a number"),
        (CollectedField(name="b", type="bool"), "maybe", "must be yes or no"),
        (CollectedField(name="d", type="date"), "next friday", "must be a date"),
        (CollectedField(name="e", type="enum", choices=("a", "b")), "c", "must be one of: a, b"),
    ],
)
def test_invalid_values_are_rejected_with_a_note(
    field: CollectedField, raw: str, reason: str
) -> None:
    values, notes = _coerce(field, raw)
    assert values == {}
    assert len(notes) == 1 and reason in notes[0] and repr(raw) in notes[0]


def test_an_empty_slot_is_not_an_answer() -> None:
    assert _coerce(CollectedField(name="x", type="decimal"), "null") == ({}, [])


def test_the_last_value_for_a_field_wins() -> None:
    journey = transfer_journey()
    items = [CollectedItem(name="amount", value="200"), CollectedItem(name="Amount", value="300")]
    values, _ = coerce_collected(journey, items, ["amount"])
    assert values == {"amount": Decimal("300")}


def test_numbers_and_booleans_from_the_model_are_accepted_as_text() -> None:
    item = CollectedItem.model_validate({"name": "amount", "value": 300})
    flag = CollectedItem.model_validate({"name": "confirmed", "value": True})
    assert (item.value, flag.value) == ("300", "true")
    selection = JourneyNodeSelection.model_validate({"step_advancement": [2, 3], "next_step": 3})
    assert selection.step_advancement == ["2", "3"] and selection.next_step == "3"
