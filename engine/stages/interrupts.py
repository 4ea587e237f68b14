"""Interrupting tools: a selector's options or an interrupter's action pause a journey step until
the customer answers; the answer resumes it without running the tool again.

- A selector's step completes when the customer picks one of its options (button, list reply,
  number or label, or one option named among other words: "a large with ham"). When the step is
  reached and the customer already named exactly one option — in this turn's messages, or in
  the request a prerequisite delayed — that is the pick and the options are not shown
  (`engine.tools.calls.named_option`; two options named, or none, show them). The pick is stored as a collected value named by the tool's `pick_name`
  (`fills`, else the tool's name without a `choose_`/`pick_`/`select_` prefix), so later tools get
  it by that name, and it counts as grounded evidence ("customer pick from choose_size").
- An interrupter's step (a form, a link) completes only when its result arrives: a message whose
  metadata carries `resume` (the result) and the pending `call_id` — delivered by the management
  API's `POST /sessions/{id}/interrupts/{call_id}`. Whatever the customer types meanwhile is
  answered by a normal turn; the step keeps waiting and its tool is not run again. The result's
  fields become collected values and evidence ("form result of address_form").

Writes `state.interrupt`, the reply's options and view, and (on resumption) the values, a tool
result and the journey's move past the step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.matching.journey_forced_moves import auto_return
from engine.matching.journey_graph import current_run
from engine.matching.journeys import messages_this_turn, said_ahead_messages
from engine.ports import ToolCall, ToolOutcome
from engine.sessions.history import upsert_collected
from engine.sessions.session import CollectedValue, PendingInterrupt
from engine.stages.journey_progress import apply_verified
from engine.stages.state import TurnState
from engine.tools.calls import named_option, resolve_pick, selector_options
from engine.tools.spec import ToolKind


def pick_origin(tool: str) -> str:
    return f"customer pick from {tool}"


def form_origin(tool: str) -> str:
    return f"form result of {tool}"


def interrupted_by(state: TurnState, call: ToolCall) -> bool:
    return state.interrupt is not None and state.interrupt.call_id == call.id


def awaits_result(state: TurnState, tool: str) -> bool:
    """Whether an interrupter of `tool` is waiting for its result: it must not run again (a new
    call would orphan the form the customer is filling in)."""
    pending = state.interrupt
    return (
        pending is not None
        and pending.kind == ToolKind.INTERRUPTER.value
        and pending.tool == tool
        and not pending.call_id.startswith(state.turn_id)
    )


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
    journey_id, node_id = location
    selector = spec.kind is ToolKind.SELECTOR
    if (
        selector
        and journey_id
        and node_id
        and _picked_ahead(state, call, journey_id, node_id, options)
    ):
        return  # the customer named one already: the step is done, no options are shown
    state.interrupt = PendingInterrupt(
        tool=call.tool,
        call_id=call.id,
        kind=spec.kind.value,
        options=tuple(options),
        journey_id=location[0],
        node_id=location[1],
        prompt=str(outcome.control.get("prompt") or ""),
        sender=state.sender,
        reply_to=state.reply_address,
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


def _picked_ahead(
    state: TurnState,
    call: ToolCall,
    journey_id: str,
    node_id: str,
    options: list[dict[str, Any]],
) -> bool:
    """A selector step the journey just reached takes the one option the customer named in the
    words a value ahead may come from ("I want to order a large pizza" — this turn's messages,
    or the request a prerequisite delayed) as its pick, as the answer to the shown options would
    be. Only the customer's words count (`named_option`), never the model's."""
    ctx = state.context()
    run = current_run(state.paths.get(journey_id, ()))
    # The request's words answer the step once: a loop back to it reads this turn's words only.
    # Only the words of the sender this turn answers: in a session of several senders another's
    # "large" is theirs, as their "2" is no pick of options shown to someone else.
    sender = state.sender
    words = (
        said_ahead_messages(ctx, journey_id, sender=sender)
        if run.count(node_id) <= 1
        else messages_this_turn(ctx, sender=sender)
    )
    option = named_option(options, [m.text for m in words])
    if option is None:
        return False
    name = state.agent.tool(call.tool).pick_name
    _store_values(state, journey_id, node_id, {name: pick_value(option["value"])}, call.tool)
    state.tool_results.append(
        ToolOutcome(call_id=call.id, tool=call.tool, data={"selected": option["value"]})
    )
    state.trace.notes.append(
        f"{call.tool}: the customer named {str(option['label'])!r} already; "
        "taken as the pick, the options are not shown"
    )
    return True


def resume_interrupt(state: TurnState) -> None:
    """This turn's messages answer the pending interrupt, or leave it waiting."""
    pending = state.interrupt
    assert pending is not None
    if pending.kind == ToolKind.SELECTOR.value:
        _resume_selector(state, pending)
    else:
        _resume_interrupter(state, pending)


def pick_value(picked: Any) -> Any:
    """What a pick fills: a plain option as is; an item's `value`, else its `id`."""
    if isinstance(picked, Mapping):
        return picked.get("value", picked.get("id"))
    return picked


def _resume_selector(state: TurnState, pending: PendingInterrupt) -> None:
    message = state.messages[-1]
    if pending.sender and state.sender != pending.sender:
        # Only the person who was shown the options picks; another sender's "2" is their own.
        state.trace.notes.append(f"{pending.tool}: a message from another sender is not a pick")
        return
    picked = resolve_pick(pending.options, message.choice, message.text)
    if picked is None and message.choice is None:
        # Other words around one option's name ("a large with ham") still pick it.
        named = named_option(pending.options, [message.text or ""])
        picked = named["value"] if named is not None else None
    if picked is None:
        labels = "; ".join(str(o["label"]) for o in pending.options)
        state.questions.append(f"The customer still has to pick one of: {labels}")
        return
    name = _pick_name(state, pending)
    picks = {name: pick_value(picked)}
    _complete(state, pending, picks, pick_origin(pending.tool), picked, sender=state.sender)


def _resume_interrupter(state: TurnState, pending: PendingInterrupt) -> None:
    results = [m for m in state.messages if "resume" in m.metadata]
    ours = [m for m in results if m.metadata.get("call_id") == pending.call_id]
    for m in results:
        if m not in ours:
            state.trace.notes.append(
                f"ignored a result for {str(m.metadata.get('call_id'))[:100]!r}: "
                f"the pending interrupt is {pending.call_id}"
            )
    if not ours:
        # Free text while the form is open: answered, but the step is not done.
        waiting_for = pending.prompt or "the step shown to them"
        state.questions.append(
            f"The customer has not completed this yet (still waiting for: {waiting_for}). "
            "Answer what they wrote and remind them that it is still to be completed; never "
            "say it is done."
        )
        return
    delivered = ours[-1]
    result = delivered.metadata["resume"]
    if isinstance(result, Mapping):
        values = {str(k): v for k, v in result.items() if not isinstance(v, Mapping | list | tuple)}
    else:
        values = {_pick_name(state, pending): result}
    # The values are the sender's the result was delivered for (the one who was asked), not
    # the turn's last writer: in a group, another person's message may follow it in the turn.
    sender = delivered.sender_id or state.session.customer_id
    _complete(state, pending, values, form_origin(pending.tool), result, sender=sender)


def _pick_name(state: TurnState, pending: PendingInterrupt) -> str:
    tool = pending.tool
    return state.agent.tool(tool).pick_name if state.agent.has_tool(tool) else tool


def _complete(
    state: TurnState,
    pending: PendingInterrupt,
    values: Mapping[str, Any],
    origin: str,
    selected: Any,
    *,
    sender: str,
) -> None:
    """The interrupt is answered: its values are stored (and are evidence for `sender`'s calls
    only), the tool step is performed, and the journey moves on from it without running the
    tool again (a journey it completes counts as `sender`'s)."""
    journey_id, node_id = pending.journey_id or "", pending.node_id or ""
    _store_values(state, journey_id, node_id, values, origin=origin, sender=sender)
    state.tool_results.append(
        ToolOutcome(call_id=pending.call_id, tool=pending.tool, data={"selected": selected})
    )
    state.executed_tools.add(pending.tool)
    state.succeeded_tools.add(pending.tool)
    shown = state.secrets.mask_named(dict(values))
    state.trace.notes.append(f"interrupt of {pending.tool} resumed ({origin}): {shown}")
    state.interrupt = None
    if pending.journey_id and pending.node_id and pending.journey_id in state.active():
        location = (pending.journey_id, pending.node_id)
        if location not in state.performed_tool_steps:
            state.performed_tool_steps.append(location)
        state.steps[pending.journey_id] = pending.node_id
        journey = state.agent.journey(pending.journey_id)
        step = auto_return(
            journey, state.views[journey.id], state.paths[journey.id], state.succeeded_tools
        )
        if step is not None:
            apply_verified(state, journey.id, step, "auto_return", by=sender)


def _store_values(
    state: TurnState,
    journey_id: str,
    node_id: str,
    values: Mapping[str, Any],
    tool: str = "",
    *,
    origin: str = "",
    sender: str | None = None,
) -> None:
    """Store a pick's or a form's values with their origin (evidence for the tool arguments of
    `sender`, by default this turn's). A field declared secret stays a secret though it came by
    a form: masked wherever it would be stored or quoted (`engine.stages.secret_masking`), its
    clear value for this turn only."""
    for name, value in values.items():
        secret = state.secrets.is_secret(name)
        if secret:
            state.secrets.remember(value)
        upsert_collected(
            state.collected,
            CollectedValue(
                journey_id=journey_id,
                node_id=node_id,
                name=name,
                value=value,
                turn_id=state.turn_id,
                origin=origin or pick_origin(tool),
                sender=sender or state.sender,
                secret=secret,
                bound=True,  # the customer's own act: a pick, a form
                evidence=origin or pick_origin(tool),
            ),
        )
        if journey_id:
            masked = state.secrets.mask_named({name: value})[name]
            state.trace.collected[f"{journey_id}.{name}"] = masked


def release_stale_interrupt(state: TurnState) -> None:
    """A journey that left its interrupted step (exited, went back) no longer waits for it: a
    pick or form result arriving later must not pull it back there."""
    pending = state.interrupt
    if pending is None or not pending.journey_id:
        return
    path = state.paths.get(pending.journey_id, ())
    if not path or path[-1] != pending.node_id:
        state.trace.notes.append(
            f"the journey left step {pending.node_id!r}: the interrupt of {pending.tool} is dropped"
        )
        state.interrupt = None
