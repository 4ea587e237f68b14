"""Interrupting tools: a selector's options or an interrupter's action pause a journey step until
the customer answers; the answer resumes it without running the tool again.

Writes `state.interrupt`, the reply's options and view, and (on resumption) the pick as a
collected value and a tool result.
"""

from __future__ import annotations

from typing import Any

from engine.matching.journey_forced_moves import auto_return
from engine.model import ToolKind
from engine.ports import ToolCall, ToolOutcome
from engine.session import CollectedValue, PendingInterrupt
from engine.stages.journey_progress import apply_verified
from engine.stages.state import TurnState
from engine.tool_calls import resolve_pick, selector_options


def interrupted_by(state: TurnState, call: ToolCall) -> bool:
    return state.interrupt is not None and state.interrupt.call_id == call.id


def maybe_interrupt(state: TurnState, call: ToolCall, outcome: ToolOutcome) -> None:
    """A selector or interrupter tool that succeeded pauses the journey until the customer
    answers: its options (or action) go out with the reply."""
    spec = state.agent.tool(call.tool)
    if spec.kind is ToolKind.GENERAL or outcome.error:
        return
    location = next(
        (
            (j, n)
            for j, n in state.steps.items()
            if call.tool in state.agent.journey(j).node(n).tools
        ),
        (None, None),
    )
    options = selector_options(outcome) if spec.kind is ToolKind.SELECTOR else []
    if spec.kind is ToolKind.SELECTOR and not options:
        return  # nothing to choose from: the LLM sees the (empty) data and explains
    state.interrupt = PendingInterrupt(
        tool=call.tool,
        call_id=call.id,
        kind=spec.kind.value,
        options=tuple(options),
        journey_id=location[0],
        node_id=location[1],
        prompt=str(outcome.control.get("prompt") or ""),
    )
    state.reply_options = options
    state.reply_view = outcome.view
    if spec.kind is ToolKind.SELECTOR:
        labels = "; ".join(str(o["label"]) for o in options)
        state.questions.append(f"Ask the customer to pick one of these options: {labels}")
    else:
        state.questions.append(
            str(outcome.control.get("prompt") or "Ask the customer to complete the step shown")
        )


def resume_interrupt(state: TurnState) -> None:
    """The customer answered an interrupt: a selector's pick (button, list reply, number or
    text) or an interrupter's completion. The pick is stored like a collected value and the
    journey moves on from the tool step without running the tool again."""
    pending = state.interrupt
    assert pending is not None
    message = state.messages[-1]
    picked: Any = None
    if pending.kind == ToolKind.SELECTOR.value:
        picked = resolve_pick(pending.options, message.choice, message.text)
        if picked is None:
            labels = "; ".join(str(o["label"]) for o in pending.options)
            state.questions.append(f"The customer still has to pick one of: {labels}")
            return
    else:
        picked = message.metadata.get("resume") or message.choice or message.text
    name = f"{pending.tool}_selection"
    if pending.journey_id:
        state.collected.append(
            CollectedValue(
                journey_id=pending.journey_id,
                node_id=pending.node_id or "",
                name=name,
                value=picked,
                turn_id=state.turn_id,
            )
        )
    state.tool_results.append(
        ToolOutcome(call_id=pending.call_id, tool=pending.tool, data={"selected": picked})
    )
    state.executed_tools.add(pending.tool)
    state.succeeded_tools.add(pending.tool)
    state.trace.notes.append(f"interrupt of {pending.tool} resumed with {picked!r}")
    state.interrupt = None
    if pending.journey_id and pending.node_id and pending.journey_id in state.active():
        state.steps[pending.journey_id] = pending.node_id
        journey = state.agent.journey(pending.journey_id)
        step = auto_return(
            journey, state.views[journey.id], state.paths[journey.id], state.succeeded_tools
        )
        if step is not None:
            apply_verified(state, journey.id, step, "auto_return")
