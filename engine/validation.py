"""Validation of a compiled agent: every problem at once, each naming what to fix and where.

`problems(snapshot)` lists them; `validate_snapshot(snapshot)` raises `InvalidAgentDefinition`
with the whole list. Authoring (`engine.authoring`) runs it on every build; stores may run it again
on what they load.
"""

from __future__ import annotations

import difflib
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from functools import partial

from engine.agent_config import HANDOFF_TOOL
from engine.agent_id import agent_id_problem
from engine.errors import InvalidAgentDefinition
from engine.handoff_validation import handoff_problems
from engine.model import (
    END_OF_JOURNEY,
    JOURNEY_TAG_PREFIX,
    AgentSnapshot,
    CollectedField,
    EntityKind,
    EntityRef,
    Journey,
    JourneyEdge,
    JourneyNode,
    NodeKind,
    RelationshipKind,
)
from engine.tool_spec import ToolKind
from engine.versioning import migration_problems

Check = Callable[[AgentSnapshot], Iterable[str]]


def problems(
    snapshot: AgentSnapshot,
    *,
    reported_tools: Collection[str] = (),
    incomplete_journeys: Collection[str] = (),
) -> list[str]:
    """Everything wrong with `snapshot`, in a stable order; empty when it is valid.

    From a document with problems of its own (`engine.authoring.serialized`): `reported_tools`
    are tool names whose absence was reported where the document named them, and
    `incomplete_journeys` journeys some of whose states or transitions could not be built — their
    graph is not checked, as unreachable steps would only echo the problem already reported."""
    checks: list[Callable[[AgentSnapshot], Iterable[str]]] = [
        partial(
            _NAMING_TOOLS[check],
            reported=frozenset(reported_tools),
            incomplete=frozenset(incomplete_journeys),
        )
        if check in _NAMING_TOOLS
        else check
        for check in _CHECKS
    ]
    return [problem for check in checks for problem in check(snapshot)]


def validate_snapshot(snapshot: AgentSnapshot) -> None:
    """Raise `InvalidAgentDefinition` listing every problem of `snapshot`, if it has any."""
    found = problems(snapshot)
    if found:
        raise InvalidAgentDefinition(found)


# --------------------------------------------------------------------------------------------------
# Wording


def _known(kind: str, names: Iterable[str]) -> str:
    listed = ", ".join(sorted(set(names)))
    return f"(known {kind}: {listed})" if listed else f"(no {kind} are defined)"


def _step(journey: Journey, node_id: str) -> str:
    return f"journey '{journey.id}' step '{node_id}'"


def _entity(ref: EntityRef) -> str:
    return f"{ref.kind.value} '{ref.id}'"


# --------------------------------------------------------------------------------------------------
# Unique ids


def _duplicates(kind: str, ids: Iterable[str], scope: str = "") -> Iterator[str]:
    for value, count in Counter(ids).items():
        if count > 1:
            where = f"{scope}: " if scope else ""
            yield f"{where}{count} {kind}s share the id '{value}'; give each a unique id"


def _duplicate_ids(snapshot: AgentSnapshot) -> Iterator[str]:
    yield from _duplicates("guideline", (g.id for g in snapshot.guidelines))
    yield from _duplicates("journey", (j.id for j in snapshot.journeys))
    yield from _duplicates("tool", (t.name for t in snapshot.tools))
    yield from _duplicates("term", (t.name for t in snapshot.terms))
    yield from _duplicates("variable", (v.name for v in snapshot.variables))
    yield from _duplicates("canned response", (c.id for c in snapshot.canned_responses))
    for journey in snapshot.journeys:
        scope = f"journey '{journey.id}'"
        yield from _duplicates("step", (n.id for n in journey.nodes), scope)
        yield from _duplicates("transition", (e.id for e in journey.edges), scope)


# --------------------------------------------------------------------------------------------------
# Guidelines


def _did_you_mean(wanted: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(wanted, sorted(set(names)), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _unknown_tools(
    owner: str, tools: Sequence[str], snapshot: AgentSnapshot, reported: frozenset[str]
) -> Iterator[str]:
    known = {t.name for t in snapshot.tools}
    for name in tools:
        if name not in known and name not in reported and name != HANDOFF_TOOL:
            yield (
                f"{owner}: tool '{name}' is not registered{_did_you_mean(name, known)} "
                f"{_known('tools', known)}"
            )


def _tool_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    for t in snapshot.tools:
        if t.fills is not None and t.kind is ToolKind.GENERAL:
            yield (
                f"tool '{t.name}' declares fills: '{t.fills}', but only a selector or an "
                "interrupter fills a value; set kind: selector or interrupter, or remove fills"
            )
        elif t.fills is not None and not t.fills.isidentifier():
            yield f"tool '{t.name}': fills '{t.fills}' must be a field name (letters, digits, _)"


def _guideline_problems(
    snapshot: AgentSnapshot,
    reported: frozenset[str] = frozenset(),
    incomplete: frozenset[str] = frozenset(),
) -> Iterator[str]:
    journey_ids = {j.id for j in snapshot.journeys}
    for g in snapshot.guidelines:
        owner = f"guideline '{g.id}'"
        if not g.condition.strip():
            yield f"{owner} has an empty condition; say when it applies"
        if g.action is not None and not g.action.strip():
            yield f"{owner} has an empty action; give one, or none at all for an observation"
        yield from _unknown_tools(owner, g.tools, snapshot, reported)
        for tag in g.tags:
            scoped = tag[len(JOURNEY_TAG_PREFIX) :] if tag.startswith(JOURNEY_TAG_PREFIX) else None
            if scoped is not None and scoped not in journey_ids:
                yield (
                    f"{owner} is scoped to journey '{scoped}', which does not exist "
                    f"{_known('journeys', journey_ids)}"
                )


# --------------------------------------------------------------------------------------------------
# Journeys


def _journey_problems(
    snapshot: AgentSnapshot,
    reported: frozenset[str] = frozenset(),
    incomplete: frozenset[str] = frozenset(),
) -> Iterator[str]:
    for journey in snapshot.journeys:
        yield from _condition_problems(journey, snapshot)
        yield from _prerequisite_problems(journey, snapshot)
        for node in journey.nodes:
            yield from _step_problems(journey, node, snapshot, reported)
        yield from _collected_field_problems(journey)
        yield from _transition_problems(journey)
        if journey.id not in incomplete:
            yield from _graph_problems(journey)


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
                f"{_known('journeys', known)}"
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
    yield from _unknown_tools(owner, node.tools, snapshot, reported)
    for field in node.collects:
        if field.type == "enum" and not field.choices:
            yield (
                f"{owner}: field '{field.name}' is an enum without choices; "
                "list them (e.g. 'enum:checking|savings')"
            )


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
                f"{_known('steps', node_ids)}"
            )
    for edge in journey.edges:
        owner = f"journey '{journey.id}' transition '{edge.id}'"
        if edge.source not in node_ids:
            yield f"{owner} starts at step '{edge.source}', which does not exist {_known('steps', node_ids)}"
        if edge.target is not None and edge.target not in node_ids:
            yield f"{owner} leads to step '{edge.target}', which does not exist {_known('steps', node_ids)}"


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


# --------------------------------------------------------------------------------------------------
# Relationships and cycles


def _exists(ref: EntityRef, snapshot: AgentSnapshot) -> bool:
    if ref.kind is EntityKind.GUIDELINE:
        return snapshot.has_guideline(ref.id)
    if ref.kind is EntityKind.TAG:  # a tag exists when some guideline or journey carries it
        return any(ref.id in g.tags for g in snapshot.guidelines) or any(
            ref.id in j.tags for j in snapshot.journeys
        )
    return snapshot.has_journey(ref.id)


def _relationship_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    for r in snapshot.relationships:
        owner = f"{r.kind.value} relationship {r.source} → {r.target}"
        for ref in (r.source, r.target):
            if not _exists(ref, snapshot):
                if ref.kind is EntityKind.TAG:
                    yield (
                        f"{owner}: no guideline or journey carries the tag '{ref.id}'; tag one "
                        "or fix the name"
                    )
                else:
                    yield f"{owner}: {_entity(ref)} does not exist"
        if r.kind is RelationshipKind.DISAMBIGUATION and r.source.kind is not EntityKind.GUIDELINE:
            yield f"{owner}: only an observation (a guideline) can disambiguate"


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Cycles of a directed graph as closed paths (`[a, b, a]`), each reported once."""
    cycles: dict[tuple[str, ...], list[str]] = {}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :]
                start = cycle.index(min(cycle))  # one rotation per cycle, to report it once
                canonical = tuple(cycle[start:] + cycle[:start])
                cycles.setdefault(canonical, [*canonical, canonical[0]])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in list(graph):
        if node not in state:
            visit(node)
    return list(cycles.values())


def _priority_cycles(snapshot: AgentSnapshot) -> Iterator[str]:
    graph: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for r in snapshot.relationships:
        if r.kind is RelationshipKind.PRIORITY:
            graph.setdefault(str(r.source), []).append(str(r.target))
            labels[str(r.source)], labels[str(r.target)] = _entity(r.source), _entity(r.target)
    for cycle in find_cycles(graph):
        route = " → ".join(labels[node] for node in cycle)
        yield f"priority cycle: {route}; remove one of these priorities"


def _journey_guideline_priorities(snapshot: AgentSnapshot) -> Iterator[str]:
    for g in snapshot.guidelines:
        owner = g.scoped_journey_id or g.condition_of_journey
        if owner is not None and g.priority != 0:
            yield (
                f"guideline '{g.id}' belongs to journey '{owner}' and takes its priority: set "
                f"priority on the journey, not on the guideline (got priority {g.priority})"
            )


def _prerequisite_cycles(snapshot: AgentSnapshot) -> Iterator[str]:
    graph = {j.id: list(j.requires) for j in snapshot.journeys}
    for cycle in find_cycles(graph):
        route = " → ".join(f"'{j}'" for j in cycle)
        yield f"journey prerequisites form a cycle: {route}; no journey in it could ever start"


def _composed_parameter_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    for spec in snapshot.tools:
        composed = [p.name for p in spec.parameters if p.composed]
        if composed and spec.consequential:
            names = ", ".join(f"'{n}'" for n in composed)
            yield (
                f"tool '{spec.name}': parameter {names} is composed (the model phrases it), but "
                "the tool is consequential; a consequential tool runs only on values the "
                "customer gave — remove composed or make the tool non-consequential"
            )


def _canned_response_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """A tag scopes a template to a guideline, a journey or one step: one naming nothing would
    keep the template from ever being used."""
    guidelines = [g.id for g in snapshot.guidelines]
    # A journey's condition guidelines are internal: a hint lists only what an author wrote.
    written = [g for g in guidelines if not g.startswith(JOURNEY_TAG_PREFIX)]
    journeys = {j.id: j for j in snapshot.journeys}
    for response in snapshot.canned_responses:
        owner = f"canned response '{response.id}'"
        for tag in response.tags:
            kind, _, rest = tag.partition(":")
            if kind == "guideline" and rest not in guidelines:
                yield (
                    f"{owner}: tag '{tag}' names guideline '{rest}', which does not exist"
                    f"{_did_you_mean(rest, written)} {_known('guidelines', written)}"
                )
            elif kind == "journey" and rest not in journeys:
                yield (
                    f"{owner}: tag '{tag}' names journey '{rest}', which does not exist"
                    f"{_did_you_mean(rest, journeys)} {_known('journeys', journeys)}"
                )
            elif kind == "node":
                yield from _step_tag_problems(owner, tag, rest, journeys)


def _step_tag_problems(
    owner: str, tag: str, rest: str, journeys: dict[str, Journey]
) -> Iterator[str]:
    journey_id, _, step_id = rest.partition(":")
    journey = journeys.get(journey_id)
    if not step_id:
        yield f"{owner}: tag '{tag}' must name a journey and a step: 'node:<journey id>:<step id>'"
    elif journey is None:
        yield (
            f"{owner}: tag '{tag}' names journey '{journey_id}', which does not exist"
            f"{_did_you_mean(journey_id, journeys)} {_known('journeys', journeys)}"
        )
    elif not any(n.id == step_id for n in journey.nodes):
        steps = [n.id for n in journey.nodes if n.id != journey.root_id]
        yield (
            f"{owner}: tag '{tag}' names step '{step_id}' of journey '{journey_id}', which "
            f"does not exist{_did_you_mean(step_id, steps)} {_known('steps', steps)}"
        )


def _agent_id_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    problem = agent_id_problem(snapshot.id)
    if problem is not None:
        yield problem


_CHECKS: tuple[Check, ...] = (
    _agent_id_problems,
    _duplicate_ids,
    _tool_problems,
    _composed_parameter_problems,
    _guideline_problems,
    _journey_problems,
    _relationship_problems,
    _priority_cycles,
    _journey_guideline_priorities,
    _prerequisite_cycles,
    _canned_response_problems,
    handoff_problems,
    migration_problems,
)
# Checks that report unknown tools, and skip those reported already (`problems`).
_NAMING_TOOLS: dict[Check, Callable[..., Iterable[str]]] = {
    _guideline_problems: _guideline_problems,
    _journey_problems: _journey_problems,
}
