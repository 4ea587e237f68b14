"""The structural parts of the decision prompts (issue #23): what each prompt must show so a model
can decide the hard cases, and what the engine does when a model leaves a guideline out.

Scripted models only; the offline model's reading of the same prompts is in
tests/infra/test_offline_prompt_reading.py.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from engine.compose import ComposedReply
from engine.context import TurnContext, render_context
from engine.errors import LLMError
from engine.matching import guidelines as gm
from engine.matching.journey_graph import build_node_views, exited_run
from engine.matching.journey_prompt import build_node_selection_prompt, transition_map_text
from engine.model import CustomerDependentAction, Guideline, Journey
from engine.ports import ToolOutcome
from engine.sessions.session import Event, EventKind, EventSource, SessionState
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, tool
from engine.tools.calls import INSTRUCTIONS_HEADING, ToolArgument, ToolCallPlan
from tests.engine.pipeline_kit import (
    Harness,
    chain_journey,
    compose_echo,
    make_agent,
    match_when,
    tool_harness,
)

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _verdicts_for(prompt: str, *, leave_out: set[str]) -> dict[str, Any]:
    """Every listed guideline applies, except those whose condition contains a word in
    `leave_out`: those get no verdict at all (a model that skipped them)."""
    verdicts = []
    for handle, condition in re.findall(r"^- \[(g\d+)\] when: (.*)$", prompt, re.M):
        if any(word in condition for word in leave_out):
            continue
        verdicts.append({"id": handle, "rationale": "stated", "applies": True, "score": 9})
    return {"verdicts": verdicts}


RULES = [
    Guideline(id="fees", condition="the customer asks about fees", action="Explain the fees"),
    Guideline(id="card", condition="the customer lost a card", action="Block the card"),
    Guideline(id="hours", condition="the customer asks for opening hours", action="Give hours"),
]


# --------------------------------------------------------------------------------------------------
# A guideline the model skipped is asked again, then reported — never a silent non-match


async def test_a_guideline_left_without_a_verdict_is_asked_again_on_its_own() -> None:
    llm = ScriptedLLM()
    llm.on(
        gm.GuidelineMatchBatch,
        lambda p: _verdicts_for(p, leave_out={"card"}),  # first answer skips the card rule
        lambda p: _verdicts_for(p, leave_out=set()),  # the retry answers it
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=RULES), llm, index=False)
    await h.start()

    out = await h.say("what are your fees, and I lost my card")

    asked = [c.prompt for c in llm.calls_for(gm.GuidelineMatchBatch)]
    assert len(asked) == 2
    retry = asked[1]
    assert "Exactly 1 guideline (g1) is listed" in retry and "lost a card" in retry
    assert "asks about fees" not in retry
    assert set(out.state.applied_guideline_ids) == {"fees", "card", "hours"}
    assert any("left 1 guideline(s) unanswered" in n for n in out.trace.notes)


async def test_a_guideline_skipped_twice_is_reported_in_the_trace() -> None:
    llm = ScriptedLLM()
    llm.on(gm.GuidelineMatchBatch, lambda p: _verdicts_for(p, leave_out={"card"}))
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=RULES), llm, index=False)
    await h.start()

    out = await h.say("I lost my card")

    assert len(llm.calls_for(gm.GuidelineMatchBatch)) == 2  # one retry, no more
    record = [m for m in out.trace.matches if m.guideline_id == "card"]
    assert [(r.matched, r.rationale) for r in record] == [(False, "no verdict returned, twice")]
    assert any("no verdict for card after a retry" in n for n in out.trace.notes)
    assert "card" not in out.state.applied_guideline_ids


def test_interpreting_an_answer_names_the_unanswered_guidelines() -> None:
    batch = gm.Batch(gm.BatchKind.ACTIONABLE, tuple(RULES))
    answer = gm.GuidelineMatchBatch(
        verdicts=[gm.GuidelineVerdict(id="g1", rationale="asks", applies=True, score=9)]
    )
    outcome = gm.interpret(batch, answer)
    assert outcome.unanswered == ["card", "hours"]
    assert [v[0] for v in outcome.verdicts] == ["fees"]  # no invented verdicts for the others


def test_verdict_schemas_put_the_rationale_before_the_verdict() -> None:
    for schema, verdict in (
        (gm.GuidelineVerdict, "applies"),
        (gm.CustomerDependentVerdict, "condition_holds"),
        (gm.DisambiguationVerdict, "head_applies"),
    ):
        fields = list(schema.model_json_schema()["properties"])
        assert fields.index("rationale") < fields.index(verdict), schema.__name__
    plan_fields = list(ToolCallPlan.model_json_schema()["properties"])
    assert plan_fields.index("rationale") < plan_fields.index("calls")


# --------------------------------------------------------------------------------------------------
# Packing: one matching call while the kinds fit the budget, parallel batches by kind above it


def _mixed() -> tuple[list[Guideline], SessionState]:
    observation = Guideline(id="vip", condition="the customer is a VIP")  # no action: observational
    applied = Guideline(id="greet", condition="the customer greets", action="Greet back")
    session = SessionState(id="s", agent_id="a", customer_id="c", applied_guideline_ids=("greet",))
    return [observation, *RULES, applied], session


def test_the_three_yes_no_kinds_share_one_call_within_the_budget() -> None:
    rules, session = _mixed()
    batches = gm.plan_batches(rules, session, [], budget_chars=10_000)
    assert [b.kind for b in batches] == [gm.BatchKind.PACKED]
    packed = batches[0]
    # actionable first: the largest group, and the one a prompt cache keeps longest
    assert [packed.kind_of(i) for i in range(len(rules))] == [
        *[gm.BatchKind.ACTIONABLE] * 3,
        gm.BatchKind.OBSERVATIONAL,
        gm.BatchKind.PREVIOUSLY_APPLIED,
    ]
    prompt = gm.build_match_prompt(_context(), packed)
    assert "Exactly 5 guidelines (g1–g5) are listed" in prompt
    groups = re.findall(r"^### (.*)$", prompt, re.M)
    assert groups == [
        "Actions not yet taken (g1–g3)",
        "Observations (g4)",
        "Actions already taken (g5)",
    ]


def test_above_the_budget_each_kind_gets_its_own_parallel_batches() -> None:
    rules, session = _mixed()
    batches = gm.plan_batches(rules, session, [], budget_chars=120)
    kinds = [b.kind for b in batches]
    assert gm.BatchKind.PACKED not in kinds
    assert set(kinds) == {
        gm.BatchKind.OBSERVATIONAL,
        gm.BatchKind.ACTIONABLE,
        gm.BatchKind.PREVIOUSLY_APPLIED,
    }


def test_a_packed_answer_records_each_guideline_under_its_own_kind() -> None:
    rules, session = _mixed()
    (packed,) = gm.plan_batches(rules, session, [], budget_chars=10_000)
    answer = gm.GuidelineMatchBatch(
        verdicts=[
            gm.GuidelineVerdict(id=f"g{i}", rationale="", applies=True, score=9)
            for i in range(1, 6)
        ]
    )
    outcome = gm.interpret(packed, answer)
    assert {gid: kind for gid, kind, *_ in outcome.verdicts} == {
        "vip": gm.BatchKind.OBSERVATIONAL,
        "fees": gm.BatchKind.ACTIONABLE,
        "card": gm.BatchKind.ACTIONABLE,
        "hours": gm.BatchKind.ACTIONABLE,
        "greet": gm.BatchKind.PREVIOUSLY_APPLIED,
    }


def test_a_condition_with_a_numbered_list_is_listed_on_one_line() -> None:
    listed = Guideline(
        id="list",
        condition="the customer asks about one of:\n1. fees\n2. limits\n\n3. overdrafts",
        action="Answer from the tariff sheet",
    )
    prompt = gm.build_match_prompt(_context(), gm.Batch(gm.BatchKind.ACTIONABLE, (listed,)))
    assert "- [g1] when: the customer asks about one of: 1. fees 2. limits 3. overdrafts" in prompt


# --------------------------------------------------------------------------------------------------
# Tool results with their arguments; the other guidelines in the tool prompt


def _context(*results: ToolOutcome, history: tuple[Event, ...] = ()) -> TurnContext:
    agent = make_agent()
    session = SessionState(id="s", agent_id=agent.id, customer_id="c")
    return TurnContext(agent, session, history, tool_results=results)


def test_two_results_of_one_tool_are_told_apart_by_their_arguments() -> None:
    results = (
        ToolOutcome(call_id="1", tool="get_user_age", data=16, arguments={"user": "ann"}),
        ToolOutcome(call_id="2", tool="get_user_age", data=30, arguments={"user": "bob"}),
    )
    event = Event(
        id="e",
        offset=0,
        kind=EventKind.TOOL,
        source=EventSource.SYSTEM,
        created_at=T0,
        data={"tool": "get_user_age", "arguments": {"user": "ann"}, "llm_view": 16},
    )
    text = render_context(_context(*results, history=(event,)))
    assert '- get_user_age(user="ann"): 16\n- get_user_age(user="bob"): 30' in text
    assert 'Tool get_user_age(user="ann"): 16' in text


@tool
def convert(amount: float, currency: str) -> ToolResult:
    """Convert an amount to the account currency."""
    return ToolResult(data={"converted": amount, "currency": currency})


async def test_the_tool_prompt_sees_the_other_guidelines_and_results_keep_their_arguments() -> None:
    euros = Guideline(
        id="euros", condition="the customer mentions euros", action="Double amounts in euros"
    )
    pay = Guideline(
        id="pay", condition="the customer wants to convert", action="Convert", tools=("convert",)
    )
    llm = ScriptedLLM()
    llm.on(gm.GuidelineMatchBatch, match_when({"euros": True, "convert": True}))
    llm.on(
        ToolCallPlan,
        {
            "rationale": "amount and currency from the message",
            "calls": [
                {
                    "tool": "convert",
                    "arguments": [
                        {"name": "amount", "value": "100"},
                        {"name": "currency", "value": "euros"},
                    ],
                }
            ],
        },
    )
    llm.on(ComposedReply, compose_echo)
    h = tool_harness(llm, convert, guidelines=[euros, pay], index=False)
    await h.start()

    out = await h.say("please convert 100 euros")

    prompt = llm.calls_for(ToolCallPlan)[0].prompt
    assert (
        f"{INSTRUCTIONS_HEADING}\n- when the customer mentions euros, then Double amounts" in prompt
    )
    assert "then Convert" not in prompt  # the guideline offering the tool is its reason instead
    assert "Today's date: " in prompt
    assert "exactly as the conversation gives it" not in prompt
    assert (
        "form its parameter's type declares"
        in ToolArgument.model_json_schema()["properties"]["value"]["description"]
    )
    tool_events = [e for e in out.state.events if e.kind is EventKind.TOOL]
    assert tool_events[0].data["arguments"] == {"amount": "100", "currency": "euros"}
    compose_prompt = llm.calls_for(ComposedReply)[0].prompt
    assert 'convert(amount="100", currency="euros"): ' in compose_prompt


# --------------------------------------------------------------------------------------------------
# Journeys: an exited run is shown as exited and resumable; steps that must be said are flagged


def _transfer() -> Journey:
    journey, _ = chain_journey(
        "transfer",
        "Transfer money",
        "the customer wants to send money",
        [
            (
                "ask",
                "Ask how much to send",
                {
                    "customer_dependent": CustomerDependentAction(
                        customer_action="said how much", agent_action="asked"
                    )
                },
            ),
            ("warn", "Warn that transfers over 1000 take a day"),
            (
                "confirm",
                "Ask to confirm",
                {
                    "customer_dependent": CustomerDependentAction(
                        customer_action="confirmed or declined", agent_action="asked"
                    )
                },
            ),
        ],
    )
    return journey


def test_an_exited_journey_is_shown_as_exited_and_resumable() -> None:
    journey = _transfer()
    views = build_node_views(journey)
    path = ("ask", None)
    assert exited_run(path, views) == ("ask",)
    prompt = build_node_selection_prompt(
        _context(), journey, views, path, collected={}, max_depth=5, explain=False
    )
    assert "an earlier run was exited at step 2 (LEFT HERE)" in prompt
    assert "backtracking_target_step=2" in prompt
    assert "nothing to backtrack to" not in prompt
    assert "  - LEFT HERE — an earlier run was exited at this step" in prompt


def test_a_completed_run_is_not_offered_for_resumption() -> None:
    journey = _transfer()
    views = build_node_views(journey)
    path = ("ask", "warn", "confirm", None)
    assert exited_run(path, views) == ()
    prompt = build_node_selection_prompt(
        _context(), journey, views, path, collected={}, max_depth=5, explain=False
    )
    assert "  - LEFT HERE" not in prompt and "an earlier run was exited" not in prompt
    assert "  - BEGIN HERE" in prompt


def test_a_step_that_tells_the_customer_something_is_flagged_in_the_map() -> None:
    journey = _transfer()
    views = build_node_views(journey)
    text = transition_map_text(journey, views, ())
    warn_block = text.split("Warn that transfers", 1)[1].split("STEP", 1)[0]
    assert "SAYS SOMETHING NEW" in warn_block
    ask_block = text.split("Ask how much", 1)[1].split("STEP", 1)[0]
    assert "SAYS SOMETHING NEW" not in ask_block  # it waits for the customer instead


async def test_a_failed_retry_still_reports_the_unanswered_guideline() -> None:
    llm = ScriptedLLM()
    llm.on(
        gm.GuidelineMatchBatch,
        lambda p: _verdicts_for(p, leave_out={"card"}),
        LLMError("the model is down"),
    )
    llm.on(ComposedReply, compose_echo)
    h = Harness(make_agent(guidelines=RULES), llm, index=False)
    await h.start()

    out = await h.say("I lost my card")

    record = [m for m in out.trace.matches if m.guideline_id == "card"]
    assert [(r.matched, r.rationale) for r in record] == [(False, "no verdict returned, twice")]
    assert any("matching batch" in n and "failed" in n for n in out.trace.notes)
