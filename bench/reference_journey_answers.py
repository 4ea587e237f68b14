"""The reference's fake LLM on the journey: the reachable-step conditions it writes when the
reference indexes the journey at boot (each names the step it leads to, `STEP_MARK`), and step
selection, which picks the offered condition that leads to our engine's step of the turn.

Standard library and the fake's own modules only (see `bench/reference_fake.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.reference_script import TurnScript

# Phrases the fake writes into the journey's reachable-step conditions, and reads back at step
# selection: the target of a condition is the step named after the last STEP_MARK.
STEP_MARK = "the next step is not done yet: "
DONE_MARK = "done: "
JOURNEY_COMPLETE = "the journey is complete"


@dataclass(frozen=True)
class ChildStep:
    id: str
    action: str | None
    condition: str | None  # the edge's own condition
    onward: tuple[tuple[str, str], ...]  # (path id, condition) of the paths from the child on


def _real_data(prompt: str) -> str:
    marker = "Example section is over"
    return prompt.rsplit(marker, 1)[-1] if marker in prompt else prompt


def parse_reachable_prompt(prompt: str) -> tuple[str | None, list[ChildStep]]:
    """The step a reachable-conditions prompt is about (its action) and its children."""
    text = _real_data(prompt).split("OUTPUT FORMAT", 1)[0]
    current = re.search(r"Current node action:\s*\n\s*(.+)", text)
    children = []
    blocks = re.split(r"\n\s*Child id: ", text)
    for block in blocks[1:]:
        child_id = block.split(None, 1)[0]
        action = re.search(r"Action of child \([^)]*\):\s*\n\s*(.+)", block)
        condition = re.search(r"Condition of the transition to child \([^)]*\):\s*\n\s*(.+)", block)
        onward = re.findall(r"- Condition \(([^)]+)\) : (.+)", block)
        children.append(
            ChildStep(
                id=child_id,
                action=action[1].strip() if action else None,
                condition=condition[1].strip() if condition else None,
                onward=tuple((i, c.strip()) for i, c in onward),
            )
        )
    return (current[1].strip() if current else None), children


def reachable_answer(prompt: str) -> dict[str, Any]:
    """The conditions of a step's transitions, each naming the step it stops at (STEP_MARK), or
    that the journey is complete."""
    action, children = parse_reachable_prompt(prompt)
    answer: dict[str, Any] = {
        "step_action": action or "",
        "step_action_completed": f"{DONE_MARK}{action}; {JOURNEY_COMPLETE}" if action else "",
    }
    if not children:
        return answer
    answer["children_conditions"] = [
        {
            "child_id": c.id,
            "child_action": c.action or "There is no action to perform in this child step",
            "condition_to_child": c.condition or "",
            "condition_to_child_and_stop": _prefixed(
                c.condition, f"{STEP_MARK}{c.action}" if c.action else JOURNEY_COMPLETE
            ),
            "conditions_to_child_and_forward": [
                {
                    "id": path_id,
                    "path_condition": onward,
                    "condition_to_child_then_to_path": _prefixed(
                        c.condition, f"{DONE_MARK}{c.action}; {onward}"
                    ),
                }
                for path_id, onward in c.onward
            ]
            or None,
        }
        for c in children
    ]
    return answer


def _prefixed(condition: str | None, rest: str) -> str:
    return f"{condition}; {rest}" if condition else rest


def step_ids(prompt: str) -> dict[str, str]:
    """Step id → action, from a reachable-conditions prompt's children (the reference's own
    numbering of the journey's steps)."""
    _, children = parse_reachable_prompt(prompt)
    return {c.id: c.action for c in children if c.action}


def condition_target(condition: str) -> str | None:
    """The step a condition the fake wrote leads to; None when it completes the journey."""
    if STEP_MARK in condition:
        return condition.rsplit(STEP_MARK, 1)[1].strip()
    return None


def parse_next_step_prompt(prompt: str) -> tuple[str, str, dict[str, str]]:
    """A step-selection prompt's journey title, current step action and offered conditions."""
    text = _real_data(prompt)
    title = re.search(r"\nJourney: (.+)", text)
    current = re.search(r"CURRENT STEP -\s*\n\s*(.+)", text)
    options = dict(re.findall(r"Condition \(([^)]+)\): (.+)", text))
    return (
        title[1].strip() if title else "",
        current[1].strip() if current else "",
        {k: v.strip() for k, v in options.items()},
    )


def next_step_answer(prompt: str, turn: TurnScript) -> dict[str, Any]:
    """Step selection as our engine moved this turn: the offered condition that leads to the
    furthest of our steps this turn ("0" if that is the current step), the condition that
    completes the journey when ours completed, "None" when ours was not active."""
    title, current, options = parse_next_step_prompt(prompt)
    journey = turn.journey(title)
    chosen, why = "None", "our engine has no such journey active this turn"
    if journey is not None and journey.completed:
        ending = [k for k, c in options.items() if condition_target(c) is None]
        chosen, why = (
            (ending[0], "our engine completed the journey")
            if ending
            else (
                "None",
                "our engine completed the journey; no condition here completes it",
            )
        )
    elif journey is not None and not journey.exited:
        chosen, why = "0", "our engine stayed at this step"
        for step in reversed(journey.steps):
            if step.is_named_by(current):
                break
            offered = [
                k
                for k, c in options.items()
                if (target := condition_target(c)) is not None and step.is_named_by(target)
            ]
            if offered:
                chosen, why = offered[0], f"our engine moved to: {step.action or step.tools}"
                break
    return {
        "journey_continues": chosen != "None",
        "current_step_completed_rationale": why,
        "current_step_completed": chosen not in ("0", "None"),
        "next_step_rationale": why,
        "applied_condition_id": chosen,
    }


def chosen_target(prompt: str, answer: Mapping[str, Any]) -> str | None:
    """The step action a step-selection answer chose: the current step for "0", the
    condition's target otherwise; None for leaving or completing the journey."""
    _, current, options = parse_next_step_prompt(prompt)
    chosen = str(answer.get("applied_condition_id"))
    if chosen == "0":
        return current
    return condition_target(options[chosen]) if chosen in options else None
