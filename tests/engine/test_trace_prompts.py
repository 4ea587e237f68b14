"""What a trace keeps of each LLM call for the studio's inspector: the prompt and the answer,
bounded (a note says how much was left out), and the proposed walk of a journey beside what
verification kept. Secrets in them: tests/engine/test_secrets.py and test_secret_answers.py."""

from __future__ import annotations

import json

from pydantic import BaseModel

from engine.agent_config import AgentConfig, LLMPurpose
from engine.llm import TurnLLM
from engine.testing import ScriptedLLM
from engine.trace import (
    MAX_RECORDED_ANSWER_CHARS,
    MAX_RECORDED_PROMPT_CHARS,
    TurnTrace,
    bounded_text,
)


class Verdict(BaseModel):
    rationale: str
    applies: bool


def _trace() -> TurnTrace:
    return TurnTrace(turn_id="t1", session_id="s1", agent_id="bank", agent_version="v1")


async def test_each_llm_call_keeps_its_prompt_and_answer() -> None:
    llm = ScriptedLLM().on(Verdict, {"rationale": "the customer said hi", "applies": True})
    trace = _trace()

    await TurnLLM(llm, AgentConfig(), trace).generate(
        LLMPurpose.MATCH_GUIDELINES, "Does the greeting rule apply? hi", Verdict
    )

    (call,) = trace.llm_calls
    assert call.prompt == "Does the greeting rule apply? hi"
    assert json.loads(call.answer) == {"rationale": "the customer said hi", "applies": True}


async def test_a_huge_prompt_is_kept_head_and_tail_with_what_was_left_out() -> None:
    rationale = "r" * (2 * MAX_RECORDED_ANSWER_CHARS)
    llm = ScriptedLLM().on(Verdict, {"rationale": rationale, "applies": False})
    trace = _trace()
    prompt = "START " + "x" * (3 * MAX_RECORDED_PROMPT_CHARS) + " END"

    await TurnLLM(llm, AgentConfig(), trace).generate(LLMPurpose.COMPOSE, prompt, Verdict)

    (call,) = trace.llm_calls
    assert call.prompt.startswith("START ") and call.prompt.endswith(" END")
    assert len(call.prompt) < MAX_RECORDED_PROMPT_CHARS + 100
    assert f"[{len(prompt) - MAX_RECORDED_PROMPT_CHARS} characters left out]" in call.prompt
    assert call.prompt_chars == len(prompt)  # the size that was sent is still recorded
    assert len(call.answer) < MAX_RECORDED_ANSWER_CHARS + 100


def test_bounded_text_leaves_short_text_alone() -> None:
    assert bounded_text("short", 10) == "short"
    assert bounded_text("0123456789", 10) == "0123456789"
    cut = bounded_text("a" * 30 + "b" * 30, 20)
    assert cut.startswith("a" * 15) and cut.endswith("b" * 5) and "[40 characters left out]" in cut
