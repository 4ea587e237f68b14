"""Values given ahead of their step: "Transfer $250 to 7770001" while the journey asks for the
destination also answers the amount step that comes after it.

- A value for a field of a step the journey has not reached — but can reach from where it now
  stands — is kept only when it is found in the customer's own messages of this turn, or of the
  turn that asked for the journey while a prerequisite ran first
  (`engine.grounding.ground_collected`): a model that invents a value for a later step fills
  nothing, and the step will ask.
- Once the walk stops on a chat step every field of which was given ahead (or in this very
  turn), the step is passed: its single way out is taken, through single-exit forks, and the
  journey stops on the next step — never past a tool step (its tools still run, through the
  safe-actions gate: grounding and confirmation), never to the end of the journey (completion
  needs a performed step), never where the step has a choice of transitions.

Pure and deterministic: the model proposes values; these rules decide what is kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.grounding import CustomerMessage, ground_collected
from engine.matching.collected_values import CollectedItem, coerce_items
from engine.matching.journey_graph import NodeView, current_run
from engine.matching.journey_walk import VerifiedStep
from engine.model import CollectedField, Journey, NodeKind

MAX_PASSED_STEPS = 16  # a bound on passing satisfied steps in one turn (cycles of satisfied steps)


def reached_nodes(path: Sequence[str | None]) -> tuple[str, ...]:
    """The nodes of the run this turn ended in (the closed run when it just completed)."""
    trimmed = list(path)
    if trimmed and trimmed[-1] is None:
        trimmed.pop()
    return current_run(trimmed)


def nodes_ahead(
    views: Mapping[str, NodeView], start: str | None, reached: Collection[str]
) -> set[str]:
    """Steps reachable from `start` by the graph's transitions that this run has not reached."""
    if start is None or start not in views:
        return set()
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in views[queue.popleft()].successors:
            if nxt not in seen and nxt in views:
                seen.add(nxt)
                queue.append(nxt)
    return seen - set(reached)


def _fields_by_name(journey: Journey) -> dict[str, tuple[set[str], CollectedField]]:
    fields: dict[str, tuple[set[str], CollectedField]] = {}
    for node in journey.nodes:
        for fld in node.collects:
            owners, _ = fields.setdefault(fld.name, (set(), fld))
            owners.add(node.id)
    return fields


@dataclass(frozen=True)
class CollectedThisTurn:
    """What node selection collected for one journey in one turn."""

    values: dict[str, Any]  # typed values, for steps reached and for steps ahead
    ahead: dict[str, str]  # field → the step ahead it was given for
    grounded: frozenset[str]  # fields whose value is in the customer's words this turn
    notes: tuple[str, ...]  # what was dropped and why
    # values the customer gave that failed validation: field → why (the reply says why)
    refused: dict[str, str] = field(default_factory=dict)
    # field → the offset of the customer message whose words hold it (who said it, in a group)
    said_at: dict[str, int] = field(default_factory=dict)


def collect_values(
    journey: Journey,
    views: Mapping[str, NodeView],
    step: VerifiedStep,
    items: Sequence[CollectedItem],
    messages: Sequence[CustomerMessage],
) -> CollectedThisTurn:
    """The typed values the model reported for the steps reached in this run, plus those for
    steps ahead that `messages` contain: the customer's messages of this turn, and those of the
    request a prerequisite delayed (`engine.matching.journeys.said_ahead_messages`)."""
    reached = reached_nodes(step.path)
    ahead_nodes = nodes_ahead(views, step.node_id, reached)
    values, refused, notes = coerce_items(journey, items, (*reached, *ahead_nodes))
    fields = _fields_by_name(journey)
    order = {n.id: i for i, n in enumerate(journey.nodes)}
    ahead: dict[str, str] = {}
    grounded: set[str] = set()
    said_at: dict[str, int] = {}
    for name in sorted(values):
        owners, fld = fields[name]
        found = ground_collected(fld, values[name], messages)
        in_words = found is not None
        if found is not None:
            grounded.add(name)
            if found.span is not None:
                said_at[name] = found.span[0]
        if owners & set(reached):
            continue  # the field of a step this run reached: an answer, not a value ahead
        if not in_words:
            value = values.pop(name)
            notes.append(
                f"ignored {name}={value!r} for a step ahead: not in the customer's words this turn"
            )
            continue
        ahead[name] = min(owners & ahead_nodes, key=order.__getitem__)
    return CollectedThisTurn(values, ahead, frozenset(grounded), tuple(notes), refused, said_at)


def pass_satisfied_steps(
    views: Mapping[str, NodeView],
    step: VerifiedStep,
    given_now: Collection[str],
    given_ahead: Mapping[str, Collection[str]],
) -> VerifiedStep:
    """Pass the chat steps whose every field was given: in the customer's words this turn
    (`given_now`), or ahead for that very step (`given_ahead`: step → fields), each along its
    only way out; stop on the first step that is not satisfied, on a tool step, or where passing
    would need a choice or would end the journey. A backtrack is never passed on: the customer
    is changing an answer."""
    if step.outcome not in ("advance", "stay") or step.node_id is None:
        return step
    path = list(step.path)
    here = step.node_id
    repairs = list(step.repairs)
    passed: set[str] = set()
    for _ in range(MAX_PASSED_STEPS):
        view = views[here]
        if view.kind is not NodeKind.CHAT or not view.collects or here in passed:
            break
        ahead_here = given_ahead.get(here, ())
        if not all(f.name in given_now or f.name in ahead_here for f in view.collects):
            break
        chain = _single_way_on(views, here)
        if chain is None or chain[-1] in passed or chain[-1] == step.node_id:
            break  # a choice, the end, or back to a step this walk passed: stop here
        repairs.append(f"passed {view.id}: its values were given ahead")
        passed.add(here)
        path.extend(chain)
        here = chain[-1]
        if views[here].kind is NodeKind.TOOL:
            break
    if here == step.node_id:
        return step
    return VerifiedStep(tuple(path), here, "advance", tuple(repairs))


def _single_way_on(views: Mapping[str, NodeView], start: str) -> list[str] | None:
    """The nodes entered by leaving `start` along its only way out, through single-exit
    transit nodes; None when there is a choice, a cycle, or the way ends the journey."""
    exits = views[start].exits
    if len(exits) != 1 or exits[0] is None:
        return None
    chain = [exits[0]]
    while views[chain[-1]].transit:
        onward = views[chain[-1]].exits
        if len(onward) != 1 or onward[0] is None or onward[0] in chain:
            return None
        chain.append(onward[0])
    return chain
