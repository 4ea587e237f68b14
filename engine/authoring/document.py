"""The schema of the document form (YAML / JSON) of an agent, and readable errors for it.

Every section rejects unknown keys; an error names the element by its path, with list items named
by their `id` (or `name`) when they have one: `journeys[transfer].states[check].tool: …`.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from inspect import isclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.agent_config import AgentConfig, CompositionMode
from engine.model import ContextVariable, Criticality, JourneyMigration, RelationshipKind, Term
from engine.tools.spec import ToolSpec

# An id of a guideline or a journey, `{guideline: id}` / `{journey: id}` when the id is both, or
# `{tag: name}`: every guideline and journey carrying the tag.
Reference = str | dict[str, str]

# Document key of each relationship kind, on the element that is the relationship's source.
RELATION_KEYS: dict[RelationshipKind, str] = {
    RelationshipKind.PRIORITY: "priority_over",
    RelationshipKind.DEPENDENCY: "depends_on",
    RelationshipKind.DEPENDENCY_ANY: "depends_on_any",
    RelationshipKind.ENTAILMENT: "entails",
    RelationshipKind.DISAMBIGUATION: "disambiguates",
}


class _Element(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RelatedDoc(_Element):
    priority_over: tuple[Reference, ...] = ()
    depends_on: tuple[Reference, ...] = ()
    depends_on_any: tuple[Reference, ...] = ()  # active while any one of these is active
    entails: tuple[Reference, ...] = ()


class GuidelineDoc(RelatedDoc):
    id: str | None = None
    condition: str
    action: str | None = None
    description: str | None = None
    tools: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    criticality: Criticality = Criticality.MEDIUM
    composition_mode: CompositionMode | None = None
    continuous: bool = False
    customer_dependent: bool | dict[str, Any] | None = None
    enabled: bool = True
    priority: int = Field(default=0, strict=True)  # numeric priority; higher wins
    metadata: dict[str, Any] = Field(default_factory=dict)
    disambiguates: tuple[Reference, ...] = ()


class StateDoc(_Element):
    id: str | None = None
    chat: str | None = None
    tool: str | tuple[str, ...] | None = None
    fork: str | bool | None = None
    action: str | None = None
    collects: dict[str, Any] | tuple[dict[str, Any], ...] | None = None
    customer_dependent: bool | dict[str, Any] | None = None
    description: str | None = None
    composition_mode: CompositionMode | None = None
    on_failure: str | None = None  # a tool state's failure transition: a state id or END
    metadata: dict[str, Any] = Field(default_factory=dict)


class TransitionDoc(_Element):
    id: str | None = None
    source: str = Field(alias="from")
    target: str | None = Field(alias="to")  # "END" or null ends the journey
    when: str | None = None


class JourneyDoc(RelatedDoc):
    id: str | None = None
    title: str
    description: str = ""
    conditions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    composition_mode: CompositionMode | None = None
    requires: tuple[str, ...] = ()
    priority: int = Field(default=0, strict=True)  # numeric priority; higher wins
    states: tuple[StateDoc, ...] = ()
    transitions: tuple[TransitionDoc, ...] = ()
    guidelines: tuple[GuidelineDoc, ...] = ()


class RelationshipDoc(_Element):
    kind: RelationshipKind
    source: Reference
    target: Reference


class CannedResponseDoc(_Element):
    id: str | None = None
    template: str  # in the agent's default language
    tags: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()
    # the same reply in the other languages the agent serves: {es: "…", zh-Hans: "…"}
    variants: dict[str, str] = Field(default_factory=dict)


class AgentHeaderDoc(_Element):
    id: str
    name: str
    description: str = ""
    composition_mode: CompositionMode | None = None
    # the languages the agent serves (the first is its default); also `config.languages`
    languages: tuple[str, ...] | None = None
    # the engine's own lines as the agent words them: {es: {confirmation: "…"}}
    # (docs/languages.md); also `config.messages`
    messages: dict[str, dict[str, str]] | None = None
    config: AgentConfig = Field(default_factory=AgentConfig)


class AgentDocument(_Element):
    """The whole document: one agent and everything it is made of."""

    agent: AgentHeaderDoc
    # A tool's name refers to its `@tool` function; a full declaration must match it when the
    # registry is known (`engine.authoring.tool_declarations`).
    tools: tuple[ToolSpec | str, ...] = ()
    guidelines: tuple[GuidelineDoc, ...] = ()
    journeys: tuple[JourneyDoc, ...] = ()
    relationships: tuple[RelationshipDoc, ...] = ()
    terms: tuple[Term, ...] = ()
    variables: tuple[ContextVariable, ...] = ()
    canned_responses: tuple[CannedResponseDoc, ...] = ()
    # How sessions in a journey on an earlier version move to this one (`engine.versioning.pinning`).
    migrations: tuple[JourneyMigration, ...] = ()


# --------------------------------------------------------------------------------------------------
# Paths and error messages


def element_label(item: Any, index: int) -> str:
    """How a list item is named in a path: its id or name, else its position."""
    if isinstance(item, Mapping):
        for key in ("id", "name"):
            value = item.get(key)
            if isinstance(value, str) and value:
                return value
    return str(index)


def child_path(parent: str, key: str) -> str:
    """`child_path("journeys[transfer]", "requires")` → `"journeys[transfer].requires"`."""
    return f"{parent}.{key}" if parent else key


def _is_list(node: Any) -> bool:
    return isinstance(node, Sequence) and not isinstance(node, str | bytes)


def _locate(raw: Any, loc: Sequence[int | str]) -> tuple[str, tuple[int | str, ...]]:
    """Follow an error location through the raw document: (path of what exists, the rest).
    The rest holds a missing key, or union-member tags that are not part of the document."""
    path, node = "", raw
    for consumed, key in enumerate(loc):
        if _is_list(node) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
            path += f"[{element_label(node, key)}]"
        elif isinstance(node, Mapping) and isinstance(key, str) and key in node:
            node = node[key]
            path = child_path(path, key)
        else:
            return path or "document", tuple(loc[consumed:])
    return path or "document", ()


def _step_into(annotation: Any, key: int | str) -> Any:
    candidates = (
        get_args(annotation)
        if get_origin(annotation) in (Union, types.UnionType)
        else (annotation,)
    )
    for candidate in candidates:
        origin = get_origin(candidate)
        if isclass(candidate) and issubclass(candidate, BaseModel) and isinstance(key, str):
            for name, info in candidate.model_fields.items():
                if key in (name, info.alias):
                    return info.annotation
        elif origin in (list, tuple) and isinstance(key, int):
            return get_args(candidate)[0]
        elif origin is dict and isinstance(key, str):
            return get_args(candidate)[1]
    return None


def _allowed_keys(loc: Sequence[int | str]) -> list[str]:
    """The keys the element at `loc` accepts, read from the document schema."""
    annotation: Any = AgentDocument
    for key in loc:
        annotation = _step_into(annotation, key)
    if isclass(annotation) and issubclass(annotation, BaseModel):
        return [info.alias or name for name, info in annotation.model_fields.items()]
    return []


def _unknown_key(key: str, loc: Sequence[int | str]) -> str:
    allowed = _allowed_keys(loc)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    listed = f" (allowed: {', '.join(allowed)})" if allowed else ""
    return f"unknown key '{key}'{hint}{listed}"


_EXPECTED = {
    "string_type": "a text",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "none_required": "nothing",
}


def _node_at(raw: Any, path: str) -> Any:
    """The raw element a problem path names (`journeys[transfer].states[check]`), if any."""
    node = raw
    for part in path.replace("[", ".[").split("."):
        if not part or part == "document":
            continue
        if part.startswith("[") and _is_list(node):
            label = part[1:-1]
            node = next(
                (item for i, item in enumerate(node) if element_label(item, i) == label), None
            )
        elif isinstance(node, Mapping):
            node = node.get(part)
        else:
            return None
    return node


def document_problems(error: ValidationError, raw: Any) -> list[str]:
    """Turn pydantic's errors into one line per element path, alternatives of a union merged:
    `journeys[transfer].states[check].tool: expected a text or a list`."""
    found: dict[str, tuple[list[str], list[str]]] = {}  # path → (expectations, other messages)
    for detail in error.errors():
        loc = tuple(detail["loc"])
        if detail["type"] == "extra_forbidden":
            path, _ = _locate(raw, loc[:-1])
            found.setdefault(path, ([], []))[1].append(_unknown_key(str(loc[-1]), loc[:-1]))
            continue
        path, rest = _locate(raw, loc)
        expectations, messages = found.setdefault(path, ([], []))
        if detail["type"] == "missing":
            messages.append(f"missing required key '{rest[0]}'")
        elif detail["type"] in _EXPECTED:
            expectations.append(_EXPECTED[detail["type"]])
        else:
            messages.append(detail["msg"][:1].lower() + detail["msg"][1:])
    lines: list[str] = []
    for path, (expectations, messages) in found.items():
        if messages and isinstance(_node_at(raw, path), Mapping):
            # A mapping that fails as a model also fails as the union's other members (a tool
            # given as a mapping is not its name): the model's own errors are the useful ones.
            expectations = []
        if expectations:
            lines.append(f"{path}: expected {' or '.join(dict.fromkeys(expectations))}")
        lines.extend(f"{path}: {m}" for m in dict.fromkeys(messages))
    return lines
