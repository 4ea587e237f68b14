"""Recall: which guidelines a turn evaluates at all (stages 1–3 of the pipeline).

1. Tag filter — a guideline applies to this conversation if it has no tags (global) or one of its
   tags is in the conversation's tag set (this agent, any of its journeys, the customer's tags,
   the channel).
2. High-probability journeys — those with an active path; if fewer than k, padded with the vector
   top-k over journey embeddings, the query built from history, variables and terms.
3. Drop the guidelines scoped to low-probability journeys; keep everything global (including every
   journey's activation conditions, so vector recall can never hide a journey — see supplemental
   matching in `engine.turn`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.context import TurnContext, render_history, render_terms, render_variables
from engine.model import AgentSnapshot, Guideline, agent_tag, journey_tag
from engine.ports import Embedder, VectorIndex
from engine.session import SessionState

JOURNEY_NAMESPACE = "journeys"


def conversation_tags(agent: AgentSnapshot, session: SessionState) -> set[str]:
    tags = {agent_tag(agent.id), f"channel:{session.channel}", *session.customer_tags}
    tags.update(journey_tag(j.id) for j in agent.journeys)
    return tags


def tag_filter(agent: AgentSnapshot, session: SessionState) -> list[Guideline]:
    """Enabled guidelines of the agent that apply to this conversation by their tags."""
    tags = conversation_tags(agent, session)
    return [g for g in agent.guidelines if g.enabled and (not g.tags or tags.intersection(g.tags))]


def recall_query(ctx: TurnContext, matched: Sequence[Guideline] = ()) -> str:
    """The text embedded to rank journeys: recent conversation, variables, matched conditions,
    glossary. Only this query is embedded on the hot path."""
    parts = [render_history(ctx.history, limit=6)]
    variables = render_variables(ctx.variables)
    if variables:
        parts.append(variables)
    if matched:
        parts.append("\n".join(g.condition for g in matched))
    terms = render_terms(ctx.terms)
    if terms:
        parts.append(terms)
    return "\n".join(parts)


async def high_probability_journeys(
    ctx: TurnContext,
    *,
    k: int,
    embedder: Embedder | None,
    index: VectorIndex | None,
) -> list[str]:
    """Active journeys first (all of them, even beyond k); padded to k by vector similarity."""
    agent = ctx.agent
    chosen = [j for j in ctx.session.active_journey_ids if agent.has_journey(j)]
    chosen += [
        j for j in ctx.session.suspended_journeys if agent.has_journey(j) and j not in chosen
    ]
    if len(chosen) >= k or embedder is None or index is None or not agent.journeys:
        return chosen
    vectors = await embedder.embed([recall_query(ctx)])
    ranked = await index.nearest(JOURNEY_NAMESPACE, vectors[0], k + len(chosen))
    for journey_id, _score in ranked:
        if len(chosen) >= k:
            break
        if agent.has_journey(journey_id) and journey_id not in chosen:
            chosen.append(journey_id)
    return chosen


@dataclass(frozen=True)
class Recall:
    candidates: list[Guideline]  # what the first matching round evaluates
    dropped: dict[str, list[Guideline]]  # journey id → its scoped guidelines held back


def prune_low_probability(guidelines: Sequence[Guideline], high: Sequence[str]) -> Recall:
    """Keep global guidelines and those scoped to high-probability journeys."""
    keep: list[Guideline] = []
    dropped: dict[str, list[Guideline]] = {}
    high_set = set(high)
    for g in guidelines:
        journey_id = g.scoped_journey_id
        if journey_id is None or journey_id in high_set:
            keep.append(g)
        else:
            dropped.setdefault(journey_id, []).append(g)
    return Recall(keep, dropped)
