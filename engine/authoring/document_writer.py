"""Snapshot → document: the document form of a built agent, written the way an author would.

What the builder derives by itself (default transition ids, customer-dependent texts, a scoped
guideline's journey tag and dependency) is left out: `load_agent(dump_agent(s)) == s`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from engine.agent_config import CompositionMode
from engine.authoring.canonical import AGENT_LEVEL, journey_dependency, place_guideline
from engine.authoring.customer_dependent import derived_customer_dependent
from engine.authoring.document import RELATION_KEYS, Reference
from engine.authoring.fields import field_shorthand
from engine.authoring.ids import END_STATE_NAME, default_transition_id
from engine.model import (
    AgentSnapshot,
    CollectedField,
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
        if s.migrations:
            doc["migrations"] = [_plain(m) for m in s.migrations]
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
        if g.priority != 0:
            doc["priority"] = g.priority
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
        if journey.priority != 0:
            doc["priority"] = journey.priority
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
            relations.setdefault(RELATION_KEYS[r.kind], []).append(self._reference(r.target))
            self.unwritten.remove(r)
        if implicit in self.unwritten:
            self.unwritten.remove(implicit)
        return relations

    def _reference(self, ref: EntityRef) -> Reference:
        if ref.kind is EntityKind.TAG:
            return {"tag": ref.id}
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
        if node.on_failure is not None:
            doc["on_failure"] = node.on_failure
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
