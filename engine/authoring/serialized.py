"""The document form of an agent — YAML or JSON — compiled through the same builder as Python, so
both forms of one agent give equal snapshots with the same version.

```yaml
agent: {id: bank, name: Bank concierge, description: …, composition_mode: fluid, config: {…}}
tools:
  - {name: check_funds, description: …, kind: general, parameters: [{name: amount, type: number}]}
guidelines:
  - id: lost_card                      # optional: derived from condition + action
    condition: The customer reports a lost or stolen card
    action: Block the card right away and tell the customer it is blocked
    tools: [block_card]
    criticality: high                  # also: description, tags, composition_mode, enabled,
    continuous: false                  #   metadata, customer_dependent: true | {customer_action,
    priority_over: [transfer]          #   agent_action}; relations: priority_over, depends_on,
                                       #   entails, disambiguates (ids, or {journey: id})
journeys:
  - id: transfer                       # optional: derived from the title
    title: Money transfer
    conditions: [The customer wants to transfer money]
    requires: [authenticate, balance]  # prerequisite journeys
    states:                            # ids default to s1, s2, … in this order
      - {id: ask, chat: Ask for the destination and amount,
         collects: {destination: str, amount: decimal>0}}
      - {id: check, tool: check_funds, action: Tell whether the funds suffice}
      - {id: decide, fork: Whether the funds suffice}
    transitions:                       # the root state is `root`; `to: END` ends the journey
      - {from: root, to: ask}
      - {from: ask, to: check, when: The customer gave the destination and the amount}
      - {from: decide, to: END, when: The funds do not suffice}
    guidelines: [ … ]                  # scoped to the journey
relationships: [{kind: priority, source: …, target: …}]   # any relationship, by reference
terms: [{name: …, description: …, synonyms: […]}]
variables: [{name: …, description: …, default: …}]
canned_responses: [{id: …, template: "Your balance is {{balance}}", tags: […], signals: […]}]
```
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from engine.authoring.builder import (
    END_JOURNEY,
    Agent,
    JourneyBuilder,
    Related,
    derived_customer_dependent,
)
from engine.authoring.canonical import (
    AGENT_LEVEL,
    journey_dependency,
    place_guideline,
)
from engine.authoring.document import (
    AgentDocument,
    GuidelineDoc,
    JourneyDoc,
    Reference,
    RelatedDoc,
    StateDoc,
    TransitionDoc,
    child_path,
    document_problems,
    element_label,
)
from engine.authoring.fields import field_shorthand
from engine.authoring.ids import (
    END_STATE_NAME,
    ROOT_STATE_ID,
    default_guideline_id,
    default_journey_id,
    default_state_id,
    default_transition_id,
)
from engine.document_text import parse_document_text
from engine.errors import InvalidAgentDefinition
from engine.model import (
    AgentSnapshot,
    CollectedField,
    CompositionMode,
    Criticality,
    CustomerDependentAction,
    EntityKind,
    EntityRef,
    Guideline,
    Journey,
    JourneyEdge,
    JourneyNode,
    NodeKind,
    Relationship,
    RelationshipKind,
)
from engine.projection import journey_condition_guideline_id

T = TypeVar("T")
Source = str | os.PathLike[str] | Mapping[str, Any]

# Document key of each relationship kind, on the element that is the relationship's source.
_RELATION_KEYS: dict[RelationshipKind, str] = {
    RelationshipKind.PRIORITY: "priority_over",
    RelationshipKind.DEPENDENCY: "depends_on",
    RelationshipKind.ENTAILMENT: "entails",
    RelationshipKind.DISAMBIGUATION: "disambiguates",
}


def load_agent(source: Source) -> AgentSnapshot:
    """Read an agent document (a `.yaml`/`.yml`/`.json` path, or an already parsed mapping),
    compile and validate it. Raises `InvalidAgentDefinition` listing every problem."""
    return agent_from_document(source).build()


def agent_from_document(source: Source) -> Agent:
    """The builder an agent document compiles to, before `build()`: extend it in Python (add
    tools, guidelines) if some of the agent is better written in code."""
    raw = _read(source)
    try:
        document = AgentDocument.model_validate(raw)
    except ValidationError as error:
        raise InvalidAgentDefinition(document_problems(error, raw)) from None
    return _DocumentCompiler(document).compile()


def _read(source: Source) -> Mapping[str, Any]:
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise InvalidAgentDefinition([f"{path}: unsupported file type; use .yaml, .yml or .json"])
    # Size, alias and nesting limits apply to files as to API bodies (document_text).
    data = parse_document_text(
        path.read_bytes(), "json" if suffix == ".json" else "yaml", str(path)
    )
    if not isinstance(data, Mapping):
        raise InvalidAgentDefinition([f"{path}: expected a mapping with an 'agent' section"])
    return data


# --------------------------------------------------------------------------------------------------
# Document → builder


def _known(kind: str, names: Iterable[str], wanted: str) -> str:
    names = sorted(set(names))
    close = difflib.get_close_matches(wanted, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"{hint} (known {kind}: {', '.join(names) or 'none'})"


def _item_path(section: str, item: Any, index: int) -> str:
    """Named like the document's own error paths: by id (or name) when given, else position."""
    label = {key: getattr(item, key, None) for key in ("id", "name")}
    return f"{section}[{element_label(label, index)}]"


class _DocumentCompiler:
    """Replays a document as builder calls. References (tools, states, journeys, guidelines) are
    resolved against the document first, so a typo is reported at the element that made it."""

    def __init__(self, document: AgentDocument):
        self.document = document
        header = document.agent
        self.agent = Agent(
            id=header.id,
            name=header.name,
            description=header.description,
            composition_mode=header.composition_mode,
            config=header.config,
        )
        self.problems: list[str] = []
        self.tool_names = [t.name for t in document.tools]
        self.journey_ids = [j.id or default_journey_id(j.title) for j in document.journeys]
        self.guideline_ids = self._declared_guideline_ids()
        self.relations: list[tuple[str, RelatedDoc, Related]] = []

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
        for tool in self.document.tools:
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
        if self.problems:
            raise InvalidAgentDefinition(self.problems)
        return self.agent

    def _attempt(self, path: str, make: Callable[[], T]) -> T | None:
        try:
            return make()
        except InvalidAgentDefinition as error:
            self.problems.extend(f"{path}: {problem}" for problem in error.problems)
            return None

    def _check_tools(self, path: str, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.tool_names:
                self.problems.append(
                    f"{path}: unknown tool '{name}'{_known('tools', self.tool_names, name)}"
                )

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
                id=doc.id,
            ),
        )
        if handle is not None:
            self.relations.append((path, doc, handle))

    def _journey(self, path: str, doc: JourneyDoc) -> None:
        for required in doc.requires:
            if required not in self.journey_ids:
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
                requires=doc.requires,
                id=doc.id,
            ),
        )
        if journey is None:
            return
        self.relations.append((path, doc, journey))
        for index, state in enumerate(doc.states):
            self._state(f"{path}.{_item_path('states', state, index)}", journey, state)
        declared = _declared_state_ids(doc.states)
        for index, transition in enumerate(doc.transitions):
            item = _item_path("transitions", transition, index)
            self._transition(f"{path}.{item}", journey, transition, declared)
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
            self._check_tools(path, [doc.tool] if isinstance(doc.tool, str) else doc.tool)
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
            )
            self._attempt(_item_path("canned_responses", response, index), create)

    # --- references --------------------------------------------------------------------------

    def _relate(self, path: str, doc: RelatedDoc, source: Related) -> None:
        for kind, key in _RELATION_KEYS.items():
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
        if len(reference) != 1 or not set(reference) <= {"guideline", "journey"}:
            self.problems.append(f"{path}: write an id, or {{guideline: id}} or {{journey: id}}")
            return None
        kind_name, entity_id = next(iter(reference.items()))
        kind = EntityKind(kind_name)
        ids = self.guideline_ids if kind is EntityKind.GUIDELINE else self.journey_ids
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


# --------------------------------------------------------------------------------------------------
# Snapshot → document


def dump_agent(snapshot: AgentSnapshot) -> dict[str, Any]:
    """The document form of a snapshot; `load_agent(dump_agent(s)) == s` for any built snapshot.
    Values are plain (str, list, dict, …): ready for `yaml.safe_dump` or `json.dumps`."""
    return _DocumentWriter(snapshot).document()


def _plain(model: Any, **exclude: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", exclude_defaults=True, **exclude)
    return dumped


class _DocumentWriter:
    def __init__(self, snapshot: AgentSnapshot):
        self.snapshot = snapshot
        self.journeys = {j.id: j for j in snapshot.journeys}
        self.relationship_set = set(snapshot.relationships)
        self.guideline_ids = {g.id for g in snapshot.guidelines}
        self.placements = [
            place_guideline(g, self.journeys, self.relationship_set) for g in snapshot.guidelines
        ]
        self.unwritten = list(snapshot.relationships)  # what no element carries goes top-level

    def document(self) -> dict[str, Any]:
        s = self.snapshot
        doc: dict[str, Any] = {"agent": self._header()}
        if s.tools:
            doc["tools"] = [_plain(t) for t in s.tools]
        guidelines = [
            self._guideline(g)
            for g, placement in zip(s.guidelines, self.placements, strict=True)
            if placement == AGENT_LEVEL
        ]
        if guidelines:
            doc["guidelines"] = guidelines
        if s.journeys:
            doc["journeys"] = [self._journey(j) for j in s.journeys]
        for key, items in (("terms", s.terms), ("variables", s.variables)):
            if items:
                doc[key] = [_plain(item) for item in items]
        if s.canned_responses:
            doc["canned_responses"] = [_plain(r) for r in s.canned_responses]
        if self.unwritten:
            doc["relationships"] = [
                {
                    "kind": r.kind.value,
                    "source": self._reference(r.source),
                    "target": self._reference(r.target),
                }
                for r in self.unwritten
            ]
        return doc

    def _header(self) -> dict[str, Any]:
        s = self.snapshot
        header: dict[str, Any] = {"id": s.id, "name": s.name}
        if s.description:
            header["description"] = s.description
        if s.config.composition_mode is not CompositionMode.FLUID:
            header["composition_mode"] = s.config.composition_mode.value
        config = _plain(s.config, exclude={"composition_mode"})
        if config:
            header["config"] = config
        return header

    # --- elements ----------------------------------------------------------------------------

    def _guideline(self, g: Guideline, scope: Journey | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": g.id, "condition": g.condition}
        if g.action is not None:
            doc["action"] = g.action
        if g.description is not None:
            doc["description"] = g.description
        if g.tools:
            doc["tools"] = list(g.tools)
        tags = g.tags[1:] if scope else g.tags  # a scoped guideline's first tag is its journey's
        if tags:
            doc["tags"] = list(tags)
        if g.criticality is not Criticality.MEDIUM:
            doc["criticality"] = g.criticality.value
        if g.composition_mode is not None:
            doc["composition_mode"] = g.composition_mode.value
        metadata = dict(g.metadata)
        if metadata.get("continuous") is True:
            doc["continuous"] = metadata.pop("continuous")
        dependent = _guideline_customer_dependent(
            g.action, metadata.get("customer_dependent_action_data")
        )
        if dependent is not None:
            doc["customer_dependent"] = dependent
            metadata.pop("customer_dependent_action_data")
        if not g.enabled:
            doc["enabled"] = False
        if metadata:
            doc["metadata"] = metadata
        implicit = journey_dependency(g.id, scope.id) if scope else None
        doc.update(self._relations(EntityRef(kind=EntityKind.GUIDELINE, id=g.id), implicit))
        return doc

    def _journey(self, journey: Journey) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": journey.id, "title": journey.title}
        if journey.description:
            doc["description"] = journey.description
        doc["conditions"] = list(journey.conditions)
        if journey.tags:
            doc["tags"] = list(journey.tags)
        if journey.composition_mode is not None:
            doc["composition_mode"] = journey.composition_mode.value
        if journey.requires:
            doc["requires"] = list(journey.requires)
        doc.update(self._relations(EntityRef(kind=EntityKind.JOURNEY, id=journey.id), None))
        doc["states"] = [_state(n) for n in journey.nodes if n.id != journey.root_id]
        doc["transitions"] = _transitions(journey.edges)
        scoped = [
            self._guideline(g, journey)
            for g, placement in zip(self.snapshot.guidelines, self.placements, strict=True)
            if placement.journey_id == journey.id and not placement.is_condition
        ]
        if scoped:
            doc["guidelines"] = scoped
        return doc

    def _relations(self, source: EntityRef, implicit: Relationship | None) -> dict[str, Any]:
        relations: dict[str, list[Any]] = {}
        for r in self.snapshot.relationships:
            if r.source != source or r == implicit or r not in self.unwritten:
                continue
            if source.kind is EntityKind.JOURNEY and r.kind is RelationshipKind.DISAMBIGUATION:
                continue  # a journey has no `disambiguates`; written top-level
            relations.setdefault(_RELATION_KEYS[r.kind], []).append(self._reference(r.target))
            self.unwritten.remove(r)
        if implicit in self.unwritten:
            self.unwritten.remove(implicit)
        return relations

    def _reference(self, ref: EntityRef) -> Reference:
        in_guidelines, in_journeys = ref.id in self.guideline_ids, ref.id in self.journeys
        unambiguous = (
            (in_guidelines and not in_journeys)
            if ref.kind is EntityKind.GUIDELINE
            else (in_journeys and not in_guidelines)
        )
        return ref.id if unambiguous else {ref.kind.value: ref.id}


def _guideline_customer_dependent(action: str | None, raw: Any) -> bool | dict[str, Any] | None:
    """`true` when it is what the builder derives, the explicit texts otherwise; None when the
    metadata entry is not one the builder would have written (it then stays in `metadata`)."""
    if not isinstance(raw, Mapping):
        return None
    try:
        dependent = CustomerDependentAction.model_validate(raw)
    except ValidationError:
        return None
    if dependent.model_dump(mode="json") != raw or not dependent.is_customer_dependent:
        return None
    if dependent == derived_customer_dependent(action, ()):
        return True
    return _plain(dependent)


def _state(node: JourneyNode) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": node.id}
    description = node.description
    if node.kind is NodeKind.CHAT:
        doc["chat"] = node.action
        if node.collects:
            doc["collects"] = _collects(node.collects)
        dependent = _state_customer_dependent(node)
        if dependent is not None:
            doc["customer_dependent"] = dependent
    elif node.kind is NodeKind.TOOL:
        doc["tool"] = node.tools[0] if len(node.tools) == 1 else list(node.tools)
        if node.action is not None:
            doc["action"] = node.action
    else:
        doc["fork"] = True if description is None else description
        description = None
    if description is not None:
        doc["description"] = description
    if node.composition_mode is not None:
        doc["composition_mode"] = node.composition_mode.value
    if node.metadata:
        doc["metadata"] = dict(node.metadata)
    return doc


def _state_customer_dependent(node: JourneyNode) -> bool | dict[str, Any] | None:
    """Omitted when it is what the builder derives by default; `true`/`false` when forcing it."""
    derived = derived_customer_dependent(node.action, node.collects)
    default = derived if node.collects else None
    if node.customer_dependent == default:
        return None
    if node.customer_dependent is None:
        return False
    if node.customer_dependent == derived:
        return True
    return _plain(node.customer_dependent)


def _collects(fields: Sequence[CollectedField]) -> dict[str, Any] | list[dict[str, Any]]:
    if len({f.name for f in fields}) != len(fields):
        return [_plain(f) for f in fields]  # duplicate names cannot be mapping keys
    return {f.name: field_shorthand(f) or _plain(f, exclude={"name"}) for f in fields}


def _transitions(edges: Sequence[JourneyEdge]) -> list[dict[str, Any]]:
    written: list[dict[str, Any]] = []
    taken: list[str] = []
    for edge in edges:
        doc: dict[str, Any] = {}
        if edge.id != default_transition_id(edge.source, edge.target, taken):
            doc["id"] = edge.id
        doc["from"] = edge.source
        doc["to"] = END_STATE_NAME if edge.target is None else edge.target
        if edge.condition is not None:
            doc["when"] = edge.condition
        written.append(doc)
        taken.append(edge.id)
    return written
