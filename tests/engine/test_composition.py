"""Composition modes: fluid, canned_fluid, canned_strict; fields from tool data and fragments."""

from __future__ import annotations

from engine.agent_config import AgentConfig, CompositionMode
from engine.compose import (
    CannedChoice,
    ComposedReply,
    Template,
    effective_composition_mode,
    field_values,
    fillable,
    merge_fragments,
)
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import CannedResponse, Guideline, JourneyNode, NodeKind
from engine.testing import ScriptedLLM
from engine.toolkit import InProcessDispatcher, ToolRegistry, ToolResult, spec_of, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import FLIGHT_LIKE, Harness, compose_echo, make_agent, match_when


@tool(description="get the balance")
def balance(account: str) -> ToolResult:
    return ToolResult(
        data={"balance": "1000.00", "account": account},
        fragments=[
            {"id": "promo", "text": "Savings rate today: {{rate}}%", "fields": {"rate": "3.5"}}
        ],
    )


BALANCE_RULE = Guideline(
    id="bal", condition="asks for the balance", action="Tell the balance", tools=("balance",)
)
TEMPLATES = (
    CannedResponse(id="bal", template="Your {{account}} balance is ${{balance}}."),
    CannedResponse(id="card", template="Your card ends in {{card_last4}}."),  # never fillable here
)


def harness(mode: CompositionMode, choice: dict) -> tuple[Harness, ScriptedLLM]:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"balance": True}))
    llm.on(
        ToolCallPlan,
        {"calls": [{"tool": "balance", "arguments": [{"name": "account", "value": "checking"}]}]},
    )
    llm.on(CannedChoice, choice)
    llm.on(ComposedReply, compose_echo)
    agent = make_agent(
        guidelines=[BALANCE_RULE],
        tools=[spec_of(balance)],
        config=AgentConfig(composition_mode=mode),
    ).model_copy()
    agent = type(agent).model_validate({**agent.model_dump(), "canned_responses": TEMPLATES})
    tools = InProcessDispatcher(ToolRegistry([balance]))
    return Harness(agent, llm, tools=tools, index=False), llm


async def test_canned_strict_fills_the_chosen_template_from_tool_data() -> None:
    h, llm = harness(CompositionMode.CANNED_STRICT, {"template": "t2", "applied": ["i1"]})
    await h.start()

    out = await h.say("what's my checking balance?")

    assert out.reply.text == "Your checking balance is $1000.00."
    prompt = llm.calls_for(CannedChoice)[0].prompt
    assert "card ends in" not in prompt  # a template whose fields cannot be filled is not offered
    assert out.state.applied_guideline_ids == ("bal",)


async def test_canned_strict_never_emits_free_text() -> None:
    h, _ = harness(
        CompositionMode.CANNED_STRICT, {"template": None, "message": "Sure! It's about a grand."}
    )
    await h.start()

    out = await h.say("what's my checking balance?")

    assert out.reply.text == AgentConfig().no_match_response


async def test_canned_fluid_falls_back_to_its_own_words_when_no_template_fits() -> None:
    h, _ = harness(CompositionMode.CANNED_FLUID, {"template": None, "message": "Let me check."})
    await h.start()

    out = await h.say("what's my checking balance?")

    assert out.reply.text == "Let me check."


async def test_tool_fragment_is_used_in_the_reply() -> None:
    h, llm = harness(CompositionMode.CANNED_STRICT, {"template": "t1"})
    await h.start()

    out = await h.say("what's my checking balance?")

    assert out.reply.text == "Savings rate today: 3.5%"
    assert "[t1] Savings rate today: 3.5%" in llm.calls_for(CannedChoice)[0].prompt


def test_fragment_id_clashes_are_resolved_by_call_order() -> None:
    merged = merge_fragments(
        [
            ("quote", [{"id": "a", "text": "x"}]),
            ("quote", [{"id": "a", "text": "y"}, {"id": "a", "text": "z"}]),
        ]
    )
    assert [t.source_id for t in merged] == ["quote:a", "quote:a#2", "quote:a#3"]


def test_fields_come_from_tool_data_fragments_and_collected_values() -> None:
    values = field_values(
        [{"account": {"id": "123", "balance": 5.0}}],
        [{"fields": {"rate": "3.5"}}],
        {"amount": "300"},
        {"tier": "gold"},
    )
    assert values["account.id"] == "123" and values["balance"] == "5"
    assert values["rate"] == "3.5" and values["amount"] == "300" and values["tier"] == "gold"
    templates = [Template("", "a", "{{amount}} to {{dest}}"), Template("", "b", "{{amount}} ok")]
    assert [t.source_id for t in fillable(templates, values)] == ["b"]


def test_most_specific_composition_mode_wins() -> None:
    agent = make_agent(config=AgentConfig(composition_mode=CompositionMode.FLUID))
    journey = FLIGHT_LIKE
    strict_node = JourneyNode(
        id="n", kind=NodeKind.CHAT, action="x", composition_mode=CompositionMode.CANNED_STRICT
    )
    canned_rule = Guideline(
        id="g", condition="c", action="a", composition_mode=CompositionMode.CANNED_FLUID
    )
    assert effective_composition_mode(agent, [], []) is CompositionMode.FLUID
    assert effective_composition_mode(agent, [canned_rule], []) is CompositionMode.CANNED_FLUID
    assert (
        effective_composition_mode(agent, [canned_rule], [(journey, strict_node)])
        is CompositionMode.CANNED_STRICT
    )
