"""Recall: which guidelines a turn evaluates at all (stages 1–3 of the pipeline).

1. Tag filter — a guideline's audience tags (`agent:…`, `channel:…`, `journey:…`, `customer:…`)
   say where it applies: with none it is global, else one of them must be in the conversation's
   tag set (this agent, any of its journeys, the channel, the customer's tags as `customer:<tag>`).
   Plain labels (`billing`) organise guidelines for relationships and never filter.
2. High-probability journeys — those with an active path; if fewer than k, padded with the vector
   top-k over journey embeddings for what the customer said this turn, keeping only journeys at
   least `config.journey_min_similarity` similar to it (a "thanks" predicts none).
3. Drop the guidelines scoped to low-probability journeys; keep everything global (including every
   journey's activation conditions — see supplemental matching in `engine.stages.activation`).
4. Preselection, on large agents only: when more agent-wide guidelines than
   `config.guideline_top_k` remain, match only the k most similar to the recall query; when more
   journeys' activation conditions than `config.condition_top_k` remain, match only the
   conditions of the k most similar journeys (plus the high-probability ones). Guidelines awaiting
   the customer's data, continuous guidelines already applied and high-criticality guidelines are
   always matched. This bounds a turn's prompt however large the agent grows; the price is that a
   journey far from the conversation's words can go unmatched for a turn (set the k to 0 to
   match everything, every turn, as small agents do).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.context import TurnContext, render_history, render_terms, render_variables
from engine.model import AgentSnapshot, Guideline, agent_tag, journey_tag
from engine.ports import Embedder, VectorIndex
from engine.recall.index import RecallIndex, is_audience_tag, preselection_role, recall_index
from engine.recall.vectors import GUIDELINES, JOURNEYS, Array
from engine.sessions.session import EventKind, EventSource, SessionState


def conversation_tags(agent: AgentSnapshot, session: SessionState) -> set[str]:
    tags = {agent_tag(agent.id), f"channel:{session.channel}"}
    tags.update(t if t.startswith("customer:") else f"customer:{t}" for t in session.customer_tags)
    tags.update(journey_tag(j.id) for j in agent.journeys)
    return tags


def tag_filter(agent: AgentSnapshot, session: SessionState) -> list[Guideline]:
    """Enabled guidelines of the agent that apply to this conversation by their audience tags.

    Only audience tags filter: a guideline tagged `billing` to group it for a relationship is
    used in every conversation, as its author expects (nothing tags a conversation `billing`).
    This walks every guideline: the turn uses the same answer from the per-version
    `RecallIndex` (engine.recall.index); this is the definition it is tested against.
    """
    tags = conversation_tags(agent, session)
    return [g for g in agent.guidelines if g.enabled and _applies(g, tags)]


def _applies(guideline: Guideline, tags: set[str]) -> bool:
    audience = [t for t in guideline.tags if is_audience_tag(t)]
    return not audience or bool(tags.intersection(audience))


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


def turn_customer_text(ctx: TurnContext) -> str:
    """What the customer said this turn: the customer messages after the last other message."""
    said: list[str] = []
    for e in reversed(ctx.history):
        if e.kind is not EventKind.MESSAGE:
            continue
        if e.source is not EventSource.CUSTOMER:
            break
        said.append(e.text or "")
    return "\n".join(reversed([t for t in said if t.strip()]))


class RecallQuery:
    """The recall query and this turn's customer text, embedded together (one embedding call) at
    most once per turn and only when a ranking needs them."""

    def __init__(self, ctx: TurnContext, embedder: Embedder | None):
        self._ctx = ctx
        self._embedder = embedder
        self._vectors: tuple[Array, Array | None] | None = None

    async def _embedded(self) -> tuple[Array, Array | None] | None:
        if self._embedder is None:
            return None
        if self._vectors is None:
            said = turn_customer_text(self._ctx)
            texts = [recall_query(self._ctx)] + ([said] if said else [])
            vectors = await self._embedder.embed(texts)
            self._vectors = (vectors[0], vectors[1] if said else None)
        return self._vectors

    async def vector(self) -> Array | None:
        """The recall query's vector (conversation, variables, terms): ranks guidelines."""
        embedded = await self._embedded()
        return None if embedded is None else embedded[0]

    async def said_vector(self) -> Array | None:
        """The vector of what the customer said this turn (None if they sent no text)."""
        embedded = await self._embedded()
        return None if embedded is None else embedded[1]


@dataclass(frozen=True)
class Prediction:
    journeys: list[str]  # active and suspended journeys first, then the predicted ones
    below_threshold: list[str]  # ranked within k by similarity, but not similar enough


async def high_probability_journeys(
    ctx: TurnContext,
    *,
    k: int,
    embedder: Embedder | None,
    index: VectorIndex | None,
    query: RecallQuery | None = None,
    min_similarity: float = -1.0,
) -> Prediction:
    """Active journeys first (all of them, even beyond k); padded to k with the journeys most
    similar to what the customer said this turn, those at least `min_similarity` similar.

    Predicting a journey runs its node selection speculatively in round 1; a journey the turn
    enters without having been predicted costs a supplemental round instead. Entering a journey
    is prompted by what the customer says now (a journey already under way is active and needs
    no prediction), so the turn's own words rank and gate the prediction: the whole recall
    query, dominated by earlier messages and glossary terms, would rank the journey discussed
    before and make "thanks" look as close to a journey as a request does. Without customer
    text this turn (an attachment alone), the recall query ranks and the gate still applies."""
    agent = ctx.agent
    chosen = [j for j in ctx.session.active_journey_ids if agent.has_journey(j)]
    chosen += [
        j for j in ctx.session.suspended_journeys if agent.has_journey(j) and j not in chosen
    ]
    if len(chosen) >= k or embedder is None or index is None or not agent.journeys:
        return Prediction(chosen, [])
    query = query or RecallQuery(ctx, embedder)
    vector = await query.said_vector()
    if vector is None:
        vector = await query.vector()
    if vector is None:
        return Prediction(chosen, [])
    ranked = await index.nearest(JOURNEYS, vector, k + len(chosen))
    below: list[str] = []
    for journey_id, score in ranked:
        if len(chosen) + len(below) >= k:
            break
        if not agent.has_journey(journey_id) or journey_id in chosen:
            continue
        (chosen if score >= min_similarity else below).append(journey_id)
    return Prediction(chosen, below)


@dataclass(frozen=True)
class Recall:
    candidates: list[Guideline]  # what the first matching round evaluates
    dropped: Mapping[str, list[Guideline]]  # journey id → its scoped guidelines held back


def indexed_recall(index: RecallIndex, tags: frozenset[str], high: Sequence[str]) -> Recall:
    """`prune_low_probability(tag_filter(...), high)` from the per-version index: only the kept
    groups (agent-wide and high-probability journeys) are walked; the held-back journeys'
    guidelines are resolved when a supplemental round asks for them."""
    kept: list[str | None] = [None, *high]
    return Recall(index.usable(tags, kept), index.held_back(tags, kept))


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


@dataclass(frozen=True)
class Preselection:
    kept: list[Guideline]  # what the matcher evaluates
    held_back: list[str]  # ids recall left out this turn (agent-wide guidelines, conditions)


async def preselect(
    ctx: TurnContext,
    candidates: Sequence[Guideline],
    *,
    high: Sequence[str],
    index: VectorIndex | None,
    query: RecallQuery,
    facts: RecallIndex | None = None,
) -> Preselection:
    """Stage 4 (large agents only): keep the agent-wide guidelines and the journey conditions most
    similar to the conversation. Without an index, an embedder or the guidelines' vectors (an
    agent published before they were embedded), everything is kept.

    This walks every candidate and ranks every embedded guideline: a turn gets the same answer
    from the per-version index (`engine.recall.preselection.preselect_indexed`); this is the
    definition it is tested against."""
    config, session = ctx.agent.config, ctx.session
    if (not config.guideline_top_k and not config.condition_top_k) or index is None:
        return Preselection(list(candidates), [])
    facts = facts or recall_index(ctx.agent)  # per-version answers: no tag loop per guideline
    roles = facts.roles
    pending = set(session.pending_customer_guideline_ids)
    applied = set(session.applied_guideline_ids)
    wide: list[str] = []  # ids, as the rest of the stage needs them
    conditions: dict[str, list[str]] = {}  # journey id → its condition guidelines' ids
    for g in candidates:
        gid = g.id
        role = roles.get(gid) or preselection_role(g)  # (a guideline the index lacks)
        journey_id = role.condition_of
        if journey_id is None:
            # always matched: high criticality (not agent_wide), awaiting the customer's data,
            # or continuous and already applied
            if role.agent_wide and gid not in pending and not (role.continuous and gid in applied):
                wide.append(gid)
        elif journey_id not in high:
            conditions.setdefault(journey_id, []).append(gid)

    drop: set[str] = set()
    if config.guideline_top_k and len(wide) > config.guideline_top_k:
        eligible = set(wide)
        chosen = await _most_similar(
            index, GUIDELINES, query, eligible, config.guideline_top_k, len(ctx.agent.guidelines)
        )
        if chosen is not None:
            drop.update(eligible.difference(chosen))
    if config.condition_top_k and len(conditions) > config.condition_top_k:
        journeys = set(conditions)
        chosen = await _most_similar(
            index, JOURNEYS, query, journeys, config.condition_top_k, len(ctx.agent.journeys)
        )
        if chosen is not None:
            for journey_id in journeys.difference(chosen):
                drop.update(conditions[journey_id])
    if not drop:
        return Preselection(list(candidates), [])
    kept: list[Guideline] = []
    held_back: list[str] = []
    for g in candidates:
        if g.id in drop:
            held_back.append(g.id)
        else:
            kept.append(g)
    return Preselection(kept, held_back)


async def _most_similar(
    index: VectorIndex,
    namespace: str,
    query: RecallQuery,
    eligible: set[str],
    k: int,
    size: int,
) -> list[str] | None:
    """The k eligible ids nearest the query, best first, ranking all `size` ids the namespace can
    hold; None when nothing can be ranked (no embedder, or the namespace was never embedded)."""
    vector = await query.vector()
    if vector is None:
        return None
    ranked = await index.nearest(namespace, vector, size)
    if not ranked:
        return None
    return [item for item, _ in ranked if item in eligible][:k]
