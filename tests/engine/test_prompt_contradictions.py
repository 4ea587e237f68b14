"""The contradictions issue #37 found in the decision prompts, each pinned as gone.

One test per contradiction, on the text the builders produce (the golden snapshots in
tests/snapshots/ show the whole prompts; docs/prompts.md says why each part reads as it does).
"""

from __future__ import annotations

import re

from engine.context import TurnContext
from engine.matching import guidelines as gm
from engine.matching import match_guidance as guide
from engine.model import Guideline
from engine.session import SessionState
from tests.engine.pipeline_kit import make_agent


def _context() -> TurnContext:
    agent = make_agent()
    return TurnContext(agent, SessionState(id="s", agent_id=agent.id, customer_id="c"), ())


def _unquoted(text: str) -> str:
    """`text` without its quoted examples ("…")."""
    return re.sub(r'"[^"]*"', '""', text)


GUIDANCE = (
    guide.SHARED_RULES,
    guide.OBSERVATIONAL_RULES,
    guide.ACTIONABLE_RULES,
    guide.PREVIOUSLY_APPLIED_RULES,
    guide.CUSTOMER_DEPENDENT_RULES,
    guide.DISAMBIGUATION_RULES,
)


def test_the_matching_prompt_addresses_the_model_as_the_agent_its_guidelines_speak_to() -> None:
    """Conditions say "you" for the agent: a prompt that called the judging model "you" and the
    agent "the agent" made "you" mean two parties. The model is the agent now, and both words
    mean it."""
    batch = gm.Batch(
        gm.BatchKind.ACTIONABLE,
        (Guideline(id="g", condition="you offered a discount", action="Mention it expires"),),
    )
    prompt = gm.build_match_prompt(_context(), batch)
    assert prompt.startswith("You are the customer-service agent described below")
    assert '"you" and "the agent" both mean you' in prompt
    assert "a customer-service agent's guidelines" not in prompt
    for text in GUIDANCE:
        # outside quoted examples, the rules speak of "you", never of "the agent" as a third party
        assert not re.search(r"\b(the|its) agent\b|\bagent's\b", _unquoted(text)), text
    disambiguation = gm.build_disambiguation_prompt(
        _context(),
        gm.Batch(
            gm.BatchKind.DISAMBIGUATION,
            (Guideline(id="a", condition="a late order"), Guideline(id="b", condition="damaged")),
            head=Guideline(id="h", condition="the customer has a problem with an order"),
        ),
    )
    assert disambiguation.startswith("You are the customer-service agent described below")


def test_a_condition_about_what_the_agent_is_about_to_do_is_read_as_its_own_next_reply() -> None:
    """An agent-intention condition holds for the reply to give now, not for one it could give,
    nor for what it did before; one about what it did is about the conversation so far."""
    rule = " ".join(guide.SHARED_RULES.split())
    assert 'A condition about what you are about to do ("you are about to quote a price"' in rule
    assert "holds only when the reply you must give now, to the latest message, does that" in rule
    assert "not because this reply could, nor because you did it earlier" in rule
