"""The reply drafted beside round 1 (`engine.stages.speculation`, `TurnLLM.draft`): used only for
the very same reply prompt, outside the turn's budget, never at the cost of a decision.
tests/hostile/test_speculation.py runs whole conversations against hostile predictors."""

from __future__ import annotations

import pytest

from engine.agent_config import AgentConfig, Speculation, TurnBudget
from engine.compose import ComposedReply
from engine.errors import LLMTransientError
from engine.matching.guidelines import GuidelineMatchBatch
from engine.model import Guideline
from engine.testing import ScriptedLLM
from tests.engine.pipeline_kit import Harness, compose_echo, make_agent, match_when

GREET = Guideline(id="greet", condition="The customer greets", action="Greet them back")
PRICES = Guideline(id="prices", condition="The customer asks about prices", action="Quote prices")


def _agent(**config: object) -> object:
    settings = AgentConfig(speculation=Speculation(mode="on"), **config)  # type: ignore[arg-type]
    return make_agent(guidelines=[GREET, PRICES], config=settings)


def _model(**rules: object) -> ScriptedLLM:
    llm = ScriptedLLM()
    llm.on(GuidelineMatchBatch, match_when(rules or {"greets": lambda m: "hi" in m}))  # type: ignore[arg-type]
    llm.on(ComposedReply, compose_echo)
    return llm


async def _say(text: str, predictor: ScriptedLLM | None, model: ScriptedLLM, **config: object):  # type: ignore[no-untyped-def]
    h = Harness(_agent(**config), model, predictor=predictor)  # type: ignore[arg-type]
    await h.start()
    return await h.say(text)


async def test_a_right_prediction_replies_in_one_round_with_the_same_reply() -> None:
    off = await _say("hi there", None, _model())
    model = _model()
    on = await _say("hi there", _model(), model)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert on.trace.speculation == "used" and on.trace.llm_rounds == 1
    assert off.trace.llm_rounds == 2
    assert len(model.calls_for(ComposedReply)) == 1  # the draft was the reply: no second call
    (compose,) = [c for c in on.trace.llm_calls if c.purpose == "compose"]
    assert compose.draft == "used" and compose.round == 1


async def test_a_wrong_prediction_is_discarded_and_the_reply_composed_as_without_it() -> None:
    off = await _say("hi there", None, _model())
    wrong = _model(greets=False, prices=True)  # predicts the other guideline
    model = _model()
    on = await _say("hi there", wrong, model)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert on.trace.speculation == "discarded" and on.trace.llm_rounds == 2
    drafts = [c for c in on.trace.llm_calls if c.draft]
    assert [c.draft for c in drafts] == ["discarded"]
    assert "Quote prices" in drafts[0].prompt and "Greet them back" not in drafts[0].prompt
    assert len(model.calls_for(ComposedReply)) == 2  # the draft, then the reply


async def test_a_failed_draft_is_not_used_and_the_reply_is_asked_for_again() -> None:
    model = ScriptedLLM().on(GuidelineMatchBatch, match_when({"greets": True}))
    model.on(ComposedReply, LLMTransientError("down for a moment"), compose_echo)
    on = await _say("hi there", _model(), model)
    assert on.reply.text == "Greet them back"
    failed = [c for c in on.trace.llm_calls if c.draft]
    assert len(failed) == 1 and failed[0].error and "down for a moment" in failed[0].error
    assert on.trace.speculation == "discarded"


async def test_a_draft_takes_no_call_the_budget_keeps_for_the_turn() -> None:
    """Two calls a turn: matching and the reply. The draft is a third, outside the budget: the
    verified turn still gets both of its calls (with speculation off it would be the same)."""
    budget = TurnBudget(max_llm_calls=2)
    wrong = _model(greets=False, prices=True)
    off = await _say("hi there", None, _model(), budget=budget)
    on = await _say("hi there", wrong, _model(), budget=budget)
    assert on.reply.text == off.reply.text == "Greet them back"
    assert not [n for n in on.trace.notes if n.startswith("budget")]


@pytest.mark.parametrize(("limit", "expected"), [(5, "skipped"), (50_000, "used")])
async def test_only_replies_under_the_token_limit_are_drafted(limit: int, expected: str) -> None:
    h = Harness(
        make_agent(
            guidelines=[GREET, PRICES],
            config=AgentConfig(speculation=Speculation(mode="on", max_prompt_tokens=limit)),
        ),
        _model(),
        predictor=_model(),
    )
    await h.start()
    out = await h.say("hi there")
    assert out.trace.speculation.startswith(expected)
    assert out.reply.text == "Greet them back"


async def test_speculation_is_off_unless_the_agent_turns_it_on() -> None:
    h = Harness(make_agent(guidelines=[GREET]), _model(), predictor=_model())
    await h.start()
    out = await h.say("hi there")
    assert out.trace.speculation == "" and not [c for c in out.trace.llm_calls if c.draft]


def test_the_agent_setting_reads_on_off_and_a_limit() -> None:
    assert AgentConfig.model_validate({"speculation": True}).speculation.enabled  # YAML `on`
    assert not AgentConfig.model_validate({"speculation": False}).speculation.enabled
    assert AgentConfig.model_validate({"speculation": "on"}).speculation.enabled
    limited = AgentConfig.model_validate({"speculation": {"mode": "on", "max_prompt_tokens": 900}})
    assert limited.speculation.max_prompt_tokens == 900
    with pytest.raises(ValueError, match="speculation"):
        AgentConfig.model_validate({"speculation": "sometimes"})
