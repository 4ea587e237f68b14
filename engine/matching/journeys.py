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

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.agent_config import LLMPurpose
from engine.context import TurnContext
from engine.llm import TurnLLM
from engine.matching.collected_values import CollectedItem
from engine.matching.journey_answer import JourneyNodeSelection, verify_advancement
from engine.matching.journey_forced_moves import auto_return
from engine.matching.journey_graph import build_node_views, current_run, exited_run, resume_run
from engine.matching.journey_prompt import build_node_selection_prompt
from engine.matching.journey_walk import VerifiedStep
from engine.matching.values_ahead import (
    Words,
    collect_values,
    pass_satisfied_steps,
    supported_items,
)
from engine.model import Journey
from engine.sessions.session import EventKind, EventSource
from engine.values.binding import Binding
from engine.values.grounding import CustomerMessage

__all__ = ["JourneyStepResult", "said_ahead_messages", "select_journey_step"]


@dataclass(frozen=True)
class JourneyStepResult:
    """The outcome of node selection for one journey in one turn."""

    journey_id: str
    step: VerifiedStep
    collected: dict[str, Any]  # validated, typed values for fields of the steps reached
    rationale: str
    used_llm: bool
    notes: tuple[str, ...]  # values dropped and why (path repairs are in `step.repairs`)
    # field → the step ahead it was given for (`engine.matching.values_ahead`)
    ahead: dict[str, str] = field(default_factory=dict)
    grounded: frozenset[str] = frozenset()  # fields found in the customer's words this turn
    # values the customer gave that failed validation: (field, why) — the reply says why
    refused: tuple[tuple[str, str], ...] = ()
    # field → the offset of the customer message holding it (`CollectedThisTurn.said_at`)
    said_at: dict[str, int] = field(default_factory=dict)
    # every value the model reported, kept or not: one refused or ignored may still be a secret
    reported: tuple[CollectedItem, ...] = ()
    # field → how the customer gave it (`engine.values.binding`)
    bindings: dict[str, Binding] = field(default_factory=dict)


def messages_this_turn(ctx: TurnContext, *, sender: str | None = None) -> list[CustomerMessage]:
    """The customer's messages of this turn (only `sender`'s, when given)."""
    return said_ahead_messages(ctx, None, sender=sender)


def said_ahead_messages(
    ctx: TurnContext, journey_id: str | None, *, sender: str | None = None
) -> list[CustomerMessage]:
    """The only words a value ahead of its step may come from, for `journey_id`: the customer's
    messages of this turn, and those of the turn that asked for the journey while a prerequisite
    ran first (`SessionState.said_with_request`, kept until the journey's run ends). With
    `sender`, only that sender's (`SessionState.sender_of`)."""
    first = ctx.session.next_offset()
    request = set(ctx.session.said_with_request.get(journey_id or "", ()))
    return [
        CustomerMessage.of(e)
        for e in ctx.history
        if (e.offset >= first or e.offset in request)
        and e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
        and (sender is None or ctx.session.sender_of(e) == sender)
    ]


def words_of(ctx: TurnContext, journey_id: str) -> Words:
    """The customer's words a journey's values are read from this turn (`Words`)."""
    first = ctx.session.next_offset()
    customer = [
        e for e in ctx.history if e.kind is EventKind.MESSAGE and e.source is EventSource.CUSTOMER
    ]
    results: list[Any] = [r.data for r in ctx.tool_results if r.error is None]
    results += [
        e.data.get("llm_view")
        for e in ctx.history
        if e.kind is EventKind.TOOL and not e.data.get("error")
    ]
    session = ctx.session
    # A value ahead of its step may come from what the customer said since they asked for this
    # run (this turn's words, the request's, and theirs in between).
    since = session.run_started.get(journey_id, first)
    request = set(session.said_with_request.get(journey_id, ()))
    return Words(
        now=[CustomerMessage.of(e) for e in customer if e.offset >= first],
        ahead=[CustomerMessage.of(e) for e in customer if e.offset >= since or e.offset in request],
        earlier=[CustomerMessage.of(e) for e in customer if e.offset < first],
        results=results,
        offered=[
            CustomerMessage(e.offset, e.text or "")
            for e in ctx.history
            if e.offset < first and e.kind is EventKind.MESSAGE and e.source is EventSource.AGENT
        ][-1:],
        reading=ctx.reading,
        held_by={
            c.name: c.sender or session.customer_id
            for c in session.collected
            if c.journey_id == journey_id
        },
        writers=frozenset(session.sender_of(e) for e in customer if e.offset >= first),
    )


def _given_ahead_before(
    ctx: TurnContext, journey_id: str, previous_path: Sequence[str | None]
) -> dict[str, set[str]]:
    """Step → fields given ahead for it in earlier turns of this run, for steps this run has not
    visited yet: a value ahead answers its step once (a loop back to the step asks again)."""
    if not previous_path or previous_path[-1] is None:
        return {}  # a fresh run collects its own values again
    visited = set(current_run(previous_path))
    given: dict[str, set[str]] = {}
    for c in ctx.session.collected:
        # A secret is stored masked: no longer a value, so it answers no step in a later turn.
        if c.journey_id == journey_id and c.ahead and not c.secret and c.node_id not in visited:
            given.setdefault(c.node_id, set()).add(c.name)
    return given


async def select_journey_step(
    llm: TurnLLM,
    ctx: TurnContext,
    journey: Journey,
    previous_path: Sequence[str | None],
    *,
    executed_tools: set[str],
    max_depth: int = 5,
    explain: bool = False,
    given_ahead: Mapping[str, Collection[str]] | None = None,
    run_values: Collection[str] | None = None,
) -> JourneyStepResult:
    """Where `journey` stands after this turn: no LLM call when the graph decides alone, else one
    call whose answer is verified and whose values are typed. LLM failures (`LLMError`,
    including `LLMBudgetExceeded`) propagate: the turn pipeline owns the fallback policy.
    `given_ahead` (step → fields) overrides the values given ahead in earlier turns of this run
    (a journey resumed after its prerequisites brings those its activating message gave).
    `run_values`: the fields the live run holds a value for (default: the session's, for a live
    run); the walk leaves no chat step with a required field the run does not hold."""
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
    live = bool(previous_path) and previous_path[-1] is not None
    ahead_before = (
        _given_ahead_before(ctx, journey.id, previous_path)
        if given_ahead is None
        else {node: set(names) for node, names in given_ahead.items()}
    )
    run_held = set(known if run_values is None else run_values)
    held = set(run_held) if live else set()
    held.update(name for names in ahead_before.values() for name in names)
    # What the run the customer left holds counts only if the answer resumes that run.
    left_held = run_held if not live and exited_run(previous_path, views) else set()
    words = words_of(ctx, journey.id)
    # Where the journey stood when the customer wrote: the step they were answering (not where
    # this turn's tools have moved it since).
    stood = ctx.session.journey_paths.get(journey.id, previous_path)
    # A value nothing the customer said supports answers no step: the walk holds there.
    supported = supported_items(journey, selection.collected, words, stood)
    step = verify_advancement(
        journey,
        views,
        previous_path,
        selection.model_copy(update={"collected": supported}),
        executed_tools,
        collected=held,
        left_collected=left_held,
    )
    if step.resumed and given_ahead is None:
        # The resumed run's values given ahead answer their steps as in any live run.
        ahead_before = _given_ahead_before(ctx, journey.id, resume_run(previous_path, views))
    if step.outcome == "exit":
        notes = ("dropped the values given for an exited journey",) if selection.collected else ()
        return JourneyStepResult(
            journey.id,
            step,
            {},
            selection.rationale,
            True,
            notes,
            reported=tuple(selection.collected),
        )
    got = collect_values(journey, views, step, selection.collected, words, stood)
    ahead_for = ahead_before
    for name, node_id in got.ahead.items():
        ahead_for.setdefault(node_id, set()).add(name)
    step = pass_satisfied_steps(views, step, got.grounded, ahead_for)
    return JourneyStepResult(
        journey.id,
        step,
        got.values,
        selection.rationale,
        True,
        got.notes,
        got.ahead,
        got.grounded,
        tuple(got.refused.items()),
        got.said_at,
        tuple(selection.collected),
        got.bindings,
    )
