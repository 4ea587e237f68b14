"""Validation of a compiled agent: every problem at once, each naming what to fix and where.

`problems(snapshot)` lists them; `validate_snapshot(snapshot)` raises `InvalidAgentDefinition`
with the whole list. Authoring (`engine.authoring`) runs it on every build; stores may run it again
on what they load. `warnings(snapshot)` lists what is allowed but probably not meant (a reply that
reaches a customer in another language than theirs); they never fail validation, and
`waypoint validate` shows them.

The checks of each kind of element live beside this module: `engine.validation.guidelines`,
`engine.validation.journeys`, `engine.validation.tools`, `engine.validation.canned_responses`,
`engine.validation.relationships` (relationships, priorities, prerequisite cycles),
`engine.validation.handoff`, `engine.validation.models` (model routing),
`engine.language.validation` (served languages, the engine's lines,
canned variants); `engine.versioning.pinning` checks declared migrations. This module holds what
concerns the agent as a whole (its id, unique ids) and the order every check runs in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import partial

from engine.agent_id import agent_id_problem
from engine.errors import InvalidAgentDefinition
from engine.language.validation import language_problems, language_warnings
from engine.model import AgentSnapshot
from engine.validation.canned_responses import canned_response_problems
from engine.validation.guidelines import guideline_problems
from engine.validation.handoff import handoff_problems
from engine.validation.journeys import journey_problems
from engine.validation.models import model_routing_problems
from engine.validation.relationships import (
    journey_guideline_priorities,
    prerequisite_cycles,
    priority_cycles,
    relationship_problems,
)
from engine.validation.tools import (
    composed_parameter_problems,
    tool_problems,
    value_source_problems,
)
from engine.versioning.pinning import migration_problems

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


def warnings(snapshot: AgentSnapshot) -> list[str]:
    """What `snapshot` allows but probably does not mean, in a stable order; never a failure."""
    return [warning for check in _WARNINGS for warning in check(snapshot)]


def validate_snapshot(snapshot: AgentSnapshot) -> None:
    """Raise `InvalidAgentDefinition` listing every problem of `snapshot`, if it has any."""
    found = problems(snapshot)
    if found:
        raise InvalidAgentDefinition(found)


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
# The agent's id, and the order the checks run in


def _agent_id_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    problem = agent_id_problem(snapshot.id)
    if problem is not None:
        yield problem


_CHECKS: tuple[Check, ...] = (
    _agent_id_problems,
    _duplicate_ids,
    tool_problems,
    composed_parameter_problems,
    value_source_problems,
    guideline_problems,
    journey_problems,
    relationship_problems,
    priority_cycles,
    journey_guideline_priorities,
    prerequisite_cycles,
    canned_response_problems,
    handoff_problems,
    model_routing_problems,
    language_problems,
    migration_problems,
)
_WARNINGS: tuple[Check, ...] = (language_warnings,)
# Checks that report unknown tools, and skip those reported already (`problems`).
_NAMING_TOOLS: dict[Check, Callable[..., Iterable[str]]] = {
    guideline_problems: guideline_problems,
    journey_problems: journey_problems,
}
