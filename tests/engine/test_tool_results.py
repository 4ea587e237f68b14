"""What a successful tool result becomes: its view goes out with the reply, its fragments are
offered to composition in every mode, and `control.lifespan: "response"` keeps it to its turn."""

from __future__ import annotations

from engine.compose import ComposedReply
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.testing import ScriptedLLM
from engine.toolkit import ToolResult, tool
from engine.tools.calls import ToolCallPlan
from tests.engine.pipeline_kit import Harness, compose_echo, match_when, tool_harness

RECEIPT = {"type": "receipt", "lines": ["Pizza", "$12"]}


@tool(description="Show the receipt")
def receipt() -> ToolResult:
    return ToolResult(
        data={"total": "12"},
        view=RECEIPT,
        fragments=[{"id": "total", "text": "Your total is ${{total}}.", "fields": {}}],
    )


@tool(description="Look up today's special")
def special() -> ToolResult:
    return ToolResult(data={"special": "margherita"}, control={"lifespan": "response"})


def harness(rule: Guideline, fn: object) -> tuple[Harness, ScriptedLLM]:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when({"receipt": True, "special": True}))
    llm.on(ToolCallPlan, {"calls": []})
    llm.on(ComposedReply, compose_echo)
    return tool_harness(llm, fn, guidelines=[rule], index=False), llm


async def test_a_successful_tools_view_goes_out_with_the_reply() -> None:
    rule = Guideline(id="r", condition="wants the receipt", action="Show it", tools=("receipt",))
    h, _ = harness(rule, receipt)
    await h.start()

    out = await h.say("my receipt please")

    assert out.reply.data["view"] == RECEIPT


async def test_tool_fragments_are_offered_to_fluid_composition_filled() -> None:
    rule = Guideline(id="r", condition="wants the receipt", action="Show it", tools=("receipt",))
    h, llm = harness(rule, receipt)
    await h.start()

    await h.say("my receipt please")

    prompt = llm.calls_for(ComposedReply)[-1].prompt
    assert "Wording this turn's tools provided" in prompt
    assert "- Your total is $12." in prompt


async def test_a_response_only_result_is_not_seen_by_later_turns() -> None:
    rule = Guideline(
        id="s", condition="asks about the special", action="Tell it", tools=("special",)
    )
    h, llm = harness(rule, special)
    await h.start()

    first = await h.say("what is the special today?")
    later = await h.say("and what about the special now?")

    assert "margherita" in llm.calls_for(ComposedReply)[0].prompt
    # The second turn calls the tool again (the first result served its own turn only) …
    assert [c.tool for c in later.trace.tool_calls] == ["special"]
    # … and the earlier result is not in the history the second turn's prompts show.
    history = llm.calls_for(GuidelineMatchBatch)[-1].prompt
    assert history.count("margherita") == 0
    assert first.state.events[-2].data["lifespan"] == "response"
