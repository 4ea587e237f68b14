"""The node-selection prompt: the journey map shown to the model and the rules it answers by.

Pure functions of their inputs, so the text is snapshot-tested (tests/snapshots/). The map shows
the journey as numbered steps with flags and transitions, pruned around the current run
(`engine.matching.journey_graph.prune_nodes`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from engine.context import TurnContext, render_agent_context, render_turn_context
from engine.matching.collected_values import bound_text
from engine.matching.journey_graph import (
    EdgeView,
    NodeView,
    current_run,
    current_step,
    exited_run,
    latest_entries,
    prune_nodes,
)
from engine.model import CollectedField, Journey, NodeKind
from engine.prompt_text import Prompt, stable_then_turn

# --------------------------------------------------------------------------------------------------
# The journey map shown to the model

# What a tool step's flag says (the offline model's map parser keys on "ran this turn").
TOOL_RAN = "ran this turn on the current values (see the tool results): complete"
TOOL_NOT_RUN = (
    "not run this turn: a walk stops here (an earlier turn's result does not complete it)"
)


def transition_map_text(
    journey: Journey,
    views: dict[str, NodeView],
    path: Sequence[str | None],
    *,
    collected: Mapping[str, Any] | None = None,
    max_depth: int = 5,
    condition_texts: Sequence[str] = (),
    executed_tools: Collection[str] = (),
) -> str:
    """The journey as numbered steps with flags and transitions, pruned around the current run.

    `condition_texts` replaces the journey's own activation conditions when given (e.g. only the
    ones that matched); `collected` shows known values next to the steps that collect them."""
    shown = prune_nodes(journey, views, path, max_depth)
    here = current_step(path, views)
    visited = {n for n in current_run(path) if n in views} if here else set()
    left = exited_run(path, views)
    left_at = left[-1] if here is None and left else None
    if left_at is not None and left_at not in shown:
        shown = {nid: v for nid, v in views.items() if nid in shown or nid == left_at}
    root = views.get(journey.root_id)
    # an action-less root with one way out is just a door: show the step behind it instead
    door = root if root and root.transit and len(root.exits) == 1 else None
    begin: str | None = None
    if here is None and root is not None:
        begin = door.exits[0] if door else root.id
    if begin is not None and begin not in shown:
        shown = {nid: v for nid, v in views.items() if nid in shown or nid == begin}

    lines = [f"Journey: {journey.title}"]
    conditions = condition_texts or journey.conditions
    if conditions:
        lines.append("Activated when: " + " OR ".join(f'"{c}"' for c in conditions))
    if journey.description:
        lines.append(f"Description: {journey.description}")
    lines.append("")
    lines.append("Steps:")
    for view in shown.values():
        if door is not None and view.id == door.id:
            continue
        lines.extend(
            _step_lines(
                view,
                views,
                shown,
                door=door,
                begin=view.id == begin,
                current=view.id == here,
                visited=view.id in visited,
                left_here=view.id == left_at,
                collected=collected or {},
                executed_tools=executed_tools,
            )
        )
    return "\n".join(lines)


def _step_lines(
    view: NodeView,
    views: dict[str, NodeView],
    shown: dict[str, NodeView],
    *,
    door: NodeView | None,
    begin: bool,
    current: bool,
    visited: bool,
    left_here: bool,
    collected: Mapping[str, Any],
    executed_tools: Collection[str],
) -> list[str]:
    lines = [f"STEP {view.index}: {_step_title(view)}"]
    flags: list[str] = []
    if begin:
        flags.append(
            "BEGIN HERE — the journey has not started; "
            + ("choose its first step below" if view.transit else "it starts at this step")
        )
    if current:
        flags.append("CURRENT STEP (last executed) — first decide whether it is complete")
    elif visited and not view.transit:
        flags.append("VISITED — done earlier in this run; a valid backtracking target")
    if left_here:
        flags.append(
            "LEFT HERE — an earlier run was exited at this step; resume here if the customer "
            "wants to carry on"
        )
    if view.customer_dependent:
        wanted = view.customer_action or "answered what this step asks"
        flags.append(f"CUSTOMER DEPENDENT — complete only once the customer has: {wanted}")
    if view.kind is NodeKind.TOOL:
        # One rule, said the same way here and in "How to decide" q2: a tool step is complete
        # only through a result of this turn (the engine ran it on the current values); an
        # earlier turn's result never completes it.
        tools = ", ".join(view.tools)
        if view.tools and view.tools_ran(executed_tools):
            flags.append(f"TOOL STEP ({tools}) — {TOOL_RAN}")
        else:
            flags.append(f"TOOL STEP ({tools}) — {TOOL_NOT_RUN}")
    if view.transit:
        flags.append("FORK — never the final step; continue along one of its transitions")
    elif _says_something(view) and not current:
        flags.append("SAYS SOMETHING NEW — you must tell the customer this: a walk stops here")
    lines.extend(f"  - {flag}" for flag in flags)
    lines.extend(f"  - {_field_text(fld, collected)}" for fld in view.collects)
    lines.extend(_transition_lines(view, views, shown, door))
    return lines


def _says_something(view: NodeView) -> bool:
    """A chat step that tells the customer something and waits for nothing: the reply that
    performs it is the turn's reply, so a multi-step walk cannot pass it unsaid."""
    return (
        view.kind is NodeKind.CHAT
        and bool(view.action)
        and not view.customer_dependent
        and not view.collects
    )


def _step_title(view: NodeView) -> str:
    if view.transit:
        return "(no action: chooses between the transitions below)"
    if view.kind is NodeKind.TOOL:
        return view.action or f"Run {', '.join(view.tools)}"
    return view.action or ""


def _transition_lines(
    view: NodeView, views: dict[str, NodeView], shown: dict[str, NodeView], door: NodeView | None
) -> list[str]:
    if not view.outgoing:
        return ["  ↳ once this step is done → END JOURNEY"]
    lines = []
    for edge in view.outgoing:
        if edge.condition:
            when = f'if "{edge.condition}"'
        else:
            when = "always" if view.transit else "once this step is done"
        lines.append(f"  ↳ {when} → {_destination(edge, views, shown, door)}")
    return lines


def _destination(
    edge: EdgeView, views: dict[str, NodeView], shown: dict[str, NodeView], door: NodeView | None
) -> str:
    if edge.target is None:
        return "END JOURNEY"
    target = views[edge.target]
    suffix = ""
    if door is not None and target.id == door.id and door.exits[0] is not None:
        target = views[door.exits[0]]  # a loop back to the start lands on the first real step
        suffix = " (back to the start)"
    if target.id not in shown:
        suffix += " (not shown: more steps follow)"
    return f"step {target.index}{suffix}"


_TYPE_TEXT = {
    "str": "text",
    "int": "whole number",
    "decimal": "number",
    "bool": "yes/no",
    "date": "date YYYY-MM-DD",
    "time": "time HH:MM",
    "datetime": "date and time YYYY-MM-DDTHH:MM",
    "money": "amount of money",
}


def _field_text(fld: CollectedField, collected: Mapping[str, Any]) -> str:
    kind = f"one of: {', '.join(fld.choices)}" if fld.type == "enum" else _TYPE_TEXT[fld.type]
    bounds = [
        f"{sign} {bound_text(value)}"
        for sign, value in ((">", fld.gt), ("≥", fld.ge), ("≤", fld.le))
        if value is not None
    ]
    details = [kind + "".join(f" {b}" for b in bounds)]
    if fld.currency:
        details.append(f"in {fld.currency} unless the customer names another currency")
    if fld.pattern:
        details.append(f"shaped /{fld.pattern}/")
    if fld.description:
        details.append(fld.description)
    if not fld.required:
        details.append("optional")
    known = (
        f"known = {_value_text(collected[fld.name])}" if fld.name in collected else "not given yet"
    )
    return f'collects "{fld.name}" ({", ".join(details)}): {known}'


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# --------------------------------------------------------------------------------------------------
# The prompt


# The model is the agent whose journey this is, as in the matching prompt: steps are written to
# the agent ("Ask how much to send"), and a condition's "you" means it.
_INTRO = (
    "You are the customer-service agent described below, following a journey with the "
    'customer: a step-by-step process whose steps and conditions speak to you ("you" and '
    '"the agent" both mean you). Given the latest customer message, say whether the journey '
    "still applies and which single step you perform in your next reply."
)

_RULES = """\
Answer these questions in order.
1. Does the journey still apply? Its activation condition only starts it: once running, it goes on \
through steps that look unrelated to that condition. It stops only when the customer asks to stop \
or refuses to go on, or switches to a purpose that replaces it: then answer journey_applies=false \
and nothing else matters. A side question does not stop it.
2. Is the current step complete? A CUSTOMER DEPENDENT step is complete once the customer gave what \
it asks for, whenever they gave it: before being asked, out of order, or several answers in one \
message. Your asking is not enough. A TOOL STEP is complete only when its tools ran this turn (its \
flag says so), on the current values; a result from an earlier turn never completes it. Any other \
step is complete once you have done it.
3. Going back. If the customer changed an answer given at a VISITED step, set \
requires_backtracking=true and backtracking_target_step to that step, record the new value, and \
walk on as in 4: pass again the steps whose answers still stand, and stop at the first TOOL STEP \
on the way (its earlier result was for the old answer). If they start the same journey over for a \
new purpose (another item, a second transfer), go back to its first step instead. A LEFT HERE step \
can be resumed the same way. Only VISITED or LEFT HERE steps can be targets.
4. step_advancement lists the steps the journey moves through this turn: from the current step (or \
the backtracking target, or BEGIN HERE), along the map's transitions only. Fast-forward through \
every step the customer already satisfied (a known value of this run satisfies the step that \
collects it). Stop at the first step that is a TOOL STEP not run this turn, lacks information the \
customer has not given, or is marked SAYS SOMETHING NEW. Never stop on a FORK. When a transition's \
condition has several parts and none is fully met, take the one with the most parts met.
5. next_step is where the walk stops: the step you perform now (the current step again if it is \
not complete). Answer "NONE" only when the last step is complete and its END JOURNEY transition \
applies.
6. collected lists the values the customer stated for fields of the steps you stayed on or passed, \
as {"name": ..., "value": ...}: numbers as digits, dates as YYYY-MM-DD, choices as one of the \
listed options. Also list values this message already gives for fields of later steps ("send $250 \
to 7770001" answers the amount too); those steps will not be asked. Never guess a value the \
customer did not state. If the customer corrected a value ("actually, make it 300"), give the new \
one. Leave out known values that did not change.
Examples:
- Steps "ask the destination" → "ask the dates" → "search flights (tool)"; the first message is "a \
flight to Rome on 3 May": walk through both asking steps and stop at the tool step.
- At "confirm", the customer says "wait, make it the 4th": back to "ask the dates", collect it, \
pass it and stop at "search flights (tool)", which runs again for the new date.
- Mid-way, "is there a baggage fee?": the journey still applies; stay on the step."""

_ANSWER = (
    "Reply with one JSON object:\n"
    '{{"rationale": "{rationale}", "journey_applies": true, "requires_backtracking": false, '
    '"backtracking_target_step": null, "step_advancement": ["<step>", "..."], '
    '"next_step": "<step> or NONE", "collected": [{{"name": "<field>", "value": "<value>"}}]}}'
)
# As long as the walk needs: a stay is a few words, a walk over several steps or a backtrack
# names the evidence for each move (a fixed 12-word cap could not hold a backtrack and its
# fast-forward, so the model dropped the reasoning exactly where it decides most).
_RATIONALE_COMPACT = (
    "<whether the current step is complete and why; on a walk over several steps or a "
    "backtrack, the evidence for each move — as long as that needs>"
)
_RATIONALE_EXPLAIN = "<which step is complete, and why each transition you took applies>"


def _position_text(
    views: dict[str, NodeView], path: Sequence[str | None], executed_tools: Collection[str]
) -> str:
    here = current_step(path, views)
    left = exited_run(path, views)
    if here is None and left:
        return (
            f"The journey is not running: an earlier run was exited at {views[left[-1]].label} "
            "(LEFT HERE). If the customer now wants to carry on with it, resume: set "
            f"requires_backtracking=true and backtracking_target_step={views[left[-1]].index}, "
            "then walk on from there. If they start it afresh (a new purpose, another item), "
            "begin at BEGIN HERE. The known values below are that run's: they carry over only "
            "if it is resumed."
        )
    if here is None:
        return (
            "The journey has not started in this run: choose its first step, starting at "
            "BEGIN HERE. There is nothing to backtrack to."
        )
    run = [
        views[n].label
        for n in latest_entries(current_run(path))
        if n in views and not views[n].transit
    ]
    text = (
        f"Current step: {views[here].label} (executed last). Visited in this run: {', '.join(run)}."
    )
    view = views[here]
    if view.kind is NodeKind.TOOL:
        if view.tools_ran(executed_tools):
            text += " Its tools ran this turn on the current values (see the tool results)."
        else:
            text += " Its tools have not run this turn, so the journey cannot leave it."
    return text


def build_node_selection_prompt(
    ctx: TurnContext,
    journey: Journey,
    views: dict[str, NodeView],
    path: Sequence[str | None],
    *,
    collected: Mapping[str, Any],
    max_depth: int,
    explain: bool,
) -> Prompt:
    """The node-selection prompt for one journey. Pure: same inputs, same text. The stable part
    first (the role, the agent, the rules), then the map and where the journey stands, then the
    turn's context, then the answer shape."""
    # what the walk's verification counts too (`state.succeeded_tools`): a failed call is no run
    executed = {r.tool for r in ctx.tool_results if r.error is None}
    journey_map = transition_map_text(
        journey, views, path, collected=collected, max_depth=max_depth, executed_tools=executed
    )
    answer = _ANSWER.format(rationale=_RATIONALE_EXPLAIN if explain else _RATIONALE_COMPACT)
    # Stable: the role, the agent, the rules. The map is pruned around where the journey stands.
    return stable_then_turn(
        [_INTRO, f"## The agent\n{render_agent_context(ctx)}", f"## How to decide\n{_RULES}"],
        [
            f"## Journey map\n{journey_map}",
            f"## Where the journey stands\n{_position_text(views, path, executed)}",
            f"## Context\n{render_turn_context(ctx)}",
            f"## Answer\n{answer}",
        ],
    )
