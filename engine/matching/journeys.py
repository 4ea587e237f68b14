"""Journey node selection: where each active journey stands after this customer message.

One LLM call per active journey per turn at most, and none when the graph leaves no choice
(`auto_return`). The same call decides whether the journey still applies, whether it must go
back to an earlier step, how far it advances, and which values the customer gave — there is no
separate backtracking check. The answer is only a proposal: `verify_advancement` repairs it
against the graph (see `engine.matching.journey_graph`) and `coerce_collected` types and
validates the values, so no rule that can be checked in code depends on the model obeying it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.context import TurnContext, render_context
from engine.llm import TurnLLM
from engine.matching.journey_graph import (
    EdgeView,
    NodeView,
    Outcome,
    ProposedWalk,
    VerifiedStep,
    auto_return,
    build_node_views,
    current_run,
    current_step,
    entry_step,
    exit_step,
    index_map,
    prune_nodes,
    verify_walk,
)
from engine.model import CollectedField, Journey, LLMPurpose, NodeKind

__all__ = [
    "CollectedItem",
    "EdgeView",
    "JourneyNodeSelection",
    "JourneyStepResult",
    "NodeView",
    "Outcome",
    "VerifiedStep",
    "auto_return",
    "build_node_selection_prompt",
    "build_node_views",
    "coerce_collected",
    "entry_step",
    "prune_nodes",
    "select_journey_step",
    "transition_map_text",
    "verify_advancement",
]


# --------------------------------------------------------------------------------------------------
# Schema (what the LLM must answer)


class CollectedItem(BaseModel):
    """A value the customer gave for a field a step collects, in the customer's terms."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    name: str
    value: str

    @field_validator("value", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # models often answer `true` or `300` for a string field; the text is what we validate
        if isinstance(value, bool):
            return "true" if value else "false"
        return value


class JourneyNodeSelection(BaseModel):
    """The model's proposal for one journey. Step references are display numbers ("3")."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    rationale: str = Field(default="", description="a few words; longer only in explain mode")
    journey_applies: bool = Field(default=True, description="false when the customer dropped it")
    requires_backtracking: bool = False
    backtracking_target_step: str | None = Field(default=None, description="a visited step")
    step_advancement: list[str] = Field(
        default_factory=list, description="steps walked this turn, e.g. ['2', '3']"
    )
    next_step: str | None = Field(description='the step to perform now, or "NONE" at the end')
    collected: list[CollectedItem] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# Verification of an answer


class _End:
    """Marker for "the journey ends here" in the model's step references."""


_END = _End()
_END_WORDS = frozenset({"none", "null", "end", "end journey", "end_journey", "journey end"})
_STEP_REF = re.compile(r"(?:step)?\s*#?\s*(\d+)")


def _resolve_step(
    token: str, views: dict[str, NodeView], by_index: dict[str, str]
) -> str | _End | None:
    """A display number (tolerating "STEP 3" or "#3") → node id; an end word → `_END`; anything
    else → None. Display numbers win over raw node ids: they are what the model was shown."""
    text = token.strip().strip("\"'").strip()
    lowered = text.lower()
    if lowered in _END_WORDS:
        return _END
    ref = _STEP_REF.fullmatch(lowered)
    if ref and str(int(ref.group(1))) in by_index:
        return by_index[str(int(ref.group(1)))]
    return text if text in views else None


def verify_advancement(
    journey: Journey,
    views: dict[str, NodeView],
    previous_path: Sequence[str | None],
    selection: JourneyNodeSelection,
    executed_tools: Collection[str],
) -> VerifiedStep:
    """The one legal step for this turn, whatever the model answered.

    Translates display numbers, drops references to unknown steps, reads "NONE"/null as "the
    journey is over", and hands the walk to `verify_walk`, which enforces the graph rules. A step
    whose value failed validation this turn is not passed: the agent has to ask again.
    """
    if not selection.journey_applies:
        return exit_step(previous_path)
    by_index = index_map(views)
    notes: list[str] = []
    steps: list[str] = []
    finish = False
    for token in selection.step_advancement:
        resolved = _resolve_step(token, views, by_index)
        if finish:
            notes.append(f"ignored step {token!r} listed after the end of the journey")
        elif resolved is _END:
            finish = True
        elif resolved is None:
            notes.append(f"dropped unknown step {token!r}")
        else:
            steps.append(str(resolved))

    resolved_next = (
        _END if selection.next_step is None else _resolve_step(selection.next_step, views, by_index)
    )
    if resolved_next is _END:
        finish = True
    elif resolved_next is None:
        notes.append(f"ignored unknown next step {selection.next_step!r}")
    else:
        if finish:
            # conflicting answers: continuing is recoverable next turn, a wrong end is not
            notes.append("the walk ended the journey but next_step names a step: kept the step")
            finish = False
        if resolved_next in steps[:-1]:
            # next_step is where the walk stops; steps listed beyond it are a contradiction
            cut = len(steps) - steps[::-1].index(str(resolved_next))
            notes.append(f"cut the walk at next step {selection.next_step!r}")
            steps = steps[:cut]
        elif not steps or steps[-1] != resolved_next:
            steps.append(str(resolved_next))

    target = _backtrack_target(selection, views, by_index, notes)
    if target is not None and target in steps:
        steps = steps[steps.index(target) :]

    _, rejected, _ = _coerce_items(journey, selection.collected, [n.id for n in journey.nodes])
    hold_at = {v.id for v in views.values() if any(f.name in rejected for f in v.collects)}
    step = verify_walk(
        journey,
        views,
        previous_path,
        ProposedWalk(tuple(steps), target, finish),
        executed_tools=executed_tools,
        hold_at=hold_at,
    )
    return VerifiedStep(step.path, step.node_id, step.outcome, (*notes, *step.repairs))


def _backtrack_target(
    selection: JourneyNodeSelection,
    views: dict[str, NodeView],
    by_index: dict[str, str],
    notes: list[str],
) -> str | None:
    """The node the model wants to go back to; its legality is `verify_walk`'s business."""
    if not selection.requires_backtracking:
        return None
    raw = selection.backtracking_target_step
    if raw is None and selection.step_advancement:
        raw = selection.step_advancement[0]  # the walk names where it restarts
    if raw is None:
        notes.append("ignored backtracking without a target step")
        return None
    resolved = _resolve_step(raw, views, by_index)
    if not isinstance(resolved, str):
        notes.append(f"ignored backtracking to unknown step {raw!r}")
        return None
    return resolved


# --------------------------------------------------------------------------------------------------
# Collected values


_NOT_GIVEN = frozenset({"", "null", "none", "n/a", "unknown"})
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_CURRENCY = "$€£¥"
_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0"})


def coerce_value(field: CollectedField, raw: str) -> Any:
    """The typed value of `raw` for `field`; raises ValueError saying what is wrong."""
    text = raw.strip()
    if field.type == "str":
        return text
    if field.type in ("int", "decimal"):
        number = _parse_number(text)
        if field.type == "int":
            if number != number.to_integral_value():
                raise ValueError("must be a whole number")
            number = Decimal(int(number))
        _check_bounds(field, number)
        return int(number) if field.type == "int" else number
    if field.type == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError("must be yes or no")
    if field.type == "date":
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            raise ValueError("must be a date written YYYY-MM-DD") from None
    if field.type == "enum":
        for choice in field.choices:
            if choice.lower() == text.lower():
                return choice
        raise ValueError(f"must be one of: {', '.join(field.choices)}")
    raise ValueError(f"unsupported field type {field.type!r}")  # pragma: no cover


def _parse_number(text: str) -> Decimal:
    cleaned = text.strip(_CURRENCY + " ").replace(" ", "")
    if "," in cleaned:
        # "1,234.50" is a thousands separator; "1,5" could be 1.5 or 15 — refuse to guess
        if not _THOUSANDS.fullmatch(cleaned):
            raise ValueError("is not an unambiguous number")
        cleaned = cleaned.replace(",", "")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError("is not a number") from None
    if not number.is_finite():
        raise ValueError("is not a number")
    return number


def _check_bounds(field: CollectedField, number: Decimal) -> None:
    if field.gt is not None and not number > Decimal(str(field.gt)):
        raise ValueError(f"must be greater than {_bound(field.gt)}")
    if field.ge is not None and not number >= Decimal(str(field.ge)):
        raise ValueError(f"must be at least {_bound(field.ge)}")
    if field.le is not None and not number <= Decimal(str(field.le)):
        raise ValueError(f"must be at most {_bound(field.le)}")


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def coerce_collected(
    journey: Journey, items: Sequence[CollectedItem], node_ids: Iterable[str]
) -> tuple[dict[str, Any], list[str]]:
    """Validate the model's values against the fields of the given steps.

    Field names match case-insensitively, enum choices too (the canonical choice is kept);
    numbers become `int` / `Decimal`, dates ISO strings. Values for unknown fields, for steps not
    in `node_ids`, or that fail validation are dropped with a note. A later item for the same
    field wins (a correction)."""
    values, _, notes = _coerce_items(journey, items, node_ids)
    return values, notes


def _coerce_items(
    journey: Journey, items: Sequence[CollectedItem], node_ids: Iterable[str]
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Values, rejected field names (→ reason) and notes."""
    allowed = set(node_ids)
    owners: dict[str, tuple[str, CollectedField]] = {}
    for node in journey.nodes:
        for fld in node.collects:
            owners.setdefault(fld.name.lower(), (node.id, fld))
    values: dict[str, Any] = {}
    rejected: dict[str, str] = {}
    notes: list[str] = []
    for item in items:
        owner = owners.get(item.name.strip().lower())
        if owner is None:
            notes.append(f"ignored a value for unknown field {item.name!r}")
            continue
        node_id, fld = owner
        if node_id not in allowed:
            notes.append(f"ignored {fld.name!r}: the journey has not reached its step")
            continue
        if fld.type != "str" and item.value.strip().lower() in _NOT_GIVEN:
            continue  # the model filled the slot with "nothing": not an answer, not an error
        try:
            values[fld.name] = coerce_value(fld, item.value)
            rejected.pop(fld.name, None)
        except ValueError as exc:
            values.pop(fld.name, None)
            rejected[fld.name] = str(exc)
            notes.append(f"rejected {fld.name}={item.value!r}: {exc}")
    return values, rejected, notes


# --------------------------------------------------------------------------------------------------
# The journey map shown to the model


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
    if view.customer_dependent:
        wanted = view.customer_action or "answered what this step asks"
        flags.append(f"CUSTOMER DEPENDENT — complete only once the customer has: {wanted}")
    if view.kind is NodeKind.TOOL:
        tools = ", ".join(view.tools)
        if view.tools and view.tools_ran(executed_tools):
            flags.append(f"TOOL STEP ({tools}) — its tools ran this turn; it may be passed")
        else:
            flags.append(f"TOOL STEP ({tools}) — do not advance past it until its tools ran")
    if view.transit:
        flags.append("FORK — never the final step; continue along one of its transitions")
    lines.extend(f"  - {flag}" for flag in flags)
    lines.extend(f"  - {_field_text(fld, collected)}" for fld in view.collects)
    lines.extend(_transition_lines(view, views, shown, door))
    return lines


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
}


def _field_text(fld: CollectedField, collected: Mapping[str, Any]) -> str:
    kind = f"one of: {', '.join(fld.choices)}" if fld.type == "enum" else _TYPE_TEXT[fld.type]
    bounds = [
        f"{sign} {_bound(value)}"
        for sign, value in ((">", fld.gt), ("≥", fld.ge), ("≤", fld.le))
        if value is not None
    ]
    details = [kind + "".join(f" {b}" for b in bounds)]
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


_INTRO = (
    "You keep track of where a conversation stands in one journey: a step-by-step process the "
    "agent follows with the customer. Given the latest customer message, say whether the journey "
    "still applies and which single step the agent performs in its next reply."
)

_RULES = """\
Answer these questions in order.
1. Does the journey still apply? If the customer clearly dropped it (refused to go on, asked to \
stop, or switched to something that replaces it), answer journey_applies=false; nothing else \
matters then. A side question alone does not drop it.
2. Is the current step complete? A CUSTOMER DEPENDENT step is complete only when the customer \
actually gave what it asks for; the agent asking is not enough. A TOOL STEP is complete only once \
its tools ran (see the tool results). Any other step is complete once the agent has done it.
3. Did the customer change an answer given at an earlier VISITED step? Then set \
requires_backtracking=true and backtracking_target_step to that step's number, and walk on from \
there. Only VISITED steps can be targets.
4. step_advancement lists the step numbers the journey moves through this turn: it starts at the \
current step (or the backtracking target, or BEGIN HERE) and follows only the transitions in the \
map. Leave a step only when it is complete; pass several steps at once when the customer already \
gave what they need. Never pass a TOOL STEP whose tools have not run: stop on it. Never stop on a \
FORK: take one of its transitions.
5. next_step is where the walk stops: the step the agent performs now (the current step again if \
it is not complete). Answer "NONE" only when the last step is complete and its END JOURNEY \
transition applies.
6. collected lists the values the customer stated for fields of the steps you stayed on or \
passed, as {"name": ..., "value": ...}: numbers as digits, dates as YYYY-MM-DD, choices as one of \
the listed options. Never guess a value the customer did not state. If the customer corrected a \
value ("actually, make it 300"), give the new one. Leave out known values that did not change."""

_ANSWER = (
    "Reply with one JSON object:\n"
    '{{"rationale": "{rationale}", "journey_applies": true, "requires_backtracking": false, '
    '"backtracking_target_step": null, "step_advancement": ["<step>", "..."], '
    '"next_step": "<step> or NONE", "collected": [{{"name": "<field>", "value": "<value>"}}]}}'
)
_RATIONALE_COMPACT = "<at most 12 words>"
_RATIONALE_EXPLAIN = "<which step is complete, and why each transition you took applies>"


def _position_text(
    views: dict[str, NodeView], path: Sequence[str | None], executed_tools: Collection[str]
) -> str:
    here = current_step(path, views)
    if here is None:
        return (
            "The journey has not started in this run: choose its first step, starting at "
            "BEGIN HERE. There is nothing to backtrack to."
        )
    run = [views[n].label for n in current_run(path) if n in views and not views[n].transit]
    text = (
        f"Current step: {views[here].label} (executed last). Visited in this run: {', '.join(run)}."
    )
    view = views[here]
    if view.kind is NodeKind.TOOL:
        if view.tools_ran(executed_tools):
            text += " Its tools ran this turn (see the tool results)."
        else:
            text += " Its tools have not run yet, so the journey cannot leave it."
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
) -> str:
    """The node-selection prompt for one journey. Pure: same inputs, same text."""
    executed = {r.tool for r in ctx.tool_results}
    journey_map = transition_map_text(
        journey, views, path, collected=collected, max_depth=max_depth, executed_tools=executed
    )
    answer = _ANSWER.format(rationale=_RATIONALE_EXPLAIN if explain else _RATIONALE_COMPACT)
    return "\n\n".join(
        [
            _INTRO,
            f"## Context\n{render_context(ctx)}",
            f"## Journey map\n{journey_map}",
            f"## Where the journey stands\n{_position_text(views, path, executed)}",
            f"## How to decide\n{_RULES}",
            f"## Answer\n{answer}",
        ]
    )


# --------------------------------------------------------------------------------------------------
# One journey, one turn


@dataclass(frozen=True)
class JourneyStepResult:
    """The outcome of node selection for one journey in one turn."""

    journey_id: str
    step: VerifiedStep
    collected: dict[str, Any]  # validated, typed values for fields of the steps reached
    rationale: str
    used_llm: bool
    notes: tuple[str, ...]  # values dropped and why (path repairs are in `step.repairs`)


def _reached_nodes(path: Sequence[str | None]) -> tuple[str, ...]:
    """The nodes of the run this turn ended in (the closed run when it just completed)."""
    trimmed = list(path)
    if trimmed and trimmed[-1] is None:
        trimmed.pop()
    return current_run(trimmed)


async def select_journey_step(
    llm: TurnLLM,
    ctx: TurnContext,
    journey: Journey,
    previous_path: Sequence[str | None],
    *,
    executed_tools: set[str],
    max_depth: int = 5,
    explain: bool = False,
) -> JourneyStepResult:
    """Where `journey` stands after this turn: no LLM call when the graph decides alone, else one
    call whose answer is verified and whose values are typed. LLM failures (`LLMError`,
    including `LLMBudgetExceeded`) propagate: the turn pipeline owns the fallback policy."""
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
    step = verify_advancement(journey, views, previous_path, selection, executed_tools)
    if step.outcome == "exit":
        values: dict[str, Any] = {}
        notes = ["dropped the values given for an exited journey"] if selection.collected else []
    else:
        values, notes = coerce_collected(journey, selection.collected, _reached_nodes(step.path))
    return JourneyStepResult(journey.id, step, values, selection.rationale, True, tuple(notes))
