"""The match round: guideline batches and node selection, concurrently, in one LLM round.

Round 1 matches the recalled guidelines in batches while every active journey — and every
journey predicted to start — selects its next step (a prediction is used only if the journey's
condition matches), and the customer's words are read for secrets typed ahead of their step
(`engine.stages.secrets_ahead`). Writes `state.matches`, `state.clarifications`,
`state.completed_customer_dependent`, `state.secrets_typed_ahead` and the match records of the
trace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engine.context import TurnContext
from engine.errors import LLMBudgetExceeded, LLMError
from engine.matching import guidelines as gm
from engine.matching.journeys import JourneyStepResult
from engine.model import Guideline
from engine.stages.journey_progress import first_runnable, select_step
from engine.stages.recall import Recalled
from engine.stages.secrets_ahead import read_secrets_ahead
from engine.stages.state import TurnState
from engine.trace import MatchRecord

StepResults = dict[str, JourneyStepResult | None]


async def match_round(state: TurnState, ctx: TurnContext, recalled: Recalled) -> StepResults:
    """Round 1: matching batches ∥ node selection of active journeys ∥ speculative entry of
    predicted journeys ∥ reading the messages for secrets typed ahead. Returns the node
    selections by journey id."""
    state.llm.round = 1
    predicted = [
        j
        for j in recalled.high
        if j not in recalled.active_before and state.prerequisites_met(state.agent.journey(j))
    ]
    selecting = (
        *recalled.active_before,
        *predicted,
        *_waiting_if_activated(state, recalled, [*recalled.active_before, *predicted]),
    )
    # The secret reading first: it starts before the others take the turn's budget.
    _, outcome, selections = await asyncio.gather(
        read_secrets_ahead(state, ctx),
        match_guidelines(state, ctx, recalled.to_match),
        asyncio.gather(*[select_step(state, ctx, state.agent.journey(j)) for j in selecting]),
    )
    absorb_matches(state, outcome)
    return dict(zip(selecting, selections, strict=True))


def _waiting_if_activated(state: TurnState, recalled: Recalled, selecting: list[str]) -> list[str]:
    """A predicted journey whose prerequisites have not completed cannot start this turn; it and
    the prerequisites that would run after the first one are selected in this same round anyway
    (when they collect values), so that if it activates, the values its message gave are kept
    for them while the prerequisites run (`keep_values_while_suspended`)."""
    extra: list[str] = []
    for jid in recalled.high:
        journey = state.agent.journey(jid)
        if jid in recalled.active_before or jid in state.suspended:
            continue
        if state.prerequisites_met(journey):
            continue
        first = first_runnable(state, journey, set())
        chain = [jid]
        for waiting in chain:
            for required in state.agent.journey(waiting).requires:
                if required not in chain and not state.completed_by_sender(required):
                    chain.append(required)
        for waiting in chain:
            if waiting == first or waiting in selecting or waiting in extra:
                continue
            if waiting in state.active() or waiting in state.suspended:
                continue
            if any(node.collects for node in state.agent.journey(waiting).nodes):
                extra.append(waiting)
    return extra


async def match_guidelines(
    state: TurnState, ctx: TurnContext, guidelines: Sequence[Guideline]
) -> gm.MatchingOutcome:
    """Match `guidelines` in batches (by kind and prompt budget), all batches concurrently."""
    batches = gm.plan_batches(
        guidelines,
        state.session,
        state.agent.relationships,
        state.agent.config.batch_prompt_budget_chars,
    )
    results = await asyncio.gather(*[_run_batch(state, ctx, b) for b in batches])
    merged = gm.MatchingOutcome()
    for r in results:
        merged.merge(r)
    return merged


async def _run_batch(state: TurnState, ctx: TurnContext, batch: gm.Batch) -> gm.MatchingOutcome:
    """One batch; the guidelines the model left without a verdict are asked once more on their
    own, and any still unanswered are reported in the trace — never a silent non-match."""
    outcome = await _ask(state, ctx, batch)
    if not outcome.unanswered:
        return outcome
    retry = batch.only(outcome.unanswered)
    outcome.unanswered.clear()
    state.trace.notes.append(
        f"matching batch {batch.label} left {len(retry.guidelines)} guideline(s) unanswered: "
        "asked again"
    )
    again = await _ask(state, ctx, retry)
    outcome.merge(again)
    missing = gm.report_unanswered(batch, outcome, [g.id for g in retry.guidelines])
    if missing:
        state.trace.notes.append(
            f"matching: no verdict for {', '.join(missing)} after a retry; treated as not "
            "matched this turn"
        )
    return outcome


async def _ask(state: TurnState, ctx: TurnContext, batch: gm.Batch) -> gm.MatchingOutcome:
    prompt = gm.build_match_prompt(ctx, batch, explain=state.agent.config.explain)
    try:
        gen = await state.llm.generate(
            gm.purpose_for(batch.kind), prompt, gm.schema_for(batch.kind), label=batch.label
        )
    except LLMError as exc:
        # A failed batch matches nothing: the turn goes on without those guidelines.
        skipped = gm.MatchingOutcome(skipped=[g.id for g in batch.guidelines])
        if not isinstance(exc, LLMBudgetExceeded):
            state.trace.notes.append(f"matching batch {batch.label} failed: {exc}")
        return skipped
    return gm.interpret(batch, gen.value)


def absorb_matches(state: TurnState, outcome: gm.MatchingOutcome) -> None:
    for gid, batch, matched, score, rationale in outcome.verdicts:
        state.trace.matches.append(
            MatchRecord(
                guideline_id=gid,
                batch=batch.value,
                matched=matched,
                score=score,
                rationale=rationale,
            )
        )
    for m in outcome.matches:
        state.matches[m.guideline.id] = m
    state.clarifications.extend(outcome.clarifications)
    state.completed_customer_dependent.extend(outcome.completed_customer_dependent)
