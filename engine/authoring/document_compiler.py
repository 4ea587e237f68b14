"""Document → builder: an agent document replayed as builder calls, every problem reported.

`DocumentCompiler` turns a schema-valid `AgentDocument` (`engine.authoring.document`) into the
`Agent` builder the Python form would have written, resolving references (tools, states,
journeys, guidelines) against the document first so a typo is reported at the element that made it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from engine.agent_config import HANDOFF_TOOL
from engine.authoring.agent_builder import Agent, Related
from engine.authoring.document import (
    RELATION_KEYS,
    AgentDocument,
    GuidelineDoc,
    JourneyDoc,
    Reference,
    RelatedDoc,
    StateDoc,
    TransitionDoc,
    child_path,
    element_label,
)
from engine.authoring.ids import (
    END_STATE_NAME,
    ROOT_STATE_ID,
    default_guideline_id,
    default_journey_id,
    default_state_id,
)
from engine.authoring.journey_builder import END_JOURNEY, JourneyBuilder
from engine.authoring.tool_declarations import resolve_tools
from engine.errors import InvalidAgentDefinition
from engine.matching.projection import journey_condition_guideline_id
from engine.model import EntityKind, EntityRef
from engine.tools.spec import ToolSpec

T = TypeVar("T")


@dataclass(frozen=True)
class Absent:
    """Elements of the document left out of compilation because their own problems are
    reported already: references to them are not problems of their own."""

    tools: frozenset[str] = frozenset()
    guidelines: frozenset[str] = frozenset()
    journeys: frozenset[str] = frozenset()


def _known(kind: str, names: Iterable[str], wanted: str) -> str:
    names = sorted(set(names))
    close = difflib.get_close_matches(wanted, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"{hint} (known {kind}: {', '.join(names) or 'none'})"


def _item_path(section: str, item: Any, index: int) -> str:
    """Named like the document's own error paths: by id (or name) when given, else position."""
    label = {key: getattr(item, key, None) for key in ("id", "name")}
    return f"{section}[{element_label(label, index)}]"


class DocumentCompiler:
    """Replays a document as builder calls. References (tools, states, journeys, guidelines) are
    resolved against the document first, so a typo is reported at the element that made it."""

    def __init__(
        self,
        document: AgentDocument,
        *,
        registry: Sequence[ToolSpec] | None = None,
        absent: Absent | None = None,
    ):
        """`registry`: the `@tool` specs the document's tools are checked against (or taken
        from); `absent`: ids of elements left out for problems already reported, so references
        to them are not reported again."""
        self.document = document
        header = document.agent
        self.agent = Agent(
            id=header.id,
            name=header.name,
            description=header.description,
            composition_mode=header.composition_mode,
            config=header.config,
            languages=header.languages,
            messages=header.messages,
        )
        self.absent = absent or Absent()
        self.tools = resolve_tools(
            document.tools, registry, section_given="tools" in document.model_fields_set
        )
        self.problems: list[str] = list(self.tools.problems)
        # Tool names whose absence is reported already (validation skips them).
        self.reported_tools: set[str] = set(self.tools.unresolved) | self.absent.tools
        self.tool_names = [t.name for t in self.tools.specs]
        self.journey_ids = [j.id or default_journey_id(j.title) for j in document.journeys]
        self.guideline_ids = self._declared_guideline_ids()
        self.relations: list[tuple[str, RelatedDoc, Related]] = []
        # Journeys with a state or transition that could not be built (reported already).
        self.incomplete_journeys: set[str] = set()

    def _declared_guideline_ids(self) -> list[str]:
        ids = [
            g.id or default_guideline_id(g.condition, g.action) for g in self.document.guidelines
        ]
        for journey, journey_id in zip(self.document.journeys, self.journey_ids, strict=True):
            ids += [
                journey_condition_guideline_id(journey_id, i)
                for i in range(len(journey.conditions))
            ]
            ids += [
                g.id or default_guideline_id(g.condition, g.action, journey_id)
                for g in journey.guidelines
            ]
        return ids

    def compile(self) -> Agent:
        """The builder, as far as the document allows; `problems` lists what is wrong."""
        for tool in self.tools.specs:
            self.agent.register_tool(tool)
        for index, guideline in enumerate(self.document.guidelines):
            self._guideline(_item_path("guidelines", guideline, index), guideline, None)
        for index, journey in enumerate(self.document.journeys):
            self._journey(_item_path("journeys", journey, index), journey)
        self._glossary_variables_and_responses()
        for path, element, handle in self.relations:
            self._relate(path, element, handle)
        for index, relationship in enumerate(self.document.relationships):
            path = f"relationships[{index}]"
            source = self._resolve(child_path(path, "source"), relationship.source)
            target = self._resolve(child_path(path, "target"), relationship.target)
            if source and target:
                self.agent.create_relationship(relationship.kind, source, target)
        return self.agent

    def _attempt(self, path: str, make: Callable[[], T]) -> T | None:
        try:
            return make()
        except InvalidAgentDefinition as error:
            self.problems.extend(f"{path}: {problem}" for problem in error.problems)
            return None

    def _check_tools(self, path: str, names: Iterable[str]) -> None:
        """Report a reference to a tool the agent does not have, at the element that made it."""
        for name in names:
            if name in self.tool_names or name == HANDOFF_TOOL:
                continue  # (the built-in handoff action needs no declaration)
            if name not in self.tools.unresolved and name not in self.absent.tools:
                self.problems.append(
                    f"{path}: unknown tool '{name}'{_known('tools', self.tool_names, name)}"
                )
            self.reported_tools.add(name)

    # --- guidelines and journeys -------------------------------------------------------------

    def _guideline(self, path: str, doc: GuidelineDoc, journey: JourneyBuilder | None) -> None:
        self._check_tools(path, doc.tools)
        create = journey.create_guideline if journey else self.agent.create_guideline
        handle = self._attempt(
            path,
            lambda: create(
                doc.condition,
                doc.action,
                tools=doc.tools,
                description=doc.description,
                tags=doc.tags,
                criticality=doc.criticality,
                composition_mode=doc.composition_mode,
                metadata=doc.metadata,
                continuous=doc.continuous,
                customer_dependent=doc.customer_dependent,
                enabled=doc.enabled,
                priority=doc.priority,
                id=doc.id,
            ),
        )
        if handle is not None:
            self.relations.append((path, doc, handle))

    def _journey(self, path: str, doc: JourneyDoc) -> None:
        requires = [r for r in doc.requires if r in self.journey_ids]
        for required in doc.requires:
            if required not in self.journey_ids and required not in self.absent.journeys:
                self.problems.append(
                    f"{child_path(path, 'requires')}: unknown journey '{required}'"
                    f"{_known('journeys', self.journey_ids, required)}"
                )
        journey = self._attempt(
            path,
            lambda: self.agent.create_journey(
                doc.title,
                doc.conditions,
                description=doc.description,
                tags=doc.tags,
                composition_mode=doc.composition_mode,
                requires=requires,
                priority=doc.priority,
                id=doc.id,
            ),
        )
        if journey is None:
            return
        self.relations.append((path, doc, journey))
        reported_before = len(self.problems)
        for index, state in enumerate(doc.states):
            self._state(f"{path}.{_item_path('states', state, index)}", journey, state)
        declared = _declared_state_ids(doc.states)
        for index, transition in enumerate(doc.transitions):
            item = _item_path("transitions", transition, index)
            self._transition(f"{path}.{item}", journey, transition, declared)
        for index, state in enumerate(doc.states):
            if state.on_failure is not None:
                item = _item_path("states", state, index)
                self._on_failure(
                    f"{path}.{item}.on_failure", journey, declared[index + 1], state, declared
                )
        if len(self.problems) > reported_before:
            self.incomplete_journeys.add(journey.id)
        for index, guideline in enumerate(doc.guidelines):
            self._guideline(
                f"{path}.{_item_path('guidelines', guideline, index)}", guideline, journey
            )

    def _state(self, path: str, journey: JourneyBuilder, doc: StateDoc) -> None:
        kinds = [k for k in ("chat", "tool", "fork") if getattr(doc, k) not in (None, False)]
        if len(kinds) != 1:
            got = ", ".join(kinds) or "none of them"
            self.problems.append(
                f"{path}: a state has exactly one of chat, tool or fork (got {got})"
            )
            return
        if doc.tool is not None:
            named = [doc.tool] if isinstance(doc.tool, str) else doc.tool
            self._check_tools(path, named)
        self._attempt(
            path,
            lambda: journey.add_state(
                chat_state=doc.chat,
                tool_state=doc.tool,
                fork_state=doc.fork,
                action=doc.action,
                collects=doc.collects,
                customer_dependent=doc.customer_dependent,
                description=doc.description,
                composition_mode=doc.composition_mode,
                metadata=doc.metadata,
                id=doc.id,
            ),
        )

    def _on_failure(
        self,
        path: str,
        journey: JourneyBuilder,
        state_id: str,
        doc: StateDoc,
        declared: list[str],
    ) -> None:
        target_id = doc.on_failure or ""
        ends = target_id == END_STATE_NAME
        if not ends and target_id not in declared:
            self.problems.append(
                f"{path}: unknown state '{target_id}'{_known('states', declared, target_id)}"
            )
            return
        try:
            source = journey.state(state_id)
            target = END_JOURNEY if ends else journey.state(target_id)
        except KeyError:
            return  # that state failed to build, and its own problem is reported already
        self._attempt(path, lambda: source.on_failure(target))

    def _transition(
        self, path: str, journey: JourneyBuilder, doc: TransitionDoc, declared: list[str]
    ) -> None:
        ends = doc.target in (None, END_STATE_NAME)
        ends_at = [doc.source] if ends else [doc.source, doc.target or ""]
        unknown = [s for s in ends_at if s not in declared]
        for state_id in unknown:
            self.problems.append(
                f"{path}: unknown state '{state_id}'{_known('states', declared, state_id)}"
            )
        if unknown:
            return
        try:
            source = journey.state(doc.source)
            target = None if ends else journey.state(doc.target or "")
        except KeyError:
            return  # that state failed to build, and its own problem is reported already
        if target is None:
            self._attempt(
                path,
                lambda: source.transition_to(
                    state=END_JOURNEY, condition=doc.when, transition_id=doc.id
                ),
            )
        else:
            self._attempt(
                path,
                lambda: source.transition_to(
                    state=target, condition=doc.when, transition_id=doc.id
                ),
            )

    def _glossary_variables_and_responses(self) -> None:
        for term in self.document.terms:
            self.agent.create_term(term.name, term.description, term.synonyms)
        for variable in self.document.variables:
            self.agent.create_variable(variable.name, variable.description, variable.default)
        for index, response in enumerate(self.document.canned_responses):
            create = partial(
                self.agent.create_canned_response,
                response.template,
                id=response.id,
                tags=response.tags,
                signals=response.signals,
                variants=response.variants,
            )
            self._attempt(_item_path("canned_responses", response, index), create)
        for migration in self.document.migrations:
            self.agent.migrate_journey(
                migration.journey, migration.steps, from_version=migration.from_version
            )

    # --- references --------------------------------------------------------------------------

    def _relate(self, path: str, doc: RelatedDoc, source: Related) -> None:
        for kind, key in RELATION_KEYS.items():
            for index, reference in enumerate(getattr(doc, key, ())):
                target = self._resolve(f"{child_path(path, key)}[{index}]", reference)
                if target is not None:
                    self.agent.create_relationship(kind, source, target)

    def _resolve(self, path: str, reference: Reference) -> EntityRef | None:
        """An id names a guideline or a journey; `{journey: id}` says which, when it is both."""
        if isinstance(reference, str):
            kinds = [
                kind
                for kind, ids in (
                    (EntityKind.GUIDELINE, self.guideline_ids),
                    (EntityKind.JOURNEY, self.journey_ids),
                )
                if reference in ids
            ]
            if len(kinds) == 1:
                return EntityRef(kind=kinds[0], id=reference)
            if reference in self.absent.guidelines | self.absent.journeys:
                return None
            if kinds:
                self.problems.append(
                    f"{path}: '{reference}' is both a guideline and a journey; "
                    f"write {{guideline: {reference}}} or {{journey: {reference}}}"
                )
            else:
                known = [*self.guideline_ids, *self.journey_ids]
                self.problems.append(
                    f"{path}: unknown guideline or journey '{reference}'"
                    f"{_known('ids', known, reference)}"
                )
            return None
        if len(reference) != 1 or not set(reference) <= {"guideline", "journey", "tag"}:
            self.problems.append(
                f"{path}: write an id, or {{guideline: id}}, {{journey: id}} or {{tag: name}}"
            )
            return None
        kind_name, entity_id = next(iter(reference.items()))
        if kind_name == "tag":
            return EntityRef(kind=EntityKind.TAG, id=entity_id)  # validation checks it is used
        kind = EntityKind(kind_name)
        ids = self.guideline_ids if kind is EntityKind.GUIDELINE else self.journey_ids
        absent = self.absent.guidelines if kind is EntityKind.GUIDELINE else self.absent.journeys
        if entity_id in absent:
            return None
        if entity_id not in ids:
            self.problems.append(
                f"{path}: unknown {kind_name} '{entity_id}'{_known(kind_name + 's', ids, entity_id)}"
            )
            return None
        return EntityRef(kind=kind, id=entity_id)


def _declared_state_ids(states: Sequence[StateDoc]) -> list[str]:
    """State ids as the builder assigns them, so transitions resolve even past a broken state."""
    ids = [ROOT_STATE_ID]
    for state in states:
        ids.append(state.id or default_state_id(ids))
    return ids
