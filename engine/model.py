"""The behavior model: what an agent is made of.

Everything here is an immutable pydantic model: guidelines, journeys (their steps, transitions and
the fields a step collects), relationships between them, glossary terms, context variables and
canned responses. An `AgentSnapshot` holds them all, with the signatures of the agent's tools
(`engine.tools.spec`) and its run-time settings (`engine.agent_config`); it is the compiled,
validated and versionable form of an agent — the unit that is published to storage and loaded by a
turn. Authoring (the Python builder and the YAML/JSON form in `engine.authoring`) always ends in a
snapshot.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

# Part of the authoring API as `engine.model.<name>` (the builder takes them, the docs name them),
# so they stay importable from here too.
from engine.agent_config import AgentConfig as AgentConfig
from engine.agent_config import CompositionMode as CompositionMode
from engine.language.tags import normalize_tag
from engine.tools.spec import ToolKind as ToolKind
from engine.tools.spec import ToolParameter as ToolParameter
from engine.tools.spec import ToolSpec as ToolSpec
from engine.values.types import ValueShape, compiled_pattern, currency_code

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Criticality(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class GuidelineKind(StrEnum):
    """Run-time kinds, decided from explicit fields exactly as the seed's table says."""

    OBSERVATIONAL = "observational"  # no action
    ACTIONABLE = "actionable"  # action, applied at most once unless the context changes
    CONTINUOUS = "continuous"  # metadata.continuous: re-applied whenever the condition holds
    CUSTOMER_DEPENDENT = "customer_dependent"  # complete only once the customer supplied the data


class CustomerDependentAction(BaseModel):
    """What each side must do for a customer-dependent guideline or journey step to be complete."""

    model_config = _FROZEN
    is_customer_dependent: bool = True
    customer_action: str
    agent_action: str


# --------------------------------------------------------------------------------------------------
# Guidelines


class Guideline(BaseModel):
    """A natural-language `condition → action` rule. `action=None` makes it observational."""

    model_config = _FROZEN
    id: str
    condition: str
    action: str | None = None
    description: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    criticality: Criticality = Criticality.MEDIUM
    composition_mode: CompositionMode | None = None
    enabled: bool = True
    tools: tuple[str, ...] = ()  # names of tools this guideline allows the agent to call
    # Numeric priority: when entities of different priorities hold, only the highest stay
    # (`engine.relations`). A journey's own guidelines take the journey's priority.
    priority: int = Field(default=0, strict=True)

    @property
    def kind(self) -> GuidelineKind:
        if self.action is None:
            return GuidelineKind.OBSERVATIONAL
        if self.metadata.get("continuous", False):
            return GuidelineKind.CONTINUOUS
        if self.customer_dependent is not None:
            return GuidelineKind.CUSTOMER_DEPENDENT
        return GuidelineKind.ACTIONABLE

    @property
    def customer_dependent(self) -> CustomerDependentAction | None:
        raw = self.metadata.get("customer_dependent_action_data")
        if not raw:
            return None
        data = CustomerDependentAction.model_validate(raw)
        return data if data.is_customer_dependent else None

    @property
    def journey_node(self) -> JourneyNodeRef | None:
        """Set on guidelines projected from a journey node (see `engine.matching.projection`)."""
        raw = self.metadata.get("journey_node")
        return JourneyNodeRef.model_validate(raw) if raw else None

    @property
    def condition_of_journey(self) -> str | None:
        """Set on a journey's activation-condition guidelines: the journey they activate."""
        owner = self.metadata.get(JOURNEY_CONDITION_KEY)
        return owner if isinstance(owner, str) else None

    @property
    def scoped_journey_id(self) -> str | None:
        """The journey this guideline belongs to: a journey-scoped, projected or trigger guideline."""
        for tag in self.tags:
            if tag.startswith(JOURNEY_TAG_PREFIX):
                return tag[len(JOURNEY_TAG_PREFIX) :]
        return None


JOURNEY_TAG_PREFIX = "journey:"
JOURNEY_CONDITION_KEY = "journey_condition"  # metadata key of a journey's condition guidelines
AGENT_TAG_PREFIX = "agent:"


def journey_tag(journey_id: str) -> str:
    return f"{JOURNEY_TAG_PREFIX}{journey_id}"


def agent_tag(agent_id: str) -> str:
    return f"{AGENT_TAG_PREFIX}{agent_id}"


class JourneyNodeRef(BaseModel):
    """`metadata.journey_node` of a projected guideline: where it sits in its journey's graph."""

    model_config = _FROZEN
    journey_id: str
    node_id: str
    kind: NodeKind
    follow_ups: tuple[str, ...] = ()  # guideline ids of the nodes reachable in one transition
    tools: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------------
# Journeys


class NodeKind(StrEnum):
    CHAT = "chat"  # the agent says or asks something
    TOOL = "tool"  # the engine calls one or more tools
    FORK = "fork"  # no action: only chooses between outgoing conditions


FieldType = Literal["str", "int", "decimal", "bool", "date", "datetime", "time", "money", "enum"]


class CollectedField(BaseModel):
    """A typed value a chat step collects from the customer, stored on the session once given
    (the types are `engine.values.types`')."""

    model_config = _FROZEN
    name: str
    type: FieldType = "str"
    description: str = ""
    choices: tuple[str, ...] = ()  # for type "enum"
    gt: float | None = None  # exclusive lower bound for numbers ("amount > 0")
    ge: float | None = None
    le: float | None = None
    required: bool = True
    # A secret (a password): passed to the tool that needs it in the turn it is given, masked in
    # everything stored, returned by the API or shown to the model later (`engine.privacy.secrets`).
    secret: bool = False
    # `money`: the currency of an amount the customer gives without naming one.
    currency: str | None = None
    # `str`: the shape of the whole value (an account id: `\d{7,12}`), a regular expression;
    # the customer's words are read for exactly that shape.
    pattern: str | None = None

    @field_validator("currency")
    @classmethod
    def _currency_code(cls, value: str | None) -> str | None:
        return currency_code(value)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return compiled_pattern(value)

    @property
    def shape(self) -> ValueShape:
        """What the field holds, as `engine.values` reads it."""
        return ValueShape(
            kind=self.type, choices=self.choices, pattern=self.pattern, currency=self.currency
        )


class JourneyNode(BaseModel):
    model_config = _FROZEN
    id: str
    kind: NodeKind
    action: str | None = None  # chat instruction, or the instruction that goes with a tool step
    tools: tuple[str, ...] = ()
    description: str | None = None
    customer_dependent: CustomerDependentAction | None = None
    collects: tuple[CollectedField, ...] = ()
    composition_mode: CompositionMode | None = None
    # A tool step whose tool failed goes here (a state id, or END_OF_JOURNEY to end the journey
    # without completing it) instead of staying at the step.
    on_failure: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


END_OF_JOURNEY = "END"  # the target of a failure transition that ends the journey


class JourneyEdge(BaseModel):
    """A transition. `target=None` ends the journey (it completes when this edge is taken)."""

    model_config = _FROZEN
    id: str
    source: str
    target: str | None
    condition: str | None = None


class Journey(BaseModel):
    """A state graph a conversation walks through. Its conditions compile to observational
    guidelines (`condition_guideline_ids`); its root is an action-less entry node."""

    model_config = _FROZEN
    id: str
    title: str
    description: str = ""
    conditions: tuple[str, ...] = ()
    condition_guideline_ids: tuple[str, ...] = ()
    root_id: str
    nodes: tuple[JourneyNode, ...]
    edges: tuple[JourneyEdge, ...] = ()
    tags: tuple[str, ...] = ()
    composition_mode: CompositionMode | None = None
    requires: tuple[str, ...] = ()  # prerequisite journeys that must complete first in a session
    # numeric priority of the journey, its steps and its guidelines (`engine.relations`)
    priority: int = Field(default=0, strict=True)

    def node(self, node_id: str) -> JourneyNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"journey {self.id!r} has no node {node_id!r}")

    def outgoing(self, node_id: str) -> list[JourneyEdge]:
        return [e for e in self.edges if e.source == node_id]

    def incoming(self, node_id: str) -> list[JourneyEdge]:
        return [e for e in self.edges if e.target == node_id]


# --------------------------------------------------------------------------------------------------
# Relationships


class RelationshipKind(StrEnum):
    PRIORITY = "priority"  # source active → target suppressed
    DEPENDENCY = "dependency"  # source active only if target is active
    # source active only if ANY of its dependency_any targets is active (one OR-group per source)
    DEPENDENCY_ANY = "dependency_any"
    ENTAILMENT = "entailment"  # source active → target active too
    DISAMBIGUATION = "disambiguation"  # source observation groups targets that may be confused


class EntityKind(StrEnum):
    GUIDELINE = "guideline"
    JOURNEY = "journey"
    # Every guideline and journey carrying the tag. As a source: any member that holds acts. As
    # a target: all members (priority suppresses all, entailment adds all, a dependency needs
    # all of them to hold; a dependency_any needs one).
    TAG = "tag"


class EntityRef(BaseModel):
    model_config = _FROZEN
    kind: EntityKind
    id: str

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.id}"


class Relationship(BaseModel):
    model_config = _FROZEN
    kind: RelationshipKind
    source: EntityRef
    target: EntityRef


# --------------------------------------------------------------------------------------------------
# Glossary, variables, canned responses


class Term(BaseModel):
    model_config = _FROZEN
    name: str
    description: str
    synonyms: tuple[str, ...] = ()


class ContextVariable(BaseModel):
    """A named fact about the customer or world; values live per customer on the session side."""

    model_config = _FROZEN
    name: str
    description: str = ""
    default: Any = None


class CannedResponse(BaseModel):
    """An approved reply template. `{{field}}` placeholders are filled from tool data, fragments,
    collected values and context variables.

    `template` is written in the agent's default language; `variants` holds the same reply in
    the other languages it serves (language tag → text), sent to a session in that language."""

    model_config = _FROZEN
    id: str
    template: str
    tags: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()  # example phrasings that help choose it
    variants: dict[str, str] = Field(default_factory=dict)

    @field_validator("variants")
    @classmethod
    def _variant_languages(cls, value: dict[str, str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for tag, text in value.items():
            key = normalize_tag(tag)
            if key in out:
                raise ValueError(f"variants: the language {key} is given twice ({tag!r})")
            out[key] = text
        return out

    @property
    def fields(self) -> tuple[str, ...]:
        return fields_of(self.template)

    def text_in(self, language: str) -> str:
        """The reply in `language`: its variant, else the template (the default language's)."""
        return self.variants.get(language, self.template)


def fields_of(text: str) -> tuple[str, ...]:
    """The `{{field}}` placeholders of a template, in order, each once."""
    return tuple(dict.fromkeys(re.findall(r"{{\s*([\w.]+)\s*}}", text)))


# --------------------------------------------------------------------------------------------------
# Snapshot


class JourneyMigration(BaseModel):
    """How sessions that are in `journey` on an earlier version continue on this one.

    Without a migration, a session with a journey in flight stays on the version it started on
    (pinned) until no journey is in flight. With one, it moves to this version at its next turn:
    each old step id in `steps` is renamed to its new id (steps not listed keep their id, and
    must exist here). `from_version` limits it to sessions pinned to that one version."""

    model_config = _FROZEN
    journey: str
    steps: dict[str, str] = Field(default_factory=dict)  # old step id → step id in this version
    from_version: str | None = None

    def applies_to(self, version: str) -> bool:
        return self.from_version is None or self.from_version == version


def _private(model: BaseModel) -> dict[str, Any]:
    """A model's private attributes (set by pydantic for every model that declares one)."""
    private = model.__pydantic_private__
    assert private is not None
    return private


class AgentSnapshot(BaseModel):
    """The compiled agent. Built by `engine.authoring`; validated by `engine.validation.agent`."""

    model_config = _FROZEN
    id: str
    name: str
    description: str = ""
    version: str = ""  # content hash unless set explicitly; see `with_content_version`
    config: AgentConfig = Field(default_factory=AgentConfig)
    guidelines: tuple[Guideline, ...] = ()
    journeys: tuple[Journey, ...] = ()
    relationships: tuple[Relationship, ...] = ()
    terms: tuple[Term, ...] = ()
    variables: tuple[ContextVariable, ...] = ()
    canned_responses: tuple[CannedResponse, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    migrations: tuple[JourneyMigration, ...] = ()  # see `engine.versioning.pinning`

    _guideline_index: dict[str, Guideline] = PrivateAttr(default_factory=dict)
    _journey_index: dict[str, Journey] = PrivateAttr(default_factory=dict)
    _tool_index: dict[str, ToolSpec] = PrivateAttr(default_factory=dict)

    def model_post_init(self, __context: Any) -> None:
        self._guideline_index = {g.id: g for g in self.guidelines}
        self._journey_index = {j.id: j for j in self.journeys}
        self._tool_index = {t.name: t for t in self.tools}

    # The lookups below read the indexes from `__pydantic_private__` directly: reading a private
    # attribute by name goes through pydantic's `__getattr__` (≈ 1–4 µs, against 0.2), and a turn
    # at 5,000 guidelines makes hundreds of these lookups.
    def guideline(self, guideline_id: str) -> Guideline:
        return _private(self)["_guideline_index"][guideline_id]  # type: ignore[no-any-return]

    def has_guideline(self, guideline_id: str) -> bool:
        return guideline_id in _private(self)["_guideline_index"]

    def journey(self, journey_id: str) -> Journey:
        return _private(self)["_journey_index"][journey_id]  # type: ignore[no-any-return]

    def has_journey(self, journey_id: str) -> bool:
        return journey_id in _private(self)["_journey_index"]

    def tool(self, name: str) -> ToolSpec:
        return _private(self)["_tool_index"][name]  # type: ignore[no-any-return]

    def has_tool(self, name: str) -> bool:
        return name in _private(self)["_tool_index"]

    def migration_for(self, journey_id: str, from_version: str) -> JourneyMigration | None:
        """The migration this version declares for sessions in `journey_id` on `from_version`."""
        for migration in self.migrations:
            if migration.journey == journey_id and migration.applies_to(from_version):
                return migration
        return None

    def content_hash(self) -> str:
        payload = self.model_dump(mode="json", exclude={"version"})
        # Fields added later are left out at their defaults, so an agent that does not use them
        # keeps the version it was published under.
        if not payload["migrations"]:
            del payload["migrations"]
        for entity in (*payload["guidelines"], *payload["journeys"]):
            if entity.get("priority") == 0:
                del entity["priority"]
        for tool in payload["tools"]:
            _drop_defaults(tool, _TOOL_FIELDS_ADDED_LATER)
            for parameter in tool["parameters"]:
                _drop_defaults(parameter, _PARAMETER_FIELDS_ADDED_LATER)
                if parameter.get("items") == "string":  # an array's items before items existed
                    del parameter["items"]
        for journey in payload["journeys"]:
            for node in journey["nodes"]:
                for fld in node["collects"]:
                    _drop_defaults(fld, _FIELD_FIELDS_ADDED_LATER)
        for response in payload["canned_responses"]:
            if not response.get("variants"):
                response.pop("variants", None)
        config_defaults = AgentConfig.model_fields
        for name in _CONFIG_FIELDS_ADDED_LATER:
            default = config_defaults[name].get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                default = default.model_dump(mode="json")
            elif isinstance(default, tuple):
                default = list(default)  # as the JSON payload holds it
            if payload["config"].get(name) == default:
                del payload["config"][name]
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_content_version(self) -> AgentSnapshot:
        """A copy whose version is the hash of its content (same content → same version)."""
        data = self.model_dump()
        data["version"] = self.content_hash()
        return AgentSnapshot.model_validate(data)


# Config fields added after agents were published: hashed only when set to something else.
_CONFIG_FIELDS_ADDED_LATER = (
    "unsupported_media_response",
    "handoff",
    "journey_min_similarity",
    "timezone",
    "languages",
    "messages",
    "speculation",
    "prices",
)
# … and of tools, tool parameters and collected fields, with the value that leaves them out.
_TOOL_FIELDS_ADDED_LATER: dict[str, Any] = {"speculative": False}
_PARAMETER_FIELDS_ADDED_LATER = {
    "items": None,
    "currency": None,
    "pattern": None,
    "source": None,
    "derived": False,
}
_FIELD_FIELDS_ADDED_LATER = {"currency": None, "pattern": None}


def _drop_defaults(item: dict[str, Any], added_later: dict[str, Any]) -> None:
    for name, default in added_later.items():
        if name in item and item[name] == default:
            del item[name]


JourneyNodeRef.model_rebuild()
Guideline.model_rebuild()
