"""Validation of an agent's journeys: their conditions and prerequisites, each step and what it
collects, the transitions, and the graph they make (every step reachable, every fork's branches
conditioned).

Part of `engine.validation.agent`; each problem names the journey, and the step or transition, to fix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from engine.model import (
    END_OF_JOURNEY,
    AgentSnapshot,
    CollectedField,
    Journey,
    JourneyEdge,
    JourneyNode,
    NodeKind,
)
from engine.validation.tools import unknown_tool_problems
from engine.validation.wording import known_hint


def journey_problems(
    snapshot: AgentSnapshot,
    reported: frozenset[str] = frozenset(),
    incomplete: frozenset[str] = frozenset(),
) -> Iterator[str]:
    """What is wrong with each journey; tools in `reported` are not reported again, and the graph
    of a journey in `incomplete` is not checked."""
    for journey in snapshot.journeys:
        yield from _condition_problems(journey, snapshot)
        yield from _prerequisite_problems(journey, snapshot)
        for node in journey.nodes:
            yield from _step_problems(journey, node, snapshot, reported)
        yield from _collected_field_problems(journey)
        yield from _transition_problems(journey)
        if journey.id not in incomplete:
            yield from _graph_problems(journey)


def _step(journey: Journey, node_id: str) -> str:
    return f"journey '{journey.id}' step '{node_id}'"


def _condition_problems(journey: Journey, snapshot: AgentSnapshot) -> Iterator[str]:
    owner = f"journey '{journey.id}'"
    if not journey.conditions and not journey.condition_guideline_ids:
        yield f"{owner} has no conditions, so it can never activate; add at least one"
    for number, text in enumerate(journey.conditions, start=1):
        if not text.strip():
            yield f"{owner}: condition #{number} is empty; say when the journey applies"
    if journey.conditions and len(journey.conditions) != len(journey.condition_guideline_ids):
        yield (
            f"{owner} has {len(journey.conditions)} conditions but "
            f"{len(journey.condition_guideline_ids)} condition guidelines; recompile it"
        )
    for guideline_id in journey.condition_guideline_ids:
        if not snapshot.has_guideline(guideline_id):
            yield f"{owner}: its condition guideline '{guideline_id}' does not exist"


def _prerequisite_problems(journey: Journey, snapshot: AgentSnapshot) -> Iterator[str]:
    known = [j.id for j in snapshot.journeys]
    for required in journey.requires:
        if required not in known:
            yield (
                f"journey '{journey.id}' requires journey '{required}', which does not exist "
                f"{known_hint('journeys', known)}"
            )


def _step_problems(
    journey: Journey, node: JourneyNode, snapshot: AgentSnapshot, reported: frozenset[str]
) -> Iterator[str]:
    owner = _step(journey, node.id)
    if node.kind is NodeKind.TOOL and not node.tools:
        yield f"{owner} is a tool step without tools; name the tool(s) it calls"
    if (
        node.kind is NodeKind.CHAT
        and node.id != journey.root_id
        and not (node.action or "").strip()
    ):
        yield f"{owner} is a chat step without an instruction; say what the agent should say or ask"
    if node.collects and node.kind is not NodeKind.CHAT:
        yield f"{owner} is a {node.kind.value} step that collects values; only chat steps can"
    yield from unknown_tool_problems(owner, node.tools, snapshot, reported)
    for field in node.collects:
        if field.type == "enum" and not field.choices:
            yield (
                f"{owner}: field '{field.name}' is an enum without choices; "
                "list them (e.g. 'enum:checking|savings')"
            )
        if field.pattern and field.type != "str":
            yield f"{owner}: field '{field.name}' has a pattern, which only a str field takes"
        if field.currency and field.type != "money":
            yield f"{owner}: field '{field.name}' has a currency, which only a money field takes"


def _collected_field_problems(journey: Journey) -> Iterator[str]:
    # Collected values are stored per journey by name: several steps may collect the same field
    # (asking again after a failed login, a smaller amount after insufficient funds), but they must
    # agree on what it is, or a later step would overwrite a value with one of another type.
    first: dict[str, tuple[str, CollectedField]] = {}
    for node in journey.nodes:
        for field in node.collects:
            if field.name not in first:
                first[field.name] = (node.id, field)
                continue
            step, original = first[field.name]
            if _field_shape(field) != _field_shape(original):
                yield (
                    f"journey '{journey.id}': field '{field.name}' is collected by steps {step} "
                    f"and {node.id} with different types, bounds or secrecy; make them the same or "
                    "rename one"
                )


def _field_shape(field: CollectedField) -> tuple[object, ...]:
    return (field.type, field.choices, field.gt, field.ge, field.le, field.secret)


def _transition_problems(journey: Journey) -> Iterator[str]:
    node_ids = [n.id for n in journey.nodes]
    for node in journey.nodes:
        if node.on_failure is None:
            continue
        owner = f"journey '{journey.id}' state '{node.id}'"
        if node.kind is not NodeKind.TOOL:
            yield f"{owner} has on_failure, but only tool states can fail"
        if node.on_failure != END_OF_JOURNEY and node.on_failure not in node_ids:
            yield (
                f"{owner}: on_failure leads to step '{node.on_failure}', which does not exist "
                f"{known_hint('steps', node_ids)}"
            )
    for edge in journey.edges:
        owner = f"journey '{journey.id}' transition '{edge.id}'"
        if edge.source not in node_ids:
            yield f"{owner} starts at step '{edge.source}', which does not exist {known_hint('steps', node_ids)}"
        if edge.target is not None and edge.target not in node_ids:
            yield f"{owner} leads to step '{edge.target}', which does not exist {known_hint('steps', node_ids)}"


def _graph_problems(journey: Journey) -> Iterator[str]:
    node_ids = {n.id for n in journey.nodes}
    if journey.root_id not in node_ids:
        yield f"journey '{journey.id}': its root step '{journey.root_id}' does not exist"
        return
    if not journey.outgoing(journey.root_id):
        yield f"journey '{journey.id}' has no transition out of its root; add a first step"
    reachable = _reachable(journey)
    for node in journey.nodes:
        if node.id not in reachable:
            yield (
                f"{_step(journey, node.id)} is unreachable from the root; "
                "add a transition to it or remove it"
            )
        if node.kind is NodeKind.FORK:
            yield from _fork_problems(journey, node, journey.outgoing(node.id))


def _reachable(journey: Journey) -> set[str]:
    seen = {journey.root_id}
    queue = deque([journey.root_id])
    while queue:
        for edge in journey.outgoing(queue.popleft()):
            if edge.target is not None and edge.target not in seen:
                seen.add(edge.target)
                queue.append(edge.target)
    return seen


def _fork_problems(
    journey: Journey, fork: JourneyNode, outgoing: list[JourneyEdge]
) -> Iterator[str]:
    owner = _step(journey, fork.id)
    if not outgoing:
        yield f"{owner} is a fork without outgoing transitions; add its branches"
    elif len(outgoing) > 1:
        for edge in outgoing:
            if not (edge.condition or "").strip():
                yield (
                    f"{owner} is a fork with {len(outgoing)} branches, but transition "
                    f"'{edge.id}' has no condition; every branch needs one"
                )
