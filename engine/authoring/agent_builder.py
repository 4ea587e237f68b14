"""The agent builder: the Python way to define an agent, in the spirit of Parlant's SDK —
synchronous, since defining an agent does no I/O.

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

The journey handle is `engine.authoring.journey_builder`; the guideline handle and the
relationship methods both handles share are `engine.authoring.relatable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from engine.agent_config import AgentConfig, CompositionMode
from engine.authoring.canonical import (
    canonical_guidelines,
    canonical_relationships,
    canonical_tools,
    journey_dependency,
)
from engine.authoring.construct import construct
from engine.authoring.customer_dependent import CustomerDependentSpec, customer_dependent_action
from engine.authoring.ids import (
    default_canned_response_id,
    default_guideline_id,
    default_journey_id,
)
from engine.authoring.journey_builder import JourneyBuilder, journey_id_of
from engine.authoring.relatable import GuidelineBuilder
from engine.authoring.tool_refs import ToolRef, ToolRefs, declared_spec
from engine.matching.projection import journey_condition_guideline_id
from engine.model import (
    JOURNEY_CONDITION_KEY,
    AgentSnapshot,
    CannedResponse,
    ContextVariable,
    Criticality,
    EntityKind,
    EntityRef,
    Guideline,
    JourneyMigration,
    Relationship,
    RelationshipKind,
    Term,
    journey_tag,
)
from engine.tools.spec import ToolSpec
from engine.validation.agent import validate_snapshot

# What a relationship can name: a guideline or journey handle, or a reference to either.
Related = GuidelineBuilder | JourneyBuilder | EntityRef


def _entity_ref(entity: Related) -> EntityRef:
    if isinstance(entity, EntityRef):
        return entity
    if isinstance(entity, GuidelineBuilder | JourneyBuilder):
        return entity.ref
    raise TypeError(f"expected a guideline, a journey or an EntityRef, got {entity!r}")


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
    # Numeric priority (default 0): when entities of different priorities hold, only the
    # highest stay. A journey's guidelines take the journey's priority instead.
    priority: int
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
        languages: Sequence[str] | None = None,
        messages: Mapping[str, Mapping[str, str]] | None = None,
    ):
        self.id = id
        self.name = name
        self.description = description
        settings = config.model_dump() if isinstance(config, AgentConfig) else dict(config or {})
        if composition_mode is not None:
            settings["composition_mode"] = composition_mode
        if languages is not None:  # the languages served, the first the default
            settings["languages"] = tuple(languages)
        if messages is not None:  # the engine's lines as this agent words them, per language
            merged = {tag: dict(lines) for tag, lines in settings.get("messages", {}).items()}
            for tag, lines in messages.items():
                merged[tag] = {**merged.get(tag, {}), **lines}
            settings["messages"] = merged
        self.config = construct(AgentConfig, f"agent '{id}' config", **settings)
        self._guidelines: list[Guideline] = []
        self._journeys: list[JourneyBuilder] = []
        self._relationships: list[Relationship] = []
        self._tools: list[ToolSpec] = []
        self._terms: list[Term] = []
        self._variables: list[ContextVariable] = []
        self._canned_responses: list[CannedResponse] = []
        self._migrations: list[JourneyMigration] = []

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
        dependent = customer_dependent_action(options.get("customer_dependent"), action, ())
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
            priority=options.get("priority", 0),
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
        priority: int = 0,
        id: str | None = None,
    ) -> JourneyBuilder:
        """A journey whose conditions become global observations: when one matches, it activates.
        `requires` names prerequisite journeys that must complete first; `priority` ranks it (and
        its steps and guidelines) against other matched entities by number."""
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
            requires=[journey_id_of(j) for j in requires],
            priority=priority,
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

    @staticmethod
    def tag(name: str) -> EntityRef:
        """Every guideline and journey carrying `name`, as one end of a relationship: as a source
        any member that holds acts; as a target all members are affected."""
        return EntityRef(kind=EntityKind.TAG, id=name)

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

    def register_tool(self, tool: ToolRef) -> ToolSpec:
        """Make a tool known to the agent: its `ToolSpec` or its `@tool` function. Tools passed
        as objects elsewhere (`tools=`, `tool_state=`) register themselves."""
        spec = declared_spec(tool)
        if spec is None:
            raise TypeError(f"register_tool expects a @tool function or a ToolSpec, got {tool!r}")
        if spec not in self._tools:
            # A different spec under a known name is kept, so that validation reports the clash.
            self._tools.append(spec)
        return spec

    def _tool_names(self, tools: ToolRefs | None) -> tuple[str, ...]:
        if tools is None:
            return ()
        refs: list[ToolRef] = []
        if isinstance(tools, Sequence) and not isinstance(tools, str):
            refs.extend(tools)
        else:
            refs.append(tools)
        names: list[str] = []
        for ref in refs:
            if isinstance(ref, str):
                names.append(ref)
            elif declared_spec(ref) is not None:
                names.append(self.register_tool(ref).name)
            else:
                raise TypeError(
                    f"expected a @tool function, a ToolSpec or a tool name, got {ref!r}"
                )
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
        variants: Mapping[str, str] | None = None,
    ) -> CannedResponse:
        """An approved reply template; `{{field}}` placeholders are filled at run time.
        `template` is in the agent's default language; `variants` gives the reply in its other
        languages ({"es": "…"}), sent to a session in that language."""
        response_id = id or default_canned_response_id(template)
        response = construct(
            CannedResponse,
            f"canned response '{response_id}'",
            id=response_id,
            template=template,
            tags=tuple(tags),
            signals=tuple(signals),
            variants=dict(variants or {}),
        )
        self._canned_responses.append(response)
        return response

    def migrate_journey(
        self,
        journey: str,
        steps: Mapping[str, str] | None = None,
        *,
        from_version: str | None = None,
    ) -> JourneyMigration:
        """Let sessions in `journey` on an earlier version (or only `from_version`) move to this
        version at their next turn, renaming old step ids to new ones (`steps`); without it they
        stay on their version until the journey ends (`engine.versioning.pinning`)."""
        migration = construct(
            JourneyMigration,
            f"migration of journey '{journey}'",
            journey=journey,
            steps=dict(steps or {}),
            from_version=from_version,
        )
        self._migrations.append(migration)
        return migration

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
            migrations=tuple(self._migrations),
        )
        return snapshot.with_content_version()

    def build(self) -> AgentSnapshot:
        """Compile and validate. Raises `InvalidAgentDefinition` listing every problem found."""
        snapshot = self.compile()
        validate_snapshot(snapshot)
        return snapshot

    def __repr__(self) -> str:
        return f"Agent({self.id!r})"
