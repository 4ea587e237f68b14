"""The journey builder: a journey's conditions, its graph of chat, tool and fork states, and the
transitions between them, built step by step from `Agent.create_journey`.

Misusing it (a state that is both a chat and a tool state, a transition to another journey's
state) raises `InvalidAgentDefinition` at once, where the mistake was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, overload

from engine.agent_config import CompositionMode
from engine.authoring.construct import construct
from engine.authoring.customer_dependent import CustomerDependentSpec, customer_dependent_action
from engine.authoring.fields import FieldsSpec, collected_fields
from engine.authoring.ids import (
    END_STATE_NAME,
    ROOT_STATE_ID,
    default_state_id,
    default_transition_id,
)
from engine.authoring.relatable import GuidelineBuilder, Relatable
from engine.authoring.tool_refs import ToolRefs
from engine.errors import InvalidAgentDefinition
from engine.model import (
    END_OF_JOURNEY,
    EntityKind,
    EntityRef,
    Journey,
    JourneyEdge,
    JourneyNode,
    NodeKind,
)

if TYPE_CHECKING:
    from engine.authoring.agent_builder import Agent, GuidelineOptions


class EndJourney:
    """The type of `END_JOURNEY`: a transition to it completes the journey."""

    def __repr__(self) -> str:
        return "END_JOURNEY"


END_JOURNEY = EndJourney()


class _Unset(Enum):
    TOKEN = 0  # "argument not given", where None already means something


def _misuse(problem: str) -> InvalidAgentDefinition:
    return InvalidAgentDefinition([problem])


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

    def on_failure(self, state: JourneyState | EndJourney) -> None:
        """Where the journey goes when this tool state's tool fails — a state of this journey, or
        `END_JOURNEY` (the journey ends without completing). Without it, a failed tool state
        keeps the journey where it is and the customer is offered a retry."""
        if self.node.kind is not NodeKind.TOOL:
            raise _misuse(f"state '{self.id}' is not a tool state; only tool states can fail")
        if isinstance(state, EndJourney):
            target = END_OF_JOURNEY
        elif state.journey is not self.journey:
            raise _misuse(
                f"state '{state.id}' belongs to journey '{state.journey.id}', not to "
                f"'{self.journey.id}'"
            )
        else:
            target = state.id
        nodes = self.journey._nodes
        nodes[self._index] = self.node.model_copy(update={"on_failure": target})

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


class JourneyBuilder(Relatable):
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
        priority: int = 0,
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
            priority=priority,
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
        self._requires.extend(journey_id_of(j) for j in journeys)

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
            customer_dependent=customer_dependent_action(
                spec.get("customer_dependent"), action, fields
            ),
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


def journey_id_of(journey: JourneyBuilder | str) -> str:
    """The id of a journey given as its builder or by id."""
    return journey if isinstance(journey, str) else journey.id
