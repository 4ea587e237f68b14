"""The Python way to define an agent, in the spirit of Parlant's SDK — synchronous, since
defining an agent does no I/O.

    agent = Agent(id="bank", name="Bank concierge")
    transfer = agent.create_journey(
        title="Money transfer", conditions=["The customer wants to transfer money"], id="transfer"
    )
    ask = transfer.initial_state.transition_to(
        chat_state="Ask for the destination account and the amount",
        collects={"destination": "str", "amount": "decimal>0"},
    )
    check = ask.transition_to(tool_state=check_funds, condition="The customer gave both")
    check.transition_to(state=END_JOURNEY)
    snapshot = agent.build()  # validated, content-versioned AgentSnapshot

Misusing the builder (a state that is both a chat and a tool state, say) raises
`InvalidAgentDefinition` at once; problems of the agent as a whole (an unknown tool, an
unreachable step, a priority cycle) are all reported together by `build()`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, TypedDict, Unpack, overload

from engine.authoring.canonical import (
    canonical_guidelines,
    canonical_relationships,
    canonical_tools,
    journey_dependency,
)
from engine.authoring.construct import construct
from engine.authoring.fields import FieldsSpec, collected_fields, describe_fields
from engine.authoring.ids import (
    END_STATE_NAME,
    ROOT_STATE_ID,
    default_canned_response_id,
    default_guideline_id,
    default_journey_id,
    default_state_id,
    default_transition_id,
)
from engine.errors import InvalidAgentDefinition
from engine.model import (
    JOURNEY_CONDITION_KEY,
    AgentConfig,
    AgentSnapshot,
    CannedResponse,
    CollectedField,
    CompositionMode,
    ContextVariable,
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
    Term,
    ToolSpec,
    journey_tag,
)
from engine.projection import journey_condition_guideline_id
from engine.validation import validate_snapshot

ToolRef = ToolSpec | str
ToolRefs = ToolRef | Sequence[ToolRef]
CustomerDependentSpec = CustomerDependentAction | Mapping[str, Any] | bool | None


class EndJourney:
    """The type of `END_JOURNEY`: a transition to it completes the journey."""

    def __repr__(self) -> str:
        return "END_JOURNEY"


END_JOURNEY = EndJourney()


class _Unset(Enum):
    TOKEN = 0  # "argument not given", where None already means something


def _misuse(problem: str) -> InvalidAgentDefinition:
    return InvalidAgentDefinition([problem])


def derived_customer_dependent(
    action: str | None, fields: Sequence[CollectedField]
) -> CustomerDependentAction:
    """What completes a step that waits for the customer, worded from its instruction and fields."""
    if fields:
        customer_action = f"The customer provided {describe_fields(fields)}"
    else:
        customer_action = "The customer gave the information the agent asked for"
    agent_action = action or f"Ask for {describe_fields(fields) or 'the information needed'}"
    return CustomerDependentAction(customer_action=customer_action, agent_action=agent_action)


def _customer_dependent(
    spec: CustomerDependentSpec, action: str | None, fields: Sequence[CollectedField]
) -> CustomerDependentAction | None:
    """None → customer-dependent only if it collects values; True/False force it; an explicit
    `CustomerDependentAction` (or mapping) is taken as written."""
    if spec is None:
        return derived_customer_dependent(action, fields) if fields else None
    if isinstance(spec, bool):
        return derived_customer_dependent(action, fields) if spec else None
    if isinstance(spec, CustomerDependentAction):
        return spec
    return construct(CustomerDependentAction, "customer_dependent", **spec)


# --------------------------------------------------------------------------------------------------
# Relationships, shared by guidelines and journeys


class _Relatable(ABC):
    """Relationship methods of guideline and journey handles."""

    _agent: Agent

    @property
    @abstractmethod
    def ref(self) -> EntityRef:
        """What relationships name this guideline or journey by."""

    def prioritize_over(self, other: Related) -> Relationship:
        """While this is active, `other` is suppressed."""
        return self._agent.create_relationship(RelationshipKind.PRIORITY, self.ref, other)

    def depend_on(self, other: Related) -> Relationship:
        """This is active only while `other` is active too."""
        return self._agent.create_relationship(RelationshipKind.DEPENDENCY, self.ref, other)

    def entail(self, other: Related) -> Relationship:
        """Whenever this is active, `other` becomes active as well."""
        return self._agent.create_relationship(RelationshipKind.ENTAILMENT, self.ref, other)


class GuidelineBuilder(_Relatable):
    """A handle on a created guideline, for relating it to other guidelines and journeys."""

    def __init__(self, agent: Agent, guideline: Guideline):
        self._agent = agent
        self.guideline = guideline

    @property
    def id(self) -> str:
        return self.guideline.id

    @property
    def ref(self) -> EntityRef:
        return EntityRef(kind=EntityKind.GUIDELINE, id=self.id)

    def disambiguate(self, targets: Sequence[Related]) -> list[Relationship]:
        """This observation groups `targets` the customer may be confusing; when it matches, the
        agent asks which one they meant."""
        return [
            self._agent.create_relationship(RelationshipKind.DISAMBIGUATION, self, t)
            for t in targets
        ]

    def __repr__(self) -> str:
        return f"GuidelineBuilder({self.id!r})"


# --------------------------------------------------------------------------------------------------
# Journeys


class NewState(TypedDict, total=False):
    """Describes a new journey state: exactly one of `chat_state`, `tool_state`, `fork_state`."""

    chat_state: str | None  # what the agent says or asks
    tool_state: ToolRefs | None  # the tool(s) the engine calls
    fork_state: str | bool | None  # a branching point; a text here becomes its description
    action: str | None  # the instruction that goes with a tool state
    collects: FieldsSpec | None  # typed values a chat state collects from the customer
    customer_dependent: CustomerDependentSpec
    description: str | None
    composition_mode: CompositionMode | str | None
    metadata: Mapping[str, Any] | None
    id: str | None  # defaults to s1, s2, … in creation order


def _given(spec: NewState) -> bool:
    return any(value not in (None, False) for value in spec.values())


class JourneyState:
    """A handle on one state of a journey under construction."""

    def __init__(self, journey: JourneyBuilder, index: int):
        self.journey = journey
        self._index = index

    @property
    def node(self) -> JourneyNode:
        return self.journey._nodes[self._index]

    @property
    def id(self) -> str:
        return self.node.id

    @overload
    def transition_to(
        self,
        *,
        state: EndJourney,
        condition: str | None = None,
        transition_id: str | None = None,
    ) -> None: ...

    @overload
    def transition_to(
        self,
        *,
        state: JourneyState | None = None,
        condition: str | None = None,
        transition_id: str | None = None,
        **new_state: Unpack[NewState],
    ) -> JourneyState: ...

    def transition_to(
        self,
        *,
        state: JourneyState | EndJourney | None = None,
        condition: str | None = None,
        transition_id: str | None = None,
        **new_state: Unpack[NewState],
    ) -> JourneyState | None:
        """Add a transition, taken when `condition` holds (always, if None), to `state` (an
        existing state of this journey, or `END_JOURNEY`) or to a new state described by the
        remaining arguments. Returns the target state, or None when the journey ends."""
        if state is None:
            target = self.journey.add_state(**new_state)
        elif _given(new_state):
            raise _misuse(
                "give either state= (an existing state or END_JOURNEY) or a new state "
                "(chat_state=…, tool_state=…, fork_state=…), not both"
            )
        elif isinstance(state, EndJourney):
            self.journey._add_transition(self.id, None, condition, transition_id)
            return None
        else:
            target = state
            if target.journey is not self.journey:
                raise _misuse(
                    f"state '{target.id}' belongs to journey '{target.journey.id}', "
                    f"not to '{self.journey.id}'"
                )
        self.journey._add_transition(self.id, target.id, condition, transition_id)
        return target

    def fork(
        self,
        condition: str,
        target: JourneyState | EndJourney | _Unset | None = _Unset.TOKEN,
        *,
        transition_id: str | None = None,
        **new_state: Unpack[NewState],
    ) -> JourneyState | None:
        """Add a branch to this fork state: to `target` (`None` or `END_JOURNEY` ends the journey)
        or to a new state described by the remaining arguments."""
        if self.node.kind is not NodeKind.FORK:
            raise _misuse(
                f"state '{self.id}' is not a fork state; use transition_to(condition=…) instead"
            )
        if _given(new_state):
            if target is not _Unset.TOKEN:
                raise _misuse("give fork() either a target or a new state, not both")
            return self.transition_to(condition=condition, transition_id=transition_id, **new_state)
        if target is _Unset.TOKEN:
            raise _misuse(
                "fork() needs a target (a state, or END_JOURNEY / None to end the journey) "
                "or a new state (chat_state=…, tool_state=…, fork_state=…)"
            )
        if target is None or isinstance(target, EndJourney):
            return self.transition_to(
                state=END_JOURNEY, condition=condition, transition_id=transition_id
            )
        return self.transition_to(state=target, condition=condition, transition_id=transition_id)

    def __repr__(self) -> str:
        return f"JourneyState({self.journey.id!r}, {self.id!r})"


class JourneyBuilder(_Relatable):
    """A journey under construction: its conditions, its state graph, its scoped guidelines."""

    def __init__(
        self,
        agent: Agent,
        *,
        id: str,
        title: str,
        conditions: Sequence[str],
        condition_guideline_ids: Sequence[str],
        description: str,
        tags: Sequence[str],
        composition_mode: CompositionMode | str | None,
        requires: Sequence[str],
    ):
        self._agent = agent
        self._nodes: list[JourneyNode] = [JourneyNode(id=ROOT_STATE_ID, kind=NodeKind.CHAT)]
        self._edges: list[JourneyEdge] = []
        self._requires = list(requires)
        # Validated now, so a wrong value fails where it was written.
        self._header = construct(
            Journey,
            f"journey '{id}'",
            id=id,
            title=title,
            description=description,
            conditions=tuple(conditions),
            condition_guideline_ids=tuple(condition_guideline_ids),
            root_id=ROOT_STATE_ID,
            nodes=tuple(self._nodes),
            tags=tuple(tags),
            composition_mode=composition_mode,
        )

    @property
    def id(self) -> str:
        return self._header.id

    @property
    def title(self) -> str:
        return self._header.title

    @property
    def ref(self) -> EntityRef:
        return EntityRef(kind=EntityKind.JOURNEY, id=self.id)

    @property
    def condition_guideline_ids(self) -> tuple[str, ...]:
        return self._header.condition_guideline_ids

    @property
    def initial_state(self) -> JourneyState:
        """The action-less entry point; the first real step is a transition from it."""
        return JourneyState(self, 0)

    @property
    def states(self) -> tuple[JourneyState, ...]:
        return tuple(JourneyState(self, i) for i in range(len(self._nodes)))

    def state(self, state_id: str) -> JourneyState:
        """The (first) state with this id."""
        for index, node in enumerate(self._nodes):
            if node.id == state_id:
                return JourneyState(self, index)
        raise KeyError(f"journey {self.id!r} has no state {state_id!r}")

    def add_state(self, **new_state: Unpack[NewState]) -> JourneyState:
        """Create a state without a transition into it yet (connect it with `transition_to`)."""
        self._nodes.append(self._new_node(new_state))
        return JourneyState(self, len(self._nodes) - 1)

    def require(self, *journeys: JourneyBuilder | str) -> None:
        """Make `journeys` prerequisites: each must have completed in the session before this
        journey proceeds (the engine runs it first, then resumes this one)."""
        self._requires.extend(_journey_id(j) for j in journeys)

    def create_guideline(
        self,
        condition: str,
        action: str | None = None,
        **options: Unpack[GuidelineOptions],
    ) -> GuidelineBuilder:
        """A guideline evaluated only while this journey is active: tagged with the journey and
        depending on it."""
        return self._agent._add_guideline(condition, action, journey_id=self.id, **options)

    def compile(self) -> Journey:
        """The journey as it stands, not yet validated."""
        return construct(
            Journey,
            f"journey '{self.id}'",
            **{
                **dict(self._header),
                "nodes": tuple(self._nodes),
                "edges": tuple(self._edges),
                "requires": tuple(self._requires),
            },
        )

    def _new_node(self, spec: NewState) -> JourneyNode:
        kinds = [
            k
            for k in ("chat_state", "tool_state", "fork_state")
            if spec.get(k) not in (None, False)
        ]
        if len(kinds) != 1:
            got = ", ".join(kinds) or "none of them"
            raise _misuse(
                f"journey '{self.id}': a state is exactly one of chat_state=…, tool_state=… "
                f"or fork_state=… (got {got})"
            )
        node_id = spec.get("id") or default_state_id([n.id for n in self._nodes])
        if node_id == END_STATE_NAME:
            raise _misuse(
                f"journey '{self.id}': '{END_STATE_NAME}' is reserved for the journey's end"
            )
        where = f"journey '{self.id}' state '{node_id}'"
        common: dict[str, Any] = {
            "id": node_id,
            "description": spec.get("description"),
            "composition_mode": spec.get("composition_mode"),
            "metadata": dict(spec.get("metadata") or {}),
        }
        if kinds[0] == "chat_state":
            return self._chat_node(where, spec, common)
        if spec.get("collects") or spec.get("customer_dependent") not in (None, False):
            raise _misuse(f"{where}: only chat states collect values or wait for the customer")
        if kinds[0] == "tool_state":
            tools = self._agent._tool_names(spec.get("tool_state"))
            return construct(
                JourneyNode,
                where,
                kind=NodeKind.TOOL,
                tools=tools,
                action=spec.get("action"),
                **common,
            )
        return self._fork_node(where, spec, common)

    def _chat_node(self, where: str, spec: NewState, common: dict[str, Any]) -> JourneyNode:
        if spec.get("action") is not None:
            raise _misuse(
                f"{where}: a chat state's instruction is its chat_state text; drop action="
            )
        action = spec.get("chat_state")
        fields = collected_fields(spec.get("collects"))
        return construct(
            JourneyNode,
            where,
            kind=NodeKind.CHAT,
            action=action,
            collects=fields,
            customer_dependent=_customer_dependent(spec.get("customer_dependent"), action, fields),
            **common,
        )

    def _fork_node(self, where: str, spec: NewState, common: dict[str, Any]) -> JourneyNode:
        if spec.get("action") is not None:
            raise _misuse(f"{where}: a fork only chooses between its transitions; drop action=")
        text = spec.get("fork_state")
        if isinstance(text, str):
            if common["description"] is not None:
                raise _misuse(f"{where}: give the fork's text once, as fork_state= or description=")
            common["description"] = text
        return construct(JourneyNode, where, kind=NodeKind.FORK, **common)

    def _add_transition(
        self, source: str, target: str | None, condition: str | None, transition_id: str | None
    ) -> None:
        edge_id = transition_id or default_transition_id(
            source, target, [e.id for e in self._edges]
        )
        edge = construct(
            JourneyEdge,
            f"journey '{self.id}' transition '{edge_id}'",
            id=edge_id,
            source=source,
            target=target,
            condition=condition,
        )
        self._edges.append(edge)

    def __repr__(self) -> str:
        return f"JourneyBuilder({self.id!r})"


Related = GuidelineBuilder | JourneyBuilder | EntityRef


def _entity_ref(entity: Related) -> EntityRef:
    if isinstance(entity, EntityRef):
        return entity
    if isinstance(entity, GuidelineBuilder | JourneyBuilder):
        return entity.ref
    raise TypeError(f"expected a guideline, a journey or an EntityRef, got {entity!r}")


def _journey_id(journey: JourneyBuilder | str) -> str:
    return journey if isinstance(journey, str) else journey.id


# --------------------------------------------------------------------------------------------------
# The agent


class GuidelineOptions(TypedDict, total=False):
    """Everything about a guideline besides its condition and action."""

    tools: Sequence[ToolRef]  # tools the agent may call when this guideline applies
    description: str | None
    tags: Sequence[str]
    criticality: Criticality | str
    composition_mode: CompositionMode | str | None
    metadata: Mapping[str, Any] | None
    continuous: bool  # re-applied whenever the condition holds, not just once
    customer_dependent: CustomerDependentSpec  # complete only once the customer answered
    enabled: bool
    id: str | None


class Agent:
    """Builds an `AgentSnapshot`: create guidelines, journeys, tools, terms, variables and canned
    responses, relate them, then `build()`."""

    def __init__(
        self,
        id: str,
        name: str,
        description: str = "",
        composition_mode: CompositionMode | str | None = None,
        config: AgentConfig | Mapping[str, Any] | None = None,
    ):
        self.id = id
        self.name = name
        self.description = description
        settings = config.model_dump() if isinstance(config, AgentConfig) else dict(config or {})
        if composition_mode is not None:
            settings["composition_mode"] = composition_mode
        self.config = construct(AgentConfig, f"agent '{id}' config", **settings)
        self._guidelines: list[Guideline] = []
        self._journeys: list[JourneyBuilder] = []
        self._relationships: list[Relationship] = []
        self._tools: list[ToolSpec] = []
        self._terms: list[Term] = []
        self._variables: list[ContextVariable] = []
        self._canned_responses: list[CannedResponse] = []

    # --- guidelines -------------------------------------------------------------------------

    def create_guideline(
        self, condition: str, action: str | None = None, **options: Unpack[GuidelineOptions]
    ) -> GuidelineBuilder:
        """A `condition → action` rule for the whole agent; without an action, an observation."""
        return self._add_guideline(condition, action, journey_id=None, **options)

    def create_observation(
        self, condition: str, **options: Unpack[GuidelineOptions]
    ) -> GuidelineBuilder:
        """A guideline with no action: context for matching, a dependency or disambiguation head."""
        return self._add_guideline(condition, None, journey_id=None, **options)

    def _add_guideline(
        self,
        condition: str,
        action: str | None,
        *,
        journey_id: str | None,
        **options: Unpack[GuidelineOptions],
    ) -> GuidelineBuilder:
        guideline_id = options.get("id") or default_guideline_id(condition, action, journey_id)
        tags = tuple(options.get("tags", ()))
        if journey_id is not None:
            tags = (journey_tag(journey_id), *(t for t in tags if t != journey_tag(journey_id)))
        metadata = dict(options.get("metadata") or {})
        if options.get("continuous", False):
            metadata["continuous"] = True
        dependent = _customer_dependent(options.get("customer_dependent"), action, ())
        if dependent is not None:
            metadata["customer_dependent_action_data"] = dependent.model_dump(mode="json")
        guideline = construct(
            Guideline,
            f"guideline '{guideline_id}'",
            id=guideline_id,
            condition=condition,
            action=action,
            description=options.get("description"),
            tags=tags,
            metadata=metadata,
            criticality=options.get("criticality", Criticality.MEDIUM),
            composition_mode=options.get("composition_mode"),
            enabled=options.get("enabled", True),
            tools=self._tool_names(options.get("tools", ())),
        )
        self._guidelines.append(guideline)
        if journey_id is not None:
            self._relationships.append(journey_dependency(guideline_id, journey_id))
        return GuidelineBuilder(self, guideline)

    # --- journeys ---------------------------------------------------------------------------

    def create_journey(
        self,
        title: str,
        conditions: str | Sequence[str],
        *,
        description: str = "",
        tags: Sequence[str] = (),
        composition_mode: CompositionMode | str | None = None,
        requires: Sequence[JourneyBuilder | str] = (),
        id: str | None = None,
    ) -> JourneyBuilder:
        """A journey whose conditions become global observations: when one matches, it activates.
        `requires` names prerequisite journeys that must complete first."""
        journey_id = id or default_journey_id(title)
        texts = [conditions] if isinstance(conditions, str) else list(conditions)
        condition_ids = [journey_condition_guideline_id(journey_id, i) for i in range(len(texts))]
        journey = JourneyBuilder(
            self,
            id=journey_id,
            title=title,
            conditions=texts,
            condition_guideline_ids=condition_ids,
            description=description,
            tags=tags,
            composition_mode=composition_mode,
            requires=[_journey_id(j) for j in requires],
        )
        for guideline_id, text in zip(condition_ids, texts, strict=True):
            # No journey tag: a condition must be evaluated while its journey is not active yet.
            self._guidelines.append(
                construct(
                    Guideline,
                    f"journey '{journey_id}' condition",
                    id=guideline_id,
                    condition=text,
                    metadata={JOURNEY_CONDITION_KEY: journey_id},
                )
            )
        self._journeys.append(journey)
        return journey

    # --- relationships ----------------------------------------------------------------------

    def create_relationship(
        self, kind: RelationshipKind | str, source: Related, target: Related
    ) -> Relationship:
        """Relate two guidelines / journeys; the handles' `prioritize_over`, `depend_on`,
        `entail` and `disambiguate` are shorthands for this."""
        relationship = construct(
            Relationship,
            "relationship",
            kind=kind,
            source=_entity_ref(source),
            target=_entity_ref(target),
        )
        self._relationships.append(relationship)
        return relationship

    # --- tools, glossary, variables, canned responses ---------------------------------------

    def register_tool(self, tool: ToolSpec) -> ToolSpec:
        """Make a tool known to the agent. Tools passed as objects elsewhere register themselves."""
        if not isinstance(tool, ToolSpec):
            raise TypeError(f"register_tool expects a ToolSpec, got {tool!r}")
        if tool not in self._tools:
            # A different spec under a known name is kept, so that validation reports the clash.
            self._tools.append(tool)
        return tool

    def _tool_names(self, tools: ToolRefs | None) -> tuple[str, ...]:
        if tools is None:
            return ()
        refs = [tools] if isinstance(tools, ToolSpec | str) else list(tools)
        names: list[str] = []
        for ref in refs:
            if isinstance(ref, ToolSpec):
                names.append(self.register_tool(ref).name)
            elif isinstance(ref, str):
                names.append(ref)
            else:
                raise TypeError(f"expected a ToolSpec or a tool name, got {ref!r}")
        return tuple(names)

    def create_term(self, name: str, description: str, synonyms: Sequence[str] = ()) -> Term:
        """A glossary entry the agent uses to understand the customer's words."""
        term = construct(
            Term, f"term '{name}'", name=name, description=description, synonyms=tuple(synonyms)
        )
        self._terms.append(term)
        return term

    def create_variable(
        self, name: str, description: str = "", default: Any = None
    ) -> ContextVariable:
        """A named fact about the customer or the world, valued per customer at run time."""
        variable = construct(
            ContextVariable,
            f"variable '{name}'",
            name=name,
            description=description,
            default=default,
        )
        self._variables.append(variable)
        return variable

    def create_canned_response(
        self,
        template: str,
        *,
        id: str | None = None,
        tags: Sequence[str] = (),
        signals: Sequence[str] = (),
    ) -> CannedResponse:
        """An approved reply template; `{{field}}` placeholders are filled at run time."""
        response_id = id or default_canned_response_id(template)
        response = construct(
            CannedResponse,
            f"canned response '{response_id}'",
            id=response_id,
            template=template,
            tags=tuple(tags),
            signals=tuple(signals),
        )
        self._canned_responses.append(response)
        return response

    # --- compiling --------------------------------------------------------------------------

    def compile(self) -> AgentSnapshot:
        """The agent as a content-versioned snapshot, without validation (see `build`)."""
        journeys = tuple(j.compile() for j in self._journeys)
        snapshot = construct(
            AgentSnapshot,
            f"agent '{self.id}'",
            id=self.id,
            name=self.name,
            description=self.description,
            config=self.config,
            guidelines=canonical_guidelines(self._guidelines, journeys, self._relationships),
            journeys=journeys,
            relationships=canonical_relationships(self._relationships),
            terms=tuple(self._terms),
            variables=tuple(self._variables),
            canned_responses=tuple(self._canned_responses),
            tools=canonical_tools(self._tools),
        )
        return snapshot.with_content_version()

    def build(self) -> AgentSnapshot:
        """Compile and validate. Raises `InvalidAgentDefinition` listing every problem found."""
        snapshot = self.compile()
        validate_snapshot(snapshot)
        return snapshot

    def __repr__(self) -> str:
        return f"Agent({self.id!r})"
