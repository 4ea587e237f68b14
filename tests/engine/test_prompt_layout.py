"""Prompts that cache, builder by builder: the stable prefix (role, the agent and its glossary,
the rules) is byte-identical on two turns of a session, and nothing of the turn — facts, the
conversation, this turn's tool results — comes before it. The purposes a benchmark conversation
exercises over several turns are checked on real turns in tests/bench/test_prompt_cache.py; the
tool call, disambiguation and canned prompts here."""

from __future__ import annotations

from engine.compose import CompositionInput, Instruction, Template, build_canned_prompt
from engine.context import TurnContext
from engine.matching import guidelines as gm
from engine.model import Guideline, Term
from engine.ports import ToolOutcome
from engine.tools.calls import build_tool_call_prompt
from engine.tools.spec import ToolParameter, ToolSpec
from tests.engine.pipeline_kit import make_agent
from tests.engine.test_matching_units import context

LOOKUP = ToolSpec(
    name="lookup_order",
    description="Look up an order",
    parameters=(ToolParameter(name="order_number", description="e.g. ORD-1"),),
)
AGENT = make_agent(tools=[LOOKUP])
TERMS = (Term(name="order number", description="the ORD-… code on the receipt"),)
FIRST = ("I want to know where my order is",)
SECOND = (*FIRST, "Which order?", "ORD-5521, and I am in a hurry")
TURN_MARKERS = (
    "Known facts about the customer:",
    "Conversation (most recent last):",
    "Tool results from this turn:",
    "Customer: ",
)


def _turns() -> tuple[TurnContext, TurnContext]:
    """Turn one, and turn two of the same session with a customer fact and a tool result."""
    one = context(AGENT, *FIRST, terms=TERMS)
    two = context(AGENT, *SECOND, terms=TERMS, variables={"tier": "gold"})
    result = ToolOutcome(call_id="c1", tool="lookup_order", data={"status": "shipped"})
    return one, two.with_tool_results([result])


def _assert_stable_then_turn(first: str, second: str, stable_until: str) -> None:
    prefix = first[: first.index(stable_until)]
    assert second.startswith(prefix)  # byte-identical across the two turns
    assert prefix.startswith("You ") and "Agent: Test agent" in prefix
    assert "Glossary:\n- order number: the ORD-… code on the receipt" in prefix
    for marker in TURN_MARKERS:
        assert marker not in prefix
    for text in SECOND:
        assert text not in prefix and second.index(text) > len(prefix)
    assert second.index("Tool results from this turn:") > len(prefix)
    assert second.index("Known facts about the customer:") > len(prefix)


def test_the_tool_call_prompts_stable_prefix_holds_across_turns_and_comes_first() -> None:
    one, two = _turns()
    prompts = [
        build_tool_call_prompt(ctx, [LOOKUP], {"lookup_order": "where is my order"}, {})
        for ctx in (one, two)
    ]
    _assert_stable_then_turn(*prompts, stable_until="\n\nTools you may call now:")
    assert "How to decide:" in prompts[0].split("\n\nTools you may call now:")[0]


def test_the_disambiguation_prompts_stable_prefix_holds_across_turns_and_comes_first() -> None:
    head = Guideline(id="order", condition="asks about an order")
    batch = gm.Batch(
        gm.BatchKind.DISAMBIGUATION,
        (
            Guideline(id="late", condition="the order is late", action="Apologize"),
            Guideline(id="lost", condition="the order is lost", action="Open a claim"),
        ),
        head=head,
    )
    one, two = _turns()
    prompts = [gm.build_disambiguation_prompt(ctx, batch) for ctx in (one, two)]
    _assert_stable_then_turn(*prompts, stable_until="\n\nTask: ")
    # the options (the agent's own text) come before the turn's content as well
    assert prompts[1].index("Options:") < prompts[1].index("Conversation (most recent last):")


def test_the_matching_prompt_lists_its_guidelines_before_the_conversation() -> None:
    batch = gm.Batch(
        gm.BatchKind.ACTIONABLE,
        (Guideline(id="late", condition="the order is late", action="Apologize"),),
    )
    one, two = _turns()
    prompts = [gm.build_match_prompt(ctx, batch) for ctx in (one, two)]
    _assert_stable_then_turn(*prompts, stable_until="\n\n### ")
    # the same batch on both turns: everything up to the conversation is shared
    conversation = "\n\nKnown facts about the customer:"
    assert prompts[1].startswith(prompts[0].split("\n\nConversation (most recent last):")[0])
    assert prompts[1].index("Guidelines:\n- [g1]") < prompts[1].index(conversation)


def test_the_canned_prompts_stable_prefix_holds_across_turns_and_comes_first() -> None:
    data = CompositionInput(instructions=[Instruction("i1", "Apologize", "late")])
    templates = [Template("t1", "sorry", "Sorry for the delay.")]
    one, two = _turns()
    prompts = [build_canned_prompt(ctx, data, templates, {}, strict=True) for ctx in (one, two)]
    _assert_stable_then_turn(*prompts, stable_until="\n\nConversation (most recent last):")
    # the previous turn's conversation is a prefix of this turn's: shared as it grew
    earlier = prompts[0].split("\n\nConversation (most recent last):\n")[1].split("\n\n")[0]
    assert f"Conversation (most recent last):\n{earlier}\n" in prompts[1]
