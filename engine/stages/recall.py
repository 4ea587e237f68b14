"""The recall stage: which guidelines and journeys this turn may consider at all.

Tag filter → high-probability journeys (active ones, else vector top-k) → pruning of the
guidelines of low-probability journeys → preselection on large agents, all three answered from
the per-version recall index (engine.recall.index, engine.recall.preselection). Writes
`state.candidates`; returns what matching needs next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.context import TurnContext
from engine.model import Guideline
from engine.ports import VectorIndex
from engine.recall.index import recall_index
from engine.recall.preselection import preselect_indexed
from engine.recall.selection import RecallQuery, high_probability_journeys
from engine.stages.state import TurnState, UsableGuidelines


@dataclass(frozen=True)
class Recalled:
    high: list[str]  # journeys predicted to matter this turn, most likely first
    active_before: tuple[str, ...]  # journeys with a current step when the turn began, in order
    to_match: list[Guideline]  # candidates to match in round 1
    dropped: Mapping[str, list[Guideline]]  # pruned guidelines by journey, for supplemental rounds


async def recall(state: TurnState, ctx: TurnContext, index: VectorIndex | None) -> Recalled:
    # The per-version index answers the tag filter and the pruning without walking every
    # guideline (engine.recall.index); entailment asks it for the usable ones in scope.
    index_of_version = recall_index(state.agent)
    tags = index_of_version.session_tags(state.session.channel, state.session.customer_tags)
    state.usable = UsableGuidelines(index_of_version, tags)
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
    # Recall's answer is `preselect(indexed_recall(...).candidates)`: computed from the
    # per-version split of the kept groups, so a turn costs what it keeps, not what the agent
    # holds (engine.recall.preselection); the held-back journeys resolve on access.
    preselection = await preselect_indexed(
        ctx, index_of_version, tags, high=high, vectors=index, query=query
    )
    state.trace.held_back_guideline_ids = preselection.held_back
    state.candidates = preselection.kept
    active_before = tuple(state.active())
    # (a candidate is one of the version's guidelines: the index knows what each activates)
    condition_of = index_of_version.condition_of
    to_match = (
        [g for g in state.candidates if condition_of[g.id] not in active_before]
        if active_before
        else list(state.candidates)
    )
    kept: list[str | None] = [None, *high]
    return Recalled(list(high), active_before, to_match, index_of_version.held_back(tags, kept))
