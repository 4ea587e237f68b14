"""The recall stage: which guidelines and journeys this turn may consider at all.

Tag filter → high-probability journeys (active ones, else vector top-k) → pruning of the
guidelines of low-probability journeys → preselection on large agents. Writes
`state.candidates`; returns what matching needs next.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.context import TurnContext
from engine.model import Guideline
from engine.ports import VectorIndex
from engine.recall import (
    RecallQuery,
    high_probability_journeys,
    preselect,
    prune_low_probability,
    tag_filter,
)
from engine.stages.state import TurnState


@dataclass(frozen=True)
class Recalled:
    high: list[str]  # journeys predicted to matter this turn, most likely first
    active_before: tuple[str, ...]  # journeys with a current step when the turn began, in order
    to_match: list[Guideline]  # candidates to match in round 1
    dropped: dict[str, list[Guideline]]  # pruned guidelines by journey, for supplemental rounds


async def recall(state: TurnState, ctx: TurnContext, index: VectorIndex | None) -> Recalled:
    candidates = tag_filter(state.agent, state.session)
    state.usable_guideline_ids = frozenset(g.id for g in candidates)
    query = RecallQuery(ctx, state.deps.embedder)
    prediction = await high_probability_journeys(
        ctx,
        k=state.agent.config.journey_top_k,
        embedder=state.deps.embedder,
        index=index,
        query=query,
        min_similarity=state.agent.config.journey_min_similarity,
    )
    high = prediction.journeys
    state.trace.high_probability_journeys = list(high)
    state.trace.unpredicted_journeys = list(prediction.below_threshold)
    pruned = prune_low_probability(candidates, high)
    preselection = await preselect(ctx, pruned.candidates, high=high, index=index, query=query)
    state.trace.held_back_guideline_ids = preselection.held_back
    state.candidates = preselection.kept
    active_before = tuple(state.active())
    to_match = [g for g in state.candidates if g.condition_of_journey not in active_before]
    return Recalled(list(high), active_before, to_match, pruned.dropped)
