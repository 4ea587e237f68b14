"""Moving journeys along: node selection, recording a transition, prerequisites and resumption.

Several stages move journeys (matching selects steps, activation enters new journeys, the tool
stage returns from tool steps, interrupts resume a paused step); they all do it through these
functions so that a transition is recorded, traced and ended the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from engine.context import TurnContext
from engine.errors import LLMBudgetExceeded, LLMError
from engine.matching.journey_forced_moves import entry_step
from engine.matching.journey_walk import VerifiedStep
from engine.matching.journeys import JourneyStepResult, select_journey_step
from engine.model import Journey
from engine.privacy.secrets import MASK
from engine.sessions.history import upsert_collected
from engine.sessions.session import CollectedValue
from engine.stages.state import TurnState
from engine.trace import JourneyTransitionRecord
from engine.values.binding import Binding


async def select_step(
    state: TurnState,
    ctx: TurnContext,
    journey: Journey,
    given_ahead: Mapping[str, Collection[str]] | None = None,
) -> JourneyStepResult | None:
    """Ask the model where `journey` goes next; a failed call keeps the journey where it was.
    A journey that is not running is selected from its stored path too: a run the customer
    left mid-way is offered where it was left (`engine.matching.journey_graph.exited_run`)."""
    try:
        result = await select_journey_step(
            state.llm,
            ctx,
            journey,
            state.paths.get(journey.id, ()),
            executed_tools=state.succeeded_tools,
            max_depth=state.agent.config.max_journey_depth,
            explain=state.agent.config.explain,
            given_ahead=given_ahead,
            # what this run holds so far, this turn's earlier rounds and secrets included
            run_values=state.collected_for(journey.id),
        )
    except LLMError as exc:
        if not isinstance(exc, LLMBudgetExceeded):
            state.trace.notes.append(f"node selection for {journey.id!r} failed: {exc}")
        return None
    remember_reported_secrets(state, result)
    return result


def remember_reported_secrets(state: TurnState, result: JourneyStepResult) -> None:
    """Every value the model reported for a secret field is this turn's secret, kept or not: one
    refused by the field's bounds or ignored for a step ahead is still what the customer typed,
    and the trace's note on it and their message quote it. (Names match in any case, as the
    fields they fill do.)"""
    folded = {name.casefold() for name in state.secrets.names}
    for item in result.reported:
        if item.name.strip().casefold() in folded:
            state.secrets.remember(item.value)


def apply_step(
    state: TurnState,
    journey_id: str,
    result: JourneyStepResult | None,
    *,
    keep_collected: bool = False,
) -> None:
    """Record a journey's transition and collected values; exits and completions end it.
    `keep_collected`: a resumed journey keeps the values its activating message gave."""
    previous = state.paths.get(journey_id, ())
    if result is None:
        if previous and previous[-1] is not None:
            state.steps[journey_id] = previous[-1]  # keep the step we were at
        return
    fresh_run = not previous or previous[-1] is None
    if result.step.resumed:
        keep_left_values_as_candidates(state, journey_id)
    elif fresh_run and result.step.outcome != "exit" and not keep_collected:
        # A new run of a journey collects its own values again: a second transfer must never
        # reuse the first one's amount or destination.
        state.collected = [c for c in state.collected if c.journey_id != journey_id]
    record_collected(
        state, journey_id, result.collected, result.ahead, result.said_at, result.bindings
    )
    state.trace.notes.extend(result.notes)
    for name, why in result.refused:  # never the value itself: it may be a secret
        state.notes_for_reply.append(refused_value_note(name, why))
    how = "llm" if result.used_llm else "auto_return"
    apply_verified(
        state, journey_id, result.step, "resumed" if result.step.resumed else how, result.rationale
    )


def keep_left_values_as_candidates(state: TurnState, journey_id: str) -> None:
    """The customer resumes a run they left: its values are kept (its steps are not asked
    again), but as candidates — each was given before the customer said to stop, and whether
    this message resumes that run or starts a new one is the model's reading. A consequential
    tool shows them and runs only after a yes to exactly that call (`CollectedValue.bound`
    False, no pick `origin`); a value the customer gives again answers as usual."""
    left = "given before the customer left this run, which they resumed later"
    kept: list[CollectedValue] = []
    for c in state.collected:
        if c.journey_id == journey_id and c.turn_id != state.turn_id:
            said = [part for part in (c.origin, c.evidence) if part]
            evidence = "; ".join(said if left in c.evidence else [*said, left])
            c = c.model_copy(update={"bound": False, "origin": None, "evidence": evidence})
        kept.append(c)
    state.collected = kept


def refused_value_note(name: str, why: str) -> str:
    """The note that makes the reply say why a value was not accepted, e.g. "The value given for
    amount was refused: it must be greater than 0. Say why and ask for it again." """
    return f"The value given for {name} was refused: it {why}. Say why and ask for it again."


def apply_verified(
    state: TurnState,
    journey_id: str,
    step: VerifiedStep,
    how: str,
    rationale: str = "",
    *,
    by: str | None = None,
) -> None:
    """Move `journey_id` to a verified step (or end it) and trace the transition. A completion
    counts for `by` (for prerequisites): the sender whose answer moved it, by default this
    turn's."""
    previous = state.paths.get(journey_id, ())
    if (not previous or previous[-1] is None) and step.outcome not in ("exit", "completed"):
        # A new run: what it is for was asked now, or with the request a prerequisite delayed.
        asked = state.said_with_request.get(journey_id) or (state.session.next_offset(),)
        state.run_started[journey_id] = min(asked)
    state.paths[journey_id] = tuple(step.path)
    state.steps.pop(journey_id, None)
    if step.outcome == "completed":
        if journey_id not in state.completed:
            state.completed.append(journey_id)
        sender = by or state.sender
        senders = state.completed_by.get(journey_id, ())
        if sender not in senders:
            state.completed_by[journey_id] = (*senders, sender)
        how = "completed"
    elif step.outcome == "exit":
        how = "exit"
        if journey_id in state.suspended:
            state.suspended.remove(journey_id)
    elif step.node_id is not None:
        state.steps[journey_id] = step.node_id
    state.trace.journeys.append(
        JourneyTransitionRecord(
            journey_id=journey_id,
            previous_path=list(previous),
            new_path=list(step.path),
            node_id=step.node_id,
            how=how,
            repairs=list(step.repairs),
            rationale=rationale,
            proposed=list(step.proposed),
        )
    )


def record_collected(
    state: TurnState,
    journey_id: str,
    values: dict[str, Any],
    ahead: dict[str, str] | None = None,
    said_at: Mapping[str, int] | None = None,
    bindings: Mapping[str, Binding] | None = None,
) -> None:
    """Store the values collected this turn; one given ahead of its step is recorded for that
    step (which it satisfies once the journey gets there). Each is recorded as said by the
    sender of the message holding it (`said_at`: field → offset), else by the writer of the
    turn's last message — in a group, erasing a person takes what they said with them — and
    with how it was given (`bindings`, `engine.values.binding`; none: worked out)."""
    ahead = ahead or {}
    said_at = said_at or {}
    bindings = bindings or {}
    for name, value in values.items():
        secret = state.secrets.is_secret(name)
        if secret:
            state.secrets.remember(value)  # masked wherever the customer typed it
        state.trace.collected[f"{journey_id}.{name}"] = MASK if secret else str(value)
        node_id = ahead.get(name) or state.paths.get(journey_id, (None,))[-1] or ""
        replaced = upsert_collected(
            state.collected,
            CollectedValue(
                journey_id=journey_id,
                node_id=node_id,
                name=name,
                value=value,
                turn_id=state.turn_id,
                secret=secret,
                ahead=name in ahead,
                sender=state.writer_of(said_at.get(name)),
                bound=name in bindings and bindings[name].bound,
                evidence=_evidence_text(state, name, bindings.get(name)),
            ),
        )
        note_replaced(state, replaced, value)


def _evidence_text(state: TurnState, name: str, binding: Binding | None) -> str:
    if binding is None:
        return ""
    text = binding.evidence + (f" — {binding.why}" if binding.why else "")
    if state.secrets.is_secret(name):
        return MASK  # where a secret was typed quotes it
    return text


def note_replaced(state: TurnState, replaced: CollectedValue | None, value: Any) -> None:
    """A field holds one value in the session; what it held before is in the trace."""
    if replaced is None or replaced.turn_id == state.turn_id:
        return
    before = MASK if replaced.secret else str(replaced.value)
    now = MASK if replaced.secret else str(value)
    if before != now:
        state.trace.notes.append(
            f"collected {replaced.journey_id}.{replaced.name}: {now} replaces {before} "
            f"(given in {replaced.turn_id})"
        )


def keep_values_while_suspended(
    state: TurnState, journey_id: str, result: JourneyStepResult | None, *, first: bool
) -> None:
    """A journey suspended for its prerequisites — or a prerequisite that will run after the one
    entered now — keeps the values its activating message gave in the customer's words
    ("transfer $250 from savings to 7770001" while a login comes first): each is recorded
    ahead, for the first step that collects it. Nothing else of that node selection is used —
    the journey has not started. The `first` time, a previous run's values go: the run these
    values are for has not started."""
    if first:
        state.collected = [c for c in state.collected if c.journey_id != journey_id]
    if result is None or result.step.outcome == "exit":
        return
    journey = state.agent.journey(journey_id)
    owners: dict[str, str] = {}
    for node in journey.nodes:
        for fld in node.collects:
            owners.setdefault(fld.name, node.id)
    values = {n: v for n, v in result.collected.items() if n in result.grounded and n in owners}
    if not values:
        return
    record_collected(
        state,
        journey_id,
        values,
        {n: owners[n] for n in values},
        result.said_at,
        result.bindings,
    )
    state.trace.notes.append(
        f"kept {', '.join(sorted(values))} for {journey_id!r} until its prerequisites complete"
    )


def given_ahead_while_suspended(state: TurnState, journey_id: str) -> dict[str, set[str]]:
    """Step → fields kept for a suspended journey by `keep_values_while_suspended`."""
    kept: dict[str, set[str]] = {}
    for c in state.collected:
        # A secret from an earlier turn is stored masked: its step must ask for it again.
        if c.journey_id == journey_id and c.ahead and not (c.secret and c.turn_id != state.turn_id):
            kept.setdefault(c.node_id, set()).add(c.name)
    return kept


def first_runnable(state: TurnState, journey: Journey, seen: set[str]) -> str | None:
    """The journey to run for `journey`: itself, or its first prerequisite not yet completed
    (recursively); None on a cycle."""
    if journey.id in seen:
        return None
    seen.add(journey.id)
    for req in journey.requires:
        if not state.completed_by_sender(req):
            return first_runnable(state, state.agent.journey(req), seen)
    return journey.id


async def resume_suspended(state: TurnState) -> None:
    """After a prerequisite completes, resume (or advance the chain of) suspended journeys."""
    for _ in range(len(state.suspended) + 1):
        waiting = [j for j in state.suspended if j not in state.active()]
        if not waiting or state.active():
            return
        jid = waiting[-1]
        target = first_runnable(state, state.agent.journey(jid), set())
        if target is None:
            return
        if target == jid:
            state.suspended.remove(jid)
        journey = state.agent.journey(target)
        previous = state.paths.get(target, ())
        # The suspended journey, or a prerequisite of it, brings the values its activating
        # message gave ahead (`keep_values_while_suspended`).
        kept = given_ahead_while_suspended(state, target)
        known = {name for names in kept.values() for name in names}
        entry = entry_step(journey, state.views[target], previous_path=previous, known_fields=known)
        if entry is not None:
            # The usual case (a first question): no LLM round. Values the customer gave
            # earlier are still picked up by the journey's next node selection.
            if not kept:
                state.collected = [c for c in state.collected if c.journey_id != target]
            apply_verified(state, target, entry, "entry")
            continue
        state.llm.round += 1
        result = await select_step(state, state.context(), journey, kept or None)
        apply_step(state, target, result, keep_collected=bool(kept))
        if result is None:
            return
