"""The behavior model: what an agent is made of.

Everything here is an immutable pydantic model. An `AgentSnapshot` is the compiled, validated and
versionable form of an agent — the unit that is published to storage and loaded by a turn. Authoring
(the Python builder and the YAML/JSON form in `engine.authoring`) always ends in a snapshot.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class CompositionMode(StrEnum):
    """How the reply is written: freely, preferring approved templates, or only from templates."""

    FLUID = "fluid"
    CANNED_FLUID = "canned_fluid"
    CANNED_STRICT = "canned_strict"


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
        """Set on guidelines projected from a journey node (see `engine.projection`)."""
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


FieldType = Literal["str", "int", "decimal", "bool", "date", "enum"]


class CollectedField(BaseModel):
    """A typed value a chat step collects from the customer, stored on the session once given."""

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
    # everything stored, returned by the API or shown to the model later (`engine.secrets`).
    secret: bool = False


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
# Glossary, variables, canned responses, tools


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
    collected values and context variables."""

    model_config = _FROZEN
    id: str
    template: str
    tags: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()  # example phrasings that help choose it

    @property
    def fields(self) -> tuple[str, ...]:
        import re

        return tuple(dict.fromkeys(re.findall(r"{{\s*([\w.]+)\s*}}", self.template)))


ParameterType = Literal["string", "integer", "number", "boolean", "array", "object"]


class ToolParameter(BaseModel):
    model_config = _FROZEN
    name: str
    type: ParameterType = "string"
    description: str = ""
    enum: tuple[str, ...] = ()
    required: bool = True
    default: Any = None
    # The model phrases this value itself (a search query): exempt from grounding. Only on
    # non-consequential tools; validation refuses it elsewhere.
    composed: bool = False
    # A secret (a password): the tool receives it, nothing stored or shown to a model keeps it.
    secret: bool = False


class ToolKind(StrEnum):
    GENERAL = "general"  # never interrupts the turn
    SELECTOR = "selector"  # interrupts: the customer picks one item of a list
    INTERRUPTER = "interrupter"  # interrupts: returns an action (link, form); a later event resumes


ConfirmPolicy = Literal["always", "when_inferred", "never"]

# A selector named for what the customer chooses ("choose_size") fills that thing ("size").
_PICK_PREFIXES = ("choose_", "pick_", "select_")


class ToolSpec(BaseModel):
    """What the engine knows of a tool: its typed signature. The implementation lives elsewhere.

    `confirm` says when the customer must agree to the exact call first: `always`,
    `when_inferred` (some value was derived rather than said as is) or `never`. Unset, it is
    `when_inferred` for consequential tools and `never` for the others.

    `fills` (selectors and interrupters) names the collected value the customer's pick, or an
    interrupter's single result, is stored as, so later tools get it by that name; unset, it is
    the tool's name without a `choose_` / `pick_` / `select_` prefix (see `pick_name`)."""

    model_config = _FROZEN
    name: str
    description: str = ""
    parameters: tuple[ToolParameter, ...] = ()
    kind: ToolKind = ToolKind.GENERAL
    consequential: bool = False
    confirm: ConfirmPolicy | None = None
    fills: str | None = None
    timeout_seconds: float = 10.0

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters if p.required)

    @property
    def confirmation(self) -> ConfirmPolicy:
        if self.confirm is not None:
            return self.confirm
        return "when_inferred" if self.consequential else "never"

    @property
    def pick_name(self) -> str:
        """The value a pick from this tool fills: `fills`, else the name without its prefix."""
        if self.fills:
            return self.fills
        for prefix in _PICK_PREFIXES:
            if self.name.startswith(prefix) and len(self.name) > len(prefix):
                return self.name[len(prefix) :]
        return self.name


# --------------------------------------------------------------------------------------------------
# Agent configuration and snapshot


class LLMPurpose(StrEnum):
    """What an LLM call is for; the unit of model routing and of trace accounting."""

    MATCH_GUIDELINES = "match_guidelines"
    DISAMBIGUATE = "disambiguate"
    SELECT_JOURNEY_NODE = "select_journey_node"
    CALL_TOOLS = "call_tools"
    COMPOSE = "compose"


class TurnBudget(BaseModel):
    """Upper bounds on one turn's cost. When a stage would exceed them, the turn composes with what
    it has and the trace says so. One call is always reserved for composing the reply."""

    model_config = _FROZEN
    max_llm_calls: int = 12
    max_prompt_tokens: int = 60_000


# The built-in handoff action: named in a guideline's `tools` or as a journey tool step, it hands
# the conversation to a person (`engine.handoff`) instead of calling anything.
HANDOFF_TOOL = "hand_off_to_person"
HANDOFF_TEMPLATE_TAG = "handoff"  # canned modes: the approved template that announces a handoff
HANDOFF_UNAVAILABLE_TAG = "handoff_unavailable"  # … and the one for "no one is available"


class BusinessHours(BaseModel):
    """When people are there to take a handed-off conversation (local time of `timezone`)."""

    model_config = _FROZEN
    timezone: str = "UTC"
    days: tuple[int, ...] = (0, 1, 2, 3, 4)  # 0 = Monday … 6 = Sunday
    opens: str = Field(default="09:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
    closes: str = Field(default="17:00", pattern=r"^([01][0-9]|2[0-4]):[0-5][0-9]$")


class HandoffConfig(BaseModel):
    """How the agent steps aside for a person (`engine.handoff`)."""

    model_config = _FROZEN
    # The customer asking for a person ("can I talk to a human?") hands off, without a rule.
    customer_request: bool = True
    # Extra wordings that count as asking for a person (case-insensitive phrases).
    request_phrases: tuple[str, ...] = ()
    # What the customer is told when handed off (canned modes: a template tagged `handoff`).
    message: str = "I'm passing you to a person from our team. They'll reply right here."
    # … when no one is there (out of hours, or no one picked it up in time); a ticket is recorded.
    unavailable_message: str = (
        "No one from our team is available right now. We've recorded your request and a person "
        "will get back to you here as soon as possible."
    )
    business_hours: BusinessHours | None = None  # None: someone is always there
    # No person took it within this many seconds: a ticket is recorded and the customer told.
    pickup_timeout_seconds: int = Field(default=900, ge=60)


class AgentConfig(BaseModel):
    model_config = _FROZEN
    composition_mode: CompositionMode = CompositionMode.FLUID
    journey_top_k: int = 1
    # A journey is predicted by vector recall (its node selection run speculatively in round 1)
    # only when what the customer said this turn is at least this similar to it (cosine). Below
    # it the prediction is hopeless ("thanks", "hello") and the call would be discarded; a journey
    # the turn enters anyway is matched in a supplemental round. Default from the offline
    # embedder on the banking and synthetic runs (docs/BENCHMARKS.md): closings and greetings
    # score ≤ 0.16 against every journey, requests that enter one ≥ 0.21.
    # -1 = always predict the top journeys (the behaviour before the threshold).
    journey_min_similarity: float = Field(default=0.18, ge=-1.0, le=1.0)
    # Recall on large agents: when more agent-wide guidelines (or more journeys' activation
    # conditions) than this reach a turn, only the most similar to the conversation are matched
    # (vector top-k; pending, continuous-applied and high-criticality guidelines always are).
    # 0 = match them all, every turn.
    guideline_top_k: int = Field(default=30, ge=0)
    condition_top_k: int = Field(default=20, ge=0)
    max_tool_iterations: int = 3
    max_journey_depth: int = 5  # BFS depth of the node map shown to the LLM
    batch_prompt_budget_chars: int = 12_000  # size of one matching batch's guideline section
    budget: TurnBudget = Field(default_factory=TurnBudget)
    models: dict[LLMPurpose, str] = Field(default_factory=dict)  # per-purpose routing
    default_model: str = "gpt-4o-mini"
    explain: bool = False  # verbose rationales in LLM outputs, for debugging only
    # what canned_strict sends when no approved template fits (it never sends free text)
    no_match_response: str = "Sorry, I can't help with that here. Could you rephrase?"
    # what a message of only files the agent cannot read (a voice note, a photo without a
    # caption, a document) is answered with, instead of silence
    unsupported_media_response: str = (
        "Sorry, I can't open attachments like that here. Could you type what you need?"
    )
    max_canned_candidates: int = 30
    max_concurrent_llm_calls: int = 8
    llm_retry_budget: int = 4  # transient-failure retries allowed per turn, all calls together
    handoff: HandoffConfig = Field(default_factory=HandoffConfig)

    def model_for(self, purpose: LLMPurpose) -> str:
        return self.models.get(purpose, self.default_model)


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


class AgentSnapshot(BaseModel):
    """The compiled agent. Built by `engine.authoring`; validated by `engine.validation`."""

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
    migrations: tuple[JourneyMigration, ...] = ()  # see `engine.versioning`

    _guideline_index: dict[str, Guideline] = PrivateAttr(default_factory=dict)
    _journey_index: dict[str, Journey] = PrivateAttr(default_factory=dict)
    _tool_index: dict[str, ToolSpec] = PrivateAttr(default_factory=dict)

    def model_post_init(self, __context: Any) -> None:
        self._guideline_index = {g.id: g for g in self.guidelines}
        self._journey_index = {j.id: j for j in self.journeys}
        self._tool_index = {t.name: t for t in self.tools}

    def guideline(self, guideline_id: str) -> Guideline:
        return self._guideline_index[guideline_id]

    def has_guideline(self, guideline_id: str) -> bool:
        return guideline_id in self._guideline_index

    def journey(self, journey_id: str) -> Journey:
        return self._journey_index[journey_id]

    def has_journey(self, journey_id: str) -> bool:
        return journey_id in self._journey_index

    def tool(self, name: str) -> ToolSpec:
        return self._tool_index[name]

    def has_tool(self, name: str) -> bool:
        return name in self._tool_index

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
        config_defaults = AgentConfig.model_fields
        for name in _CONFIG_FIELDS_ADDED_LATER:
            default = config_defaults[name].get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                default = default.model_dump(mode="json")
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
_CONFIG_FIELDS_ADDED_LATER = ("unsupported_media_response", "handoff", "journey_min_similarity")

JourneyNodeRef.model_rebuild()
Guideline.model_rebuild()
