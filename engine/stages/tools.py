"""The tool stage: which calls are due, with which arguments, run through the dispatcher, and
what the journeys and guidelines make of the results.

Bounded iterations of: gate (only tools of matched guidelines and selected tool steps) → fill
arguments from known values, plan the rest with one LLM call → validate → dispatch → return
from tool steps (auto-return or re-selection) → re-match guidelines that opted in. Writes tool
results and events, `executed_tools`, `performed_tool_steps`, questions, and journey progress.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from engine.agent_config import HANDOFF_TOOL, LLMPurpose
from engine.context import llm_view_of
from engine.errors import LLMError
from engine.matching.journey_forced_moves import auto_return
from engine.matching.journey_walk import VerifiedStep
from engine.model import END_OF_JOURNEY, Journey, JourneyNode, NodeKind
from engine.ports import ToolCall, ToolContext, ToolDispatcher, ToolOutcome
from engine.privacy.secrets import MASK
from engine.relations import Resolution
from engine.sessions.history import RESPONSE_ONLY
from engine.sessions.session import EventKind, EventSource
from engine.stages.action_gate import ClearedCall, clear_call, evidence_for, trace_tool
from engine.stages.interrupts import awaits_result, interrupted_by, maybe_interrupt
from engine.stages.journey_progress import (
    apply_step,
    apply_verified,
    resume_suspended,
    select_step,
)
from engine.stages.match import absorb_matches, match_guidelines
from engine.stages.relationships import resolve_relationships
from engine.stages.retry_offers import held_note, retry_held
from engine.stages.state import TurnState
from engine.tools.calls import (
    ToolCallPlan,
    build_tool_call_prompt,
    fill_arguments,
    known_values,
    missing_argument_question,
)
from engine.tools.spec import ToolSpec

PlannedCall = tuple[ToolSpec, dict[str, Any], str | None]  # spec, arguments, journey of the step


async def run_tools(state: TurnState, resolution: Resolution) -> None:
    """Run the calls due this turn, re-evaluating after each round of results."""
    dispatcher = state.deps.tools
    for _iteration in range(state.agent.config.max_tool_iterations):
        calls: list[PlannedCall] = []
        known = known_for_arguments(state)
        # A journey tool step whose arguments are all known runs without any LLM call; one
        # with gaps gets a single extraction attempt together with the guidelines' tools.
        step_of_tool: dict[str, str] = {}
        offered: dict[str, str] = {}
        for journey, node in _journey_tool_steps(state, resolution):
            for name in node.tools:
                if name == HANDOFF_TOOL:
                    continue  # a handoff step hands off (engine.stages.handoff); nothing to call
                spec = state.agent.tool(name)
                args, missing = fill_arguments(spec, known)
                if missing:
                    offered[name] = node.action or f"the '{journey.title}' journey runs it now"
                    step_of_tool[name] = journey.id
                    continue
                calls.append((spec, args, journey.id))
        offered.update(_guideline_tools(state, resolution))
        agreed = state.confirmed
        if (
            agreed is not None
            and agreed.journey_id is None
            and agreed.tool in offered
            and MASK not in (str(v) for v in agreed.arguments.values())
        ):
            # The customer said yes to exactly this call last turn: no new planning for it. (An
            # agreement whose secret must be typed again is planned like any call, so the
            # secret is read from this turn's message; the gate checks the other values agree.)
            del offered[agreed.tool]
            calls.append((state.agent.tool(agreed.tool), dict(agreed.arguments), None))
        if offered:
            in_force = partial(_instructions_in_force, state, resolution)
            planned = await plan_calls(state, offered, known, in_force)
            calls.extend((spec, args, step_of_tool.get(spec.name)) for spec, args, _ in planned)
            asked = {c.tool for c in state.trace.tool_calls if c.status == "missing_arguments"}
            for name in set(step_of_tool) - {spec.name for spec, _, _ in planned} - asked:
                # A journey's tool step is not optional: what is missing must be asked for.
                spec = state.agent.tool(name)
                _, missing = fill_arguments(spec, known)
                state.questions.append(missing_argument_question(spec, missing))
                trace_tool(state, name, {}, "missing_arguments", ", ".join(missing))
        if not calls:
            return
        if dispatcher is None:
            state.trace.notes.append("tools were due but no tool dispatcher is configured")
            return
        if not await _dispatch(state, dispatcher, calls):
            return  # nothing cleared the gate: planning again would only ask again
        if state.interrupt is not None and state.interrupt.call_id.startswith(state.turn_id):
            return  # an interrupting tool waits for the customer; the journey stays put
        await _return_from_tool_steps(state)
        await rematch_after_tools(state)
        resolution = resolve_relationships(state)
    else:
        _ask_before_steps_left_over(state, resolution)


def _ask_before_steps_left_over(state: TurnState, resolution: Resolution) -> None:
    """The turn's tool budget ran out with a journey standing at a consequential tool step: the
    customer's next message, whatever it says, must not run it. The exact call is put to them
    now (or what it still needs is asked), and until a yes to it the step asks before it runs."""
    known = known_for_arguments(state)
    evidence = evidence_for(state)
    for journey, node in _journey_tool_steps(state, resolution):
        for name in node.tools:
            if name == HANDOFF_TOOL or not state.agent.tool(name).consequential:
                continue
            spec = state.agent.tool(name)
            state.confirm_steps[journey.id] = node.id
            args, missing = fill_arguments(spec, known)
            if missing:
                state.questions.append(missing_argument_question(spec, missing))
                trace_tool(state, name, args, "missing_arguments", ", ".join(missing))
                continue
            why = "the turn's tool budget ran out: it runs only after a yes"
            clear_call(state, spec, args, journey.id, evidence, force_confirmation=why)


def _journey_tool_steps(
    state: TurnState, resolution: Resolution
) -> list[tuple[Journey, JourneyNode]]:
    steps = []
    for jid, node_id in state.steps.items():
        if jid not in resolution.journey_ids:
            continue
        journey = state.agent.journey(jid)
        node = journey.node(node_id)
        if node.kind is NodeKind.TOOL and not set(node.tools) & state.executed_tools:
            if any(awaits_result(state, t) for t in node.tools):
                continue  # its form is out: the step completes when the result arrives
            if retry_held(state, jid, node_id):
                _hold(state, node)  # its retry was offered and not taken up: not asked again
                continue
            if not state.prerequisites_met(journey):
                _not_for_this_sender(state, journey, node)  # another sender's login let it in
                continue
            steps.append((journey, node))
    return steps


def _not_for_this_sender(state: TurnState, journey: Journey, node: JourneyNode) -> None:
    """A group's journey is shared, its prerequisites are not: a tool step never runs for a
    sender who has not completed them (traced, and the reply told, once per turn)."""
    traced = {c.tool for c in state.trace.tool_calls if c.status == "prerequisite_not_met"}
    if set(node.tools) & traced:
        return
    missing = [r for r in journey.requires if not state.completed_by_sender(r)]
    why = "not completed by this sender: " + ", ".join(missing)
    for name in node.tools:
        trace_tool(state, name, {}, "prerequisite_not_met", why)
    titles = ", ".join(state.agent.journey(r).title for r in missing)
    state.notes_for_reply.append(
        f"{journey.title} needs {titles} first, which this customer has not done: nothing was "
        "done for them. Say so; never say it is done."
    )


def _hold(state: TurnState, node: JourneyNode) -> None:
    """Trace a held step and tell the reply it has not happened (once per turn)."""
    for name in node.tools:
        if any(c.tool == name and c.status == "retry_not_taken" for c in state.trace.tool_calls):
            continue
        spec = state.agent.tool(name)
        trace_tool(
            state, name, {}, "retry_not_taken", "failed before; held until the customer asks again"
        )
        state.notes_for_reply.append(held_note(spec.description or spec.name))


def _guideline_tools(state: TurnState, resolution: Resolution) -> dict[str, str]:
    """Tools of the guidelines that apply, each with the reason it is offered."""
    offered: dict[str, str] = {}
    for gid in resolution.guideline_ids:
        g = state.agent.guideline(gid)
        for tool in g.tools:
            if (
                tool not in state.executed_tools
                and state.agent.has_tool(tool)
                and not awaits_result(state, tool)
            ):
                offered.setdefault(tool, g.action or g.condition)
    return offered


def known_for_arguments(state: TurnState) -> dict[str, Any]:
    """The values that fill arguments by name this turn: this sender's earlier tool results and
    this turn's, the context variables, the collected values (`known_values`)."""
    return known_values(
        state.collected_for(),
        state.session.variables,
        [*_earlier_tool_results(state), *state.tool_results],
    )


async def plan_calls(
    state: TurnState,
    offered: dict[str, str],
    known: dict[str, Any],
    instructions: Callable[[dict[str, str]], list[str]],
) -> list[PlannedCall]:
    """The calls due among the `offered` tools (tool → why): those whose arguments are all
    known run as they are; the others are planned by one LLM call, whose prompt also shows the
    `instructions` in force for the tools it asks about. A call still missing a required
    argument is not planned: its question is added. (The evaluation set plans through this
    too, `bench.eval.decisions`.)"""
    # A tool whose arguments are all known runs without an LLM call — unless it is
    # consequential (moving money, cancelling orders): then the model confirms it is due.
    # An identical call already made in this session is not repeated: its result is in view.
    # A value found only by its name in an earlier turn's tool result is a guess: the customer
    # may have just asked for another (a flight search "on the 12th instead" of the booking's
    # date), so such a call is planned by the model, which sees the values known.
    this_turn = known_values(state.collected_for(), state.session.variables, state.tool_results)
    ready: list[PlannedCall] = []
    to_ask = dict(offered)
    for name in offered:
        spec = state.agent.tool(name)
        args, missing = fill_arguments(spec, known)
        if missing or spec.consequential or _named_in_earlier_results(spec, args, known, this_turn):
            continue
        del to_ask[name]
        if not _already_called(state, name, args):
            ready.append((spec, args, None))
    if not to_ask:
        return ready
    specs = [state.agent.tool(n) for n in to_ask]
    prompt = build_tool_call_prompt(
        state.context(),
        specs,
        to_ask,
        known,
        instructions=instructions(to_ask),
    )
    state.llm.round += 1
    try:
        gen = await state.llm.generate(
            LLMPurpose.CALL_TOOLS, prompt, ToolCallPlan, label=",".join(offered)
        )
    except LLMError as exc:
        state.trace.notes.append(f"tool planning failed: {exc}")
        return ready
    planned = ready
    for call in gen.value.calls:
        if call.tool not in offered:
            trace_tool(
                state, call.tool, {}, "refused", "not offered by any matched guideline or step"
            )
            continue
        spec = state.agent.tool(call.tool)
        proposed = {a.name: a.value for a in call.arguments}
        filled, _ = fill_arguments(spec, known)
        args = {**filled, **{k: v for k, v in proposed.items() if v not in (None, "")}}
        _, missing = fill_arguments(spec, args)
        if missing:
            state.questions.append(missing_argument_question(spec, missing))
            trace_tool(state, spec.name, args, "missing_arguments", ", ".join(missing))
            continue
        planned.append((spec, args, None))
    return planned


async def _dispatch(
    state: TurnState, dispatcher: ToolDispatcher, planned: Sequence[PlannedCall]
) -> bool:
    """Gate and run the planned calls; whether any of them ran."""
    evidence = evidence_for(state)
    cleared: list[ClearedCall] = []
    for spec, raw_args, journey_id in planned:
        ready = clear_call(state, spec, raw_args, journey_id, evidence)
        if ready is not None:
            cleared.append(ready)
    if not cleared:
        return False
    calls: list[ToolCall] = []
    for i, c in enumerate(cleared):
        index = len(state.tool_results) + i
        calls.append(
            ToolCall(
                id=f"{state.turn_id}:{index}",
                tool=c.spec.name,
                arguments=c.arguments,
                idempotency_key=f"{state.session.id}:{state.turn_id}:{index}",
            )
        )
    context = ToolContext(
        agent_id=state.agent.id,
        session_id=state.session.id,
        customer_id=state.session.customer_id,
        turn_id=state.turn_id,
        variables=dict(state.session.variables),
        sender_id=state.sender,
        principal=state.principal,
        attachments=[
            a.model_dump(mode="json", exclude_none=True)
            for m in state.messages
            for a in m.attachments
        ],
    )
    try:
        outcomes = await dispatcher.dispatch(calls, context)
    except Exception as exc:  # a broken dispatcher must not drop the customer's message
        outcomes = [
            ToolOutcome(call_id=c.id, tool=c.tool, error=f"dispatch failed: {exc}") for c in calls
        ]
    by_id = {o.call_id: o for o in outcomes}
    for call, c in zip(calls, cleared, strict=True):
        outcome = by_id.get(call.id) or ToolOutcome(
            call_id=call.id, tool=call.tool, error="no result"
        )
        shown_arguments = state.secrets.mask_arguments(c.spec, call.arguments)
        outcome = replace(outcome, arguments=dict(shown_arguments))
        state.tool_results.append(outcome)
        state.executed_tools.add(call.tool)
        _record_step_outcome(state, c, outcome)
        state.add_event(
            EventKind.TOOL,
            EventSource.SYSTEM,
            None,
            tool=call.tool,
            call_id=call.id,
            arguments=shown_arguments,
            # by name now (a tool may return a secret field); by value when the turn ends
            llm_view=state.secrets.scrub(llm_view_of(outcome)),
            view=state.secrets.scrub(outcome.view),
            error=outcome.error,
            sender=state.sender,
            **({"lifespan": "response"} if _response_only(outcome) else {}),
            # what the call ran on that was worked out, not given: a result of it sources no
            # consequential value on its own (`engine.values.grounding`)
            **({"inferred": list(c.grounding.inferred)} if c.grounding.inferred else {}),
        )
        maybe_interrupt(state, call, outcome)
        paused = state.interrupt is not None and state.interrupt.call_id.startswith(state.turn_id)
        if outcome.view is not None and not paused:
            # What the channel renders goes out with the reply: a receipt card after a success,
            # an error tip after a failure (the latest call's view wins).
            state.reply_view = outcome.view
        trace_tool(
            state,
            call.tool,
            call.arguments,
            "interrupted" if interrupted_by(state, call) else "error" if outcome.error else "ok",
            outcome.error or "",
            outcome.duration_ms,
            sources=c.grounding.describe(),
        )
    return True


def _record_step_outcome(state: TurnState, call: ClearedCall, outcome: ToolOutcome) -> None:
    """A tool step is performed only when its tool succeeded; a failure is a fact the reply
    must state. A successful result may establish who the sender is (`control.principal`)."""
    node_id = state.steps.get(call.journey_id) if call.journey_id else None
    if outcome.error is not None:
        step = (
            state.agent.journey(call.journey_id).node(node_id)
            if call.journey_id and node_id
            else None
        )
        # A declared failure transition says what comes next; otherwise a retry is offered and
        # the step remembers it failed (retrying a consequential one asks first).
        declared = step is not None and step.on_failure is not None
        next_move = "" if declared else ", and offer to try again"
        state.notes_for_reply.append(
            f"tool {call.spec.name} failed: {outcome.error}. This did NOT happen: say so "
            f"plainly, never say it is done{next_move}."
        )
        if call.journey_id and node_id and not declared:
            state.failed_steps[call.journey_id] = node_id
        return
    state.succeeded_tools.add(call.spec.name)
    if call.journey_id and state.confirm_steps.get(call.journey_id) == node_id:
        del state.confirm_steps[call.journey_id]
    if call.journey_id and node_id:
        if (call.journey_id, node_id) not in state.performed_tool_steps:
            state.performed_tool_steps.append((call.journey_id, node_id))
        if state.failed_steps.get(call.journey_id) == node_id:
            del state.failed_steps[call.journey_id]
    if "principal" in outcome.control:
        principal = outcome.control["principal"]
        if isinstance(principal, Mapping) and principal:
            state.principals[state.sender] = {str(k): v for k, v in principal.items()}
        elif principal is None:
            state.principals.pop(state.sender, None)  # a logout


def _response_only(outcome: ToolOutcome) -> bool:
    return str(outcome.control.get("lifespan", "session")) in RESPONSE_ONLY


def _take_failure_transition(state: TurnState, journey: Journey, node: JourneyNode) -> None:
    path = state.paths[journey.id]
    reason = (f"{node.id}: its tool failed",)
    if node.on_failure == END_OF_JOURNEY:
        step = VerifiedStep((*path, None), None, "exit", reason)
    else:
        target = node.on_failure or ""
        step = VerifiedStep((*path, target), target, "advance", reason)
    state.failed_steps.pop(journey.id, None)
    apply_verified(state, journey.id, step, "on_failure")


def _named_in_earlier_results(
    spec: ToolSpec, args: dict[str, Any], known: dict[str, Any], this_turn: dict[str, Any]
) -> bool:
    """Whether an argument was filled only because an earlier turn's tool result has a field of
    its name (not the parameter's declared `source`, a collected value, a context variable or
    this turn's results)."""
    for p in spec.parameters:
        if p.name not in args:
            continue
        if p.source and known.get(p.source) not in (None, ""):
            continue  # the author named where this value comes from
        if this_turn.get(p.name) != args[p.name]:
            return True
    return False


def _earlier_tool_results(state: TurnState) -> list[ToolOutcome]:
    """Successful tool results of earlier turns, as the LLM saw them: a value looked up
    before (an account id) can fill an argument now without asking again."""
    return [
        ToolOutcome(
            call_id=e.data.get("call_id", ""),
            tool=e.data.get("tool", ""),
            data=e.data["llm_view"],
            arguments=dict(e.data.get("arguments") or {}),
        )
        for e in state.own_earlier_results()
        if e.data.get("llm_view") is not None
    ]


def _already_called(state: TurnState, tool: str, args: dict[str, Any]) -> bool:
    """Whether this session already has a successful call of `tool` with these arguments."""
    spec = state.agent.tool(tool) if state.agent.has_tool(tool) else None
    wanted = state.secrets.mask_arguments(spec, args)
    return any(
        e.kind is EventKind.TOOL
        and e.data.get("tool") == tool
        and not e.data.get("error")
        and e.data.get("arguments") == wanted
        and state.is_own(e)
        for e in (*state.earlier_events(), *state.events)
    )


async def _return_from_tool_steps(state: TurnState) -> None:
    """Re-select journey steps after tool results: deterministic auto-return where possible."""
    for jid in list(state.steps):
        journey = state.agent.journey(jid)
        node = journey.node(state.steps[jid])
        if node.kind is not NodeKind.TOOL or not set(node.tools) & state.executed_tools:
            continue
        if not set(node.tools) & state.succeeded_tools:
            # The step's tool failed: the author's failure transition, else stay at the step.
            if node.on_failure is not None:
                _take_failure_transition(state, journey, node)
            continue
        step = auto_return(journey, state.views[jid], state.paths[jid], state.succeeded_tools)
        if step is not None:
            apply_verified(state, jid, step, "auto_return")
        else:
            state.llm.round += 1
            result = await select_step(state, state.context(), journey)
            apply_step(state, jid, result)
    await resume_suspended(state)


async def rematch_after_tools(state: TurnState) -> None:
    """Guidelines that opt in (`metadata.reevaluate_after_tools`) are matched again with this
    turn's tool results in view — "the balance is negative → warn the customer". Opt-in keeps
    the common turn at one matching round."""
    pending = [
        g
        for g in state.candidates
        if g.metadata.get("reevaluate_after_tools") and g.id not in state.matches
    ]
    if pending:
        state.llm.round += 1
        absorb_matches(state, await match_guidelines(state, state.context(), pending))


def _instructions_in_force(
    state: TurnState, resolution: Resolution, offered: Mapping[str, str]
) -> list[str]:
    """The guidelines in force this turn other than the ones offering these tools, as
    "when …, then …" lines: a rule like "amounts in euros are doubled" shapes an argument."""
    reasons = set(offered.values())
    lines = []
    for gid in sorted(resolution.guideline_ids):
        g = state.agent.guideline(gid)
        if not g.action or g.action in reasons or g.metadata.get("transient"):
            continue
        lines.append(f"when {g.condition}, then {g.action}")
    return lines
