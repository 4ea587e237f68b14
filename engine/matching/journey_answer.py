"""The node selector's answer: the schema the model fills for one journey, and its verification.

The answer is only a proposal: `verify_advancement` translates its display numbers, drops what
cannot be read, and hands the walk to `engine.matching.journey_walk.verify_walk`, which enforces
the graph rules — no rule that can be checked in code depends on the model obeying it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field

from engine.matching.collected_values import CollectedItem, coerce_items
from engine.matching.journey_graph import NodeView, index_map
from engine.matching.journey_walk import ProposedWalk, VerifiedStep, exit_step, verify_walk
from engine.model import Journey


class JourneyNodeSelection(BaseModel):
    """The model's proposal for one journey. Step references are display numbers ("3")."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    rationale: str = Field(
        default="", description="the evidence for each move of the walk, as long as it needs"
    )
    journey_applies: bool = Field(default=True, description="false when the customer dropped it")
    requires_backtracking: bool = False
    backtracking_target_step: str | None = Field(default=None, description="a visited step")
    step_advancement: list[str] = Field(
        default_factory=list, description="steps walked this turn, e.g. ['2', '3']"
    )
    next_step: str | None = Field(description='the step to perform now, or "NONE" at the end')
    collected: list[CollectedItem] = Field(default_factory=list)


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
    *,
    collected: Collection[str] = (),
    left_collected: Collection[str] = (),
) -> VerifiedStep:
    """The one legal step for this turn, whatever the model answered.

    Translates display numbers, drops references to unknown steps, reads "NONE"/null as "the
    journey is over", and hands the walk to `verify_walk`, which enforces the graph rules. A step
    whose value failed validation this turn is not passed: the agent has to ask again. Nor is a
    step with a required field the run holds no value for: neither in `collected` (the fields
    this run already holds; `left_collected`, those of a run the customer left, count only if
    the answer resumes it) nor among the valid values this answer reports.
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

    given, rejected, _ = coerce_items(journey, selection.collected, [n.id for n in journey.nodes])
    hold_at = {v.id for v in views.values() if any(f.name in rejected for f in v.collects)}
    step = verify_walk(
        journey,
        views,
        previous_path,
        ProposedWalk(
            tuple(steps),
            target,
            finish,
            None if resolved_next is _END or resolved_next is None else str(resolved_next),
        ),
        executed_tools=executed_tools,
        hold_at=hold_at,
        collected={*collected, *given},
        left_collected=left_collected,
    )
    return replace(step, repairs=(*notes, *step.repairs), proposed=tuple(steps))


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
