"""How the reference engine's fake LLM decides, for `python -m bench compare`: it follows the
decisions our engine made on the same turn (the spec's `script`, one entry per customer message).

Standard library only: `bench/reference_driver.py` runs inside the reference's own virtual
environment and imports this module from its own folder (its fake NLP service,
`bench/reference_nlp.py`, asks it), and our tests import it without the reference installed.
Every function of the fake is pure — a prompt text or an output template and the turn's script
in, an answer (plain JSON data) out — so the answers are testable with short prompts shaped like
the reference's.

What each kind of question gets:

- guideline checks (actionable, observational, previously applied, customer dependent, low
  criticality) — the output template the prompt carries, each "<BOOL>" answered by whether our
  engine matched a guideline with that condition this turn. A condition our agent does not have
  falls back to a lexical rule (topic words shared with the customer's message);
- response analysis ("was this guideline applied?") — yes iff our engine applied a guideline
  with that action this turn;
- reachable-step conditions (the reference's journey indexing at boot) — conditions that name
  the step they lead to (`STEP_MARK`), so a later step selection can tell them apart;
- journey step selection — the offered condition that leads to the step our engine is at after
  this turn (or the furthest step it passed that is offered); "0" to stay; "None" when our
  engine had no such journey active;
- tool calls — run the tool with our arguments iff our engine ran it this turn;
- the reply draft — our reply text for the turn.

`answer` picks the rule by the schema; the rules live beside it: `bench/reference_script.py` (the
script as the fake reads it), `reference_guideline_answers.py`, `reference_journey_answers.py`,
`reference_tool_answers.py`. They import each other by name in the reference's venv and as
`bench.…` in ours (`__package__` tells which).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # as bench.reference_fake: our tests, and mypy
    from bench.reference_journey_answers import next_step_answer, reachable_answer
    from bench.reference_script import TurnScript
    from bench.reference_tool_answers import non_consequential_tool_answer, single_tool_answer
else:  # by name, beside bench/reference_driver.py in the reference's virtual environment
    from reference_journey_answers import next_step_answer, reachable_answer
    from reference_script import TurnScript
    from reference_tool_answers import non_consequential_tool_answer, single_tool_answer


def answer(schema: str, prompt: str, turn: TurnScript | None, known: frozenset[str]) -> Any:
    """The fake's answer for one schema, or None where it has no rule (the caller falls back
    to the schema's minimal instance). `turn` is None outside the conversation (boot)."""
    if schema == "ReachableNodesEvaluationSchema":
        return reachable_answer(prompt)
    if turn is None:
        return None
    if schema == "JourneyNextStepSelectionSchema":
        return next_step_answer(prompt, turn)
    if schema == "JourneyBacktrackCheckSchema":
        # Our engine's journeys here never go back to an earlier step.
        return {"rationale": "no backtracking", "requires_backtracking": False}
    if schema == "SingleToolBatchSchema":
        return single_tool_answer(prompt, turn)
    if schema == "NonConsequentialToolBatchSchema":
        return non_consequential_tool_answer(prompt, turn)
    if schema == "CannedResponseDraftSchema":
        return {
            "last_message_of_user": turn.message,
            "guidelines": [],
            "response_body": turn.reply,
        }
    return None
