"""Journey node selection: where each active journey stands after this customer message.

One LLM call per active journey per turn at most, and none when the graph leaves no choice
(`engine.matching.journey_forced_moves.auto_return`). The same call decides whether the journey
still applies, whether it must go back to an earlier step, how far it advances, and which values
the customer gave — there is no separate backtracking check. The answer is only a proposal:
`verify_advancement` repairs it against the graph (`engine.matching.journey_answer`) and
`coerce_collected` types and validates the values (`engine.matching.collected_values`), so no rule
that can be checked in code depends on the model obeying it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.context import TurnContext
from engine.llm import TurnLLM
from engine.matching.collected_values import coerce_items
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_forced_moves import auto_return
from engine.matching.journey_graph import build_node_views, current_run
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.matching.journey_walk import VerifiedStep
from engine.model import Journey, LLMPurpose

__all__ = ["JourneyStepResult", "select_journey_step"]


@dataclass(frozen=True)
class JourneyStepResult:
    """The outcome of node selection for one journey in one turn."""

    journey_id: str
    step: VerifiedStep
    collected: dict[str, Any]  # validated, typed values for fields of the steps reached
    rationale: str
    used_llm: bool
    notes: tuple[str, ...]  # values dropped and why (path repairs are in `step.repairs`)
    # values the customer gave that failed validation: (field, why) — the reply says why
    refused: tuple[tuple[str, str], ...] = ()


def _reached_nodes(path: Sequence[str | None]) -> tuple[str, ...]:
    """The nodes of the run this turn ended in (the closed run when it just completed)."""
    trimmed = list(path)
    if trimmed and trimmed[-1] is None:
        trimmed.pop()
    return current_run(trimmed)


async def select_journey_step(
    llm: TurnLLM,
    ctx: TurnContext,
    journey: Journey,
    previous_path: Sequence[str | None],
    *,
    executed_tools: set[str],
    max_depth: int = 5,
    explain: bool = False,
) -> JourneyStepResult:
    """Where `journey` stands after this turn: no LLM call when the graph decides alone, else one
    call whose answer is verified and whose values are typed. LLM failures (`LLMError`,
    including `LLMBudgetExceeded`) propagate: the turn pipeline owns the fallback policy."""
    views = build_node_views(journey)
    auto = auto_return(journey, views, previous_path, executed_tools)
    if auto is not None:
        return JourneyStepResult(journey.id, auto, {}, "the graph left one way forward", False, ())

    known = ctx.session.collected_values(journey.id)
    prompt = build_node_selection_prompt(
        ctx, journey, views, previous_path, collected=known, max_depth=max_depth, explain=explain
    )
    generation = await llm.generate(
        LLMPurpose.SELECT_JOURNEY_NODE, prompt, JourneyNodeSelection, label=journey.id
    )
    selection = generation.value
    step = verify_advancement(journey, views, previous_path, selection, executed_tools)
    refused: dict[str, str] = {}
    if step.outcome == "exit":
        values: dict[str, Any] = {}
        notes = ["dropped the values given for an exited journey"] if selection.collected else []
    else:
        values, refused, notes = coerce_items(
            journey, selection.collected, _reached_nodes(step.path)
        )
    return JourneyStepResult(
        journey.id,
        step,
        values,
        selection.rationale,
        True,
        tuple(notes),
        tuple(refused.items()),
    )
