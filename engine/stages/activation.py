"""Activation: journeys whose condition matched start, prerequisites first, then a supplemental
round for journeys nobody predicted.

Every journey whose condition guideline matched activates. A journey whose prerequisites have not
completed is suspended and its first unmet prerequisite is entered instead; when that completes,
the suspended journey resumes by itself — the customer is not asked again, and the messages that
asked for it stay evidence of the values they said ahead (`remember_request`). Journeys activated
outside recall's prediction get one more round (their scoped guidelines and their entry step).
Writes journey progress (`paths`, `steps`, `suspended`, `completed`, `collected`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engine.context import TurnContext
from engine.matching.journey_forced_moves import entry_step
from engine.recall.index import recall_index
from engine.sessions.session import EventKind, EventSource
from engine.stages.journey_progress import (
    apply_step,
    apply_verified,
    first_runnable,
    keep_values_while_suspended,
    resume_suspended,
    select_step,
)
from engine.stages.match import StepResults, absorb_matches, match_guidelines
from engine.stages.recall import Recalled
from engine.stages.state import TurnState
from engine.trace import JourneyTransitionRecord
from engine.values.grounding import CustomerMessage

# A request's messages kept for the journey it asked for: one turn's, and at most this many.
MAX_REQUEST_MESSAGES = 4


async def activate(
    state: TurnState, ctx: TurnContext, recalled: Recalled, step_results: StepResults
) -> None:
    newly = newly_activated(state, recalled.active_before)
    state.trace.activated_journeys = list(newly)
    suspended_before = set(state.suspended)
    to_enter = apply_prerequisites(state, newly)
    waiting = list(waiting_for_prerequisites(state, newly, to_enter))
    # A waiting journey that recall did not predict has no selection from round 1; it gets one
    # in the supplemental round, so what its activating message gave is not lost.
    unselected = [
        j
        for j in waiting
        if j not in step_results and any(n.collects for n in state.agent.journey(j).nodes)
    ]

    supplemental = [j for j in to_enter if j not in step_results]
    # A prerequisite the customer did not ask for starts at its first question: no LLM round
    # (the customer's message was about the suspended journey, not this one).
    for jid in [j for j in supplemental if j not in newly]:
        entry = entry_step(state.agent.journey(jid), state.views[jid])
        if entry is not None and not recalled.dropped.get(jid):
            apply_verified(state, jid, entry, "entry")
            supplemental.remove(jid)
            to_enter.remove(jid)
    if supplemental or unselected:
        state.llm.round = 2
        if supplemental:
            state.trace.supplemental_journeys = list(supplemental)
        extra_guidelines = [g for j in supplemental for g in recalled.dropped.get(j, [])]
        selecting = [*supplemental, *unselected]
        extra, entries = await asyncio.gather(
            match_guidelines(state, ctx, extra_guidelines),
            asyncio.gather(*[select_step(state, ctx, state.agent.journey(j)) for j in selecting]),
        )
        absorb_matches(state, extra)
        step_results.update(zip(selecting, entries, strict=True))
    # What the activating message gave is kept for the suspended journey and for the
    # prerequisites that will run after the one entered now ("from savings" for the balance).
    for jid in waiting:
        first = jid not in suspended_before
        keep_values_while_suspended(state, jid, step_results.get(jid), first=first)
    for jid in [*recalled.active_before, *to_enter]:
        apply_step(state, jid, step_results.get(jid))
    await resume_suspended(state)


def waiting_for_prerequisites(
    state: TurnState, newly: Sequence[str], to_enter: Sequence[str]
) -> list[str]:
    """The journeys newly suspended this turn and the prerequisites of theirs that will run
    later (not completed, not running, not entered now), each once, in a stable order."""
    waiting: list[str] = []

    def visit(jid: str) -> None:
        if jid in waiting or jid in to_enter or jid in state.active():
            return
        if state.completed_by_sender(jid):
            return
        waiting.append(jid)
        for required in state.agent.journey(jid).requires:
            visit(required)

    for jid in newly:
        if jid in state.suspended and jid not in to_enter:
            visit(jid)
    return waiting


def remember_request(state: TurnState, journey_id: str) -> None:
    """The customer's typed messages of this turn — the request a prerequisite now delays —
    stay evidence of values said ahead for `journey_id` until its run ends ("a large pizza with
    mushrooms" before the login): by offset, so the stored text is the log's, secrets masked."""
    offsets = tuple(
        e.offset
        for e in state.events
        if e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
        and CustomerMessage.of(e).text  # a button press is no words
    )[-MAX_REQUEST_MESSAGES:]
    if offsets:
        state.said_with_request[journey_id] = offsets
    else:
        state.said_with_request.pop(journey_id, None)


def newly_activated(state: TurnState, active_before: Sequence[str]) -> list[str]:
    """The journeys, not active before the turn, whose condition matched (the agent's order);
    looked up from the matches in the version's index rather than by walking every journey."""
    index = state.usable.index or recall_index(state.agent)
    return [j for j in index.journeys_activated_by(state.matches) if j not in active_before]


def apply_prerequisites(state: TurnState, newly: Sequence[str]) -> list[str]:
    """Journeys to enter now: each newly activated journey, or its first unmet prerequisite
    (the journey itself is then suspended until that completes)."""
    to_enter: list[str] = []
    for jid in newly:
        journey = state.agent.journey(jid)
        target = first_runnable(state, journey, set())
        if target is None:
            continue
        if target != jid and jid not in state.suspended:
            state.suspended.append(jid)
            remember_request(state, jid)
            state.trace.journeys.append(
                JourneyTransitionRecord(
                    journey_id=jid,
                    previous_path=list(state.paths.get(jid, ())),
                    new_path=list(state.paths.get(jid, ())),
                    node_id=None,
                    how="suspended",
                    rationale=f"waiting for prerequisite journey {target!r}",
                )
            )
        if target not in to_enter and target not in state.active():
            to_enter.append(target)
    return to_enter
