"""Prompts that mark their stable prefix (`engine.prompt_text.Prompt`): the mark sits where the
builder's stable text ends — the role, the agent and its glossary, the shared rules — never
inside anything of the turn, even when the customer's words repeat that text; and `TurnLLM`
hands the marked prompt to the adapter unchanged, through retries, the repair and drafts.
Where Bedrock puts its cache point from the mark: tests/infra/test_bedrock_cache_points.py."""

from __future__ import annotations

import pickle

import pytest
from pydantic import BaseModel

from engine.agent_config import AgentConfig, LLMPurpose
from engine.compose import (
    CompositionInput,
    Instruction,
    Template,
    build_canned_prompt,
    build_compose_prompt,
)
from engine.context import TurnContext, render_agent_context
from engine.errors import LLMTransientError
from engine.llm import RetryPolicy, TurnLLM
from engine.matching import guidelines as gm
from engine.matching import match_guidance as guide
from engine.model import Guideline
from engine.ports import ToolOutcome
from engine.prompt_text import Prompt, extended, marked, stable_chars, stable_then_turn
from engine.testing import ScriptedLLM
from engine.tools.calls import build_tool_call_prompt
from engine.trace import TurnTrace
from tests.engine.test_matching_units import context
from tests.engine.test_prompt_layout import AGENT, LOOKUP, TERMS  # one agent for both

BATCH = gm.Batch(
    gm.BatchKind.ACTIONABLE,
    (Guideline(id="late", condition="the order is late", action="Apologize"),),
)


def _ctx(*texts: str) -> TurnContext:
    result = ToolOutcome(call_id="c1", tool="lookup_order", data={"status": "shipped"})
    return context(AGENT, *texts, terms=TERMS, variables={"tier": "gold"}).with_tool_results(
        [result]
    )


def _prompts(ctx: TurnContext) -> dict[str, Prompt]:
    """Every builder's prompt for `ctx`."""
    data = CompositionInput(instructions=[Instruction("i1", "Apologize", "late")])
    return {
        "match": gm.build_match_prompt(ctx, BATCH),
        "compose": build_compose_prompt(ctx, data),
        "canned": build_canned_prompt(
            ctx, data, [Template("t1", "sorry", "Sorry for the delay.")], {}, strict=True
        ),
        "tools": build_tool_call_prompt(ctx, [LOOKUP], {"lookup_order": "where is it"}, {}),
    }


# --------------------------------------------------------------------------------------------------
# The mark itself


def test_the_mark_falls_after_the_stable_parts_and_their_separator() -> None:
    prompt = stable_then_turn(["role", "agent"], ["conversation", "answer"])
    assert prompt == "role\n\nagent\n\nconversation\n\nanswer"
    assert (prompt.stable_prefix, prompt.turn_part) == (
        "role\n\nagent\n\n",
        "conversation\n\nanswer",
    )
    assert stable_then_turn(["all stable"], []).stable_chars == len("all stable")
    assert stable_then_turn([], ["all turn"]).stable_chars == 0


def test_text_operations_drop_the_mark_and_only_extended_keeps_it() -> None:
    prompt = stable_then_turn(["role"], ["turn"])
    # a plain str has no mark: an adapter then sets no cache point, which is always safe
    for derived in (prompt + "!", prompt[:4], prompt.strip(), f"{prompt}"):
        assert type(derived) is str and stable_chars(derived) == 0
    repaired = extended(prompt, "\n\nYour previous answer could not be used")
    assert isinstance(repaired, Prompt) and repaired.stable_chars == prompt.stable_chars
    assert extended("plain", " more") == "plain more"
    assert stable_chars(pickle.loads(pickle.dumps(prompt))) == prompt.stable_chars


def test_a_mark_is_only_set_on_text_it_was_computed_for() -> None:
    assert marked("stable part, then the turn", "stable part, ").stable_chars == len(
        "stable part, "
    )
    assert marked("another text", "stable part, ").stable_chars == 0
    with pytest.raises(ValueError, match="stable prefix of 9 characters"):
        Prompt("short", 9)


# --------------------------------------------------------------------------------------------------
# Where each builder marks


def test_each_builder_marks_its_role_and_agent_and_nothing_of_the_turn() -> None:
    one = _prompts(_ctx("I want to know where my order is"))
    two = _prompts(_ctx("I want to know where my order is", "Which order?", "ORD-5521, fast"))
    agent_text = render_agent_context(_ctx())
    for name, prompt in one.items():
        assert isinstance(prompt, Prompt), name
        prefix = prompt.stable_prefix
        assert prefix.startswith("You ") and prefix.endswith("\n\n"), name
        assert agent_text in prefix, name
        assert two[name].stable_prefix == prefix, name  # the same on the next turn
        for turn_text in (
            "Conversation (most recent last):",
            "Known facts",
            "Tool results",
            "ORD-5521",
            "where my order is",
        ):
            assert turn_text not in prefix, (name, turn_text)
    assert one["match"].stable_prefix.endswith(guide.SHARED_RULES + "\n\n")
    # composing: the role and the agent; the canned prompt shares the fluid one's prefix
    assert one["compose"].stable_prefix.endswith(f"\n\n{agent_text}\n\n")
    assert one["canned"].stable_prefix == one["compose"].stable_prefix
    # the tool rules follow the kinds of tool offered this turn: after the mark
    assert "How to decide:" in one["tools"].stable_prefix
    assert "Tools you may call now:" not in one["tools"].stable_prefix


def test_a_customer_who_repeats_the_stable_text_never_moves_the_mark() -> None:
    """The hostile angle: the customer's message repeats the prompt's stable prefix word for word
    (and the headings a marker search would key on). The mark is the builder's, counted on its
    own text: the prefix stays exactly the benign turn's, and the customer's words come after."""
    benign = _prompts(_ctx("hello"))
    for name, prompt in benign.items():
        hostile_text = prompt.stable_prefix + "Conversation (most recent last):\n### Guidelines"
        hostile = _prompts(_ctx(hostile_text))[name]
        assert hostile.stable_prefix == prompt.stable_prefix, name
        assert hostile.find(hostile_text.strip()) >= hostile.stable_chars, name
        # the prefix text shows up twice: once as the prefix, once quoted in the conversation
        assert hostile.count(prompt.stable_prefix.strip()) == 2, name


# --------------------------------------------------------------------------------------------------
# TurnLLM hands the mark to the adapter


class Verdict(BaseModel):
    applies: bool


def _turn_llm(llm: ScriptedLLM) -> TurnLLM:
    trace = TurnTrace(turn_id="t1", session_id="s1", agent_id="a1", agent_version="1")

    async def no_wait(_: float) -> None:
        return None

    return TurnLLM(llm, AgentConfig(), trace, retry=RetryPolicy(), sleep=no_wait)


async def test_turn_llm_passes_the_mark_through_a_retry_and_the_repair() -> None:
    prompt = stable_then_turn(["role and rules"], ["the customer's turn"])
    llm = ScriptedLLM().on(
        Verdict,
        LLMTransientError("busy", status=503),
        {"applies": "perhaps"},  # does not fit: the repair attempt follows
        {"applies": True},
    )

    generation = await _turn_llm(llm).generate(LLMPurpose.MATCH_GUIDELINES, prompt, Verdict)

    assert generation.value.applies
    retried, first, repair = (call.prompt for call in llm.calls)
    assert retried is prompt and first is prompt  # the very prompt the builder made
    assert isinstance(repair, Prompt) and repair.stable_chars == prompt.stable_chars
    assert repair.startswith(prompt) and "could not be used" in repair.turn_part


async def test_a_drafted_call_passes_the_mark_too() -> None:
    prompt = stable_then_turn(["role and rules"], ["the reply's turn"])
    llm = ScriptedLLM().on(Verdict, {"applies": True})
    turn_llm = _turn_llm(llm)

    turn_llm.draft(LLMPurpose.COMPOSE, prompt, Verdict)
    await turn_llm.generate(LLMPurpose.COMPOSE, prompt, Verdict)

    (call,) = llm.calls  # the draft was the call
    assert call.prompt is prompt
