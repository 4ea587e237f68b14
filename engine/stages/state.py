"""The working state of one turn, shared by every stage.

A `TurnState` is created when a turn starts, handed from stage to stage, and discarded when the
new session state has been built. Each field says which stage writes it; every other stage only
reads it. Per-version derived data of an agent (node views, guideline ids) is cached here too,
once per warm container.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from engine.clock import SystemClock, UuidIds
from engine.context import TurnContext
from engine.language.lines import Lines, Value
from engine.llm import TurnLLM
from engine.matching import guidelines as gm
from engine.matching.journey_graph import NodeView, build_node_views
from engine.model import AgentSnapshot, Guideline, Journey
from engine.ports import Clock, Embedder, IdGenerator, SchematicLLM, ToolDispatcher, ToolOutcome
from engine.privacy.digests import DEVELOPMENT_KEY
from engine.privacy.secrets import TurnSecrets, declared_secret_names
from engine.recall.index import RecallIndex
from engine.relations import TagMembers, tag_members
from engine.sessions.history import is_response_only
from engine.sessions.session import (
    CollectedValue,
    Event,
    EventKind,
    EventSource,
    Handoff,
    InboundMessage,
    PendingConfirmation,
    PendingInterrupt,
    SessionMode,
    SessionState,
    latest_reply_to,
)
from engine.trace import StageTiming, TurnTrace

if TYPE_CHECKING:
    from engine.stages.tools_ahead import ToolsAhead


@dataclass
class EngineDeps:
    """What a turn needs from the world, through the ports."""

    llm: SchematicLLM
    embedder: Embedder | None = None
    tools: ToolDispatcher | None = None
    clock: Clock = field(default_factory=SystemClock)
    ids: IdGenerator = field(default_factory=UuidIds)
    # The deployment's key for the digests a session keeps of its secrets (`engine.privacy.digests`):
    # infra passes the configured one; None keeps no digest (a later echo is not recognised).
    secret_key: bytes | None = field(default=DEVELOPMENT_KEY, repr=False)
    # A fast model that predicts the turn's decisions so its reply can be drafted in the same
    # round as matching (`engine.stages.speculation`, agents with `speculation: on`); None: no
    # drafts. Its answers never decide anything: a draft is used only when the verified
    # decisions ask for the very same reply.
    predictor: SchematicLLM | None = None


_PER_VERSION: dict[tuple[str, str, str], Any] = {}


def _per_version(agent: AgentSnapshot, what: str, build: Callable[[], Any]) -> Any:
    """Derived data of an agent version, computed once per warm container."""
    key = (agent.id, agent.version or agent.content_hash(), what)
    value = _PER_VERSION.get(key)
    if value is None:
        if len(_PER_VERSION) > 256:
            _PER_VERSION.clear()
        value = _PER_VERSION[key] = build()
    return value


def node_views_of(agent: AgentSnapshot) -> dict[str, dict[str, NodeView]]:
    return cast(
        dict[str, dict[str, NodeView]],
        _per_version(agent, "views", lambda: {j.id: build_node_views(j) for j in agent.journeys}),
    )


def secret_names_of(agent: AgentSnapshot) -> frozenset[str]:
    return cast(
        frozenset[str], _per_version(agent, "secrets", lambda: declared_secret_names(agent))
    )


def tag_members_of(agent: AgentSnapshot) -> TagMembers:
    """Which guidelines and journeys carry each tag (for relationships to and from tags)."""
    return cast(
        TagMembers,
        _per_version(
            agent,
            "tags",
            lambda: tag_members(
                ((g.id, g.tags) for g in agent.guidelines), ((j.id, j.tags) for j in agent.journeys)
            ),
        ),
    )


@dataclass(frozen=True)
class UsableGuidelines:
    """The guidelines this turn may use at all (enabled, allowed by their audience tags), as
    recall found them: asked by scope instead of listed, so no turn walks all of them."""

    index: RecallIndex | None  # None before recall ran: nothing is usable
    tags: frozenset[str]  # the conversation's tags

    def ids_in_scope(self, journeys: Sequence[str] | set[str]) -> Container[str]:
        """Ids of the usable guidelines that are not journey-scoped or scoped to `journeys`, as a
        membership test (`RecallIndex.usable_in`)."""
        if self.index is None:
            return frozenset()
        return self.index.usable_in(self.tags, [None, *journeys])


# Read-only for every stage: a forked state shares them.
_SHARED_WHEN_FORKED = frozenset(
    {"deps", "agent", "session", "messages", "views", "lines", "usable"}
)


class TurnState:
    """Everything one turn has decided so far. Created, run through the stages once, discarded."""

    def __init__(
        self,
        deps: EngineDeps,
        agent: AgentSnapshot,
        session: SessionState,
        messages: Sequence[InboundMessage],
        *,
        turn_id: str,
        trace: TurnTrace,
        llm: TurnLLM,
    ) -> None:
        # Inputs, read by every stage.
        self.deps = deps
        self.agent = agent
        self.session = session
        self.messages = messages
        self.turn_id = turn_id
        self.views = node_views_of(agent)
        # The language this turn answers in (`engine.language.session`), set by the load stage;
        # every line the engine writes itself is in it (`line`).
        self.language: str = session.language or agent.config.languages[0]
        self.lines: Lines = agent.config.lines()  # (cheap: a few dicts)
        # Who this turn answers: the sender of its last message (in a group, one of several).
        last = messages[-1].sender_id if messages else None
        self.sender: str = last or session.customer_id
        # Written by every stage: what happened and why; every LLM call goes through `llm`.
        self.trace = trace
        self.llm = llm
        # CPU seconds spent reading and grounding values this turn (`engine.values.cost`)
        self.values_clock: list[float] = [0.0]
        # Secret values seen this turn, in memory only: every stage masks what it writes. The
        # names the step being answered asked for are secret whatever this version declares.
        self.secrets = TurnSecrets(
            secret_names_of(agent) | set(session.secrets_asked),
            plain=(c.value for c in session.collected if not c.secret),
        )
        # (name, value) typed for a secret name ahead of its step, read in the match round and
        # remembered when the turn masks (`engine.stages.secrets_ahead`)
        self.secrets_typed_ahead: list[tuple[str, str]] = []
        # … or the reading failed: the turn's prompts may quote a secret nobody recognised
        self.secrets_unread = False
        # offset → an earlier event of the session with this turn's secrets masked (rewritten)
        self.masked_earlier_events: dict[int, Event] = {}
        # texts already searched for earlier turns' secrets (`engine.stages.secret_echoes`)
        self.read_for_echoes: set[str] = set()
        # Appended by load (customer messages), tools (tool events) and compose (the reply).
        self.events: list[Event] = []
        # Journey progress — written by match, activation, tools and interrupts.
        self.paths: dict[str, tuple[str | None, ...]] = dict(session.journey_paths)
        self.steps: dict[str, str] = {}  # journey id → node id shown this turn
        self.completed: list[str] = list(session.completed_journeys)
        self.completed_by: dict[str, tuple[str, ...]] = dict(session.completed_by)
        self.suspended: list[str] = list(session.suspended_journeys)
        self.said_with_request: dict[str, tuple[int, ...]] = dict(session.said_with_request)
        self.collected: list[CollectedValue] = list(session.collected)
        # Recall: the guidelines this turn may match, and those it may use at all (enabled and
        # allowed by their tags: what entailment may add).
        self.candidates: list[Guideline] = []
        self.usable = UsableGuidelines(None, frozenset())
        # Match and activation (and re-matching after tools).
        self.matches: dict[str, gm.GuidelineMatch] = {}
        self.clarifications: list[Guideline] = []
        self.completed_customer_dependent: list[str] = []
        # Tools and interrupts.
        self.tool_results: list[ToolOutcome] = []
        self.executed_tools: set[str] = (
            set()
        )  # ran this turn (whatever the outcome): not offered again
        self.succeeded_tools: set[str] = (
            set()
        )  # succeeded this turn: their journey steps may move on
        self.performed_tool_steps: list[
            tuple[str, str]
        ] = []  # (journey, node) whose tools succeeded
        self.failed_steps: dict[str, str] = dict(session.failed_steps)  # journey → failed tool step
        # journeys whose failed step's retry offer was not taken up (`engine.stages.retry_offers`)
        self.retries_not_taken: list[str] = list(session.retries_not_taken)
        # journey → a consequential tool step left for the next turn: it asks before it runs
        self.confirm_steps: dict[str, str] = dict(session.confirm_steps)
        # journey → the offset of the message that asked for its current run (journey_progress)
        self.run_started: dict[str, int] = dict(session.run_started)
        # sender → principal; written only from tool results (`control.principal`)
        self.principals: dict[str, dict[str, Any]] = dict(session.principals)
        # Confirmation: the call the customer agreed to this turn (load), the one asked now (tools).
        self.confirmed: PendingConfirmation | None = None
        self.pending_confirmation: PendingConfirmation | None = None
        self.declined_tools: set[str] = set()  # the customer said no to these this turn
        self.interrupt: PendingInterrupt | None = session.pending_interrupt
        # The calls of speculative tools run ahead on predicted decisions, which this turn's
        # dispatcher reuses for the very same call (`engine.stages.tools_ahead`); None: none.
        self.tools_ahead: ToolsAhead | None = None
        self.reply_options: list[dict[str, Any]] = []
        self.reply_view: dict[str, Any] | None = None
        # Any stage: what the reply must ask for, and facts it must state; read by compose.
        self.questions: list[str] = []
        self.notes_for_reply: list[str] = []
        # Handoff (`engine.stages.handoff`): who answers after this turn, and why.
        self.mode: SessionMode = session.mode
        self.handoff: Handoff | None = session.handoff
        self._offset = session.next_offset()

    def fork(self, deps: EngineDeps, llm: TurnLLM, trace: TurnTrace) -> TurnState:
        """A copy to decide on without touching this one (`engine.stages.speculation`): the
        inputs and per-version data are shared, every container a stage writes is copied, and
        the copy has its own deps, model and trace."""
        twin = copy.copy(self)
        for name, value in vars(self).items():
            if name in _SHARED_WHEN_FORKED:
                continue
            if isinstance(value, list | dict | set):
                setattr(twin, name, copy.copy(value))
        twin.secrets = copy.deepcopy(self.secrets)
        twin.deps, twin.llm, twin.trace = deps, llm, trace
        return twin

    # -- shared helpers ---------------------------------------------------------------------------

    def add_event(
        self, kind: EventKind, source: EventSource, text: str | None = None, **data: Any
    ) -> Event:
        event = Event(
            id=self.deps.ids.new_id("ev_"),
            offset=self._offset,
            kind=kind,
            source=source,
            created_at=self.deps.clock.now(),
            turn_id=self.turn_id,
            text=text,
            data=data,
        )
        self._offset += 1
        self.events.append(event)
        return event

    def line(self, key: str, /, **values: Value) -> str:
        """The engine's line `key` in this turn's language, as the agent words it."""
        return self.lines.line(key, self.language, **values)

    def timed(self, stage: str, started: float) -> float:
        """Record how long a stage took since `started`; returns the time it ended."""
        now = time.perf_counter()
        self.trace.stages.append(StageTiming(stage=stage, ms=round((now - started) * 1000, 3)))
        return now

    def variables(self) -> dict[str, Any]:
        """Context variables: the agent's defaults, overridden by this customer's values."""
        values = {v.name: v.default for v in self.agent.variables if v.default is not None}
        values.update(self.session.variables)
        return values

    def context(self) -> TurnContext:
        """What the prompts see now: history including this turn's events, variables, results."""
        return TurnContext(
            agent=self.agent,
            session=self.session,
            history=(*self.earlier_events(), *self.events),
            variables=self.variables(),
            terms=self.agent.terms,
            tool_results=tuple(self.tool_results),
            language=self.language,
        )

    def earlier_events(self) -> list[Event]:
        """The session's events as later turns may see them: the evidence kept from before the
        loaded window (`engine.sessions.history`), then the window. A tool result whose tool said
        `control.lifespan: "response"` served the turn it ran in, and no other."""
        earlier = (*self.session.kept_evidence, *self.session.events)
        return [e for e in earlier if not is_response_only(e)]

    def own_earlier_results(self) -> list[Event]:
        """Successful tool events of earlier turns that this turn's sender caused (another
        sender's lookups never fill or ground this sender's arguments)."""
        return [
            e
            for e in self.earlier_events()
            if e.kind is EventKind.TOOL and not e.data.get("error") and self.is_own(e)
        ]

    def collected_for(self, journey_id: str | None = None) -> dict[str, Any]:
        """Latest value per field name; a secret only if it was given in this very turn."""
        values: dict[str, Any] = {}
        for c in self.collected:
            if c.secret and c.turn_id != self.turn_id:
                continue  # stored masked: a tool that needs it again asks for it again
            if journey_id is None or c.journey_id == journey_id:
                values[c.name] = c.value
        return values

    def active(self) -> list[str]:
        """Journeys with a current step (not ended), as of now in this turn."""
        return [
            j
            for j, p in self.paths.items()
            if p and p[-1] is not None and self.agent.has_journey(j)
        ]

    def is_own(self, event: Event) -> bool:
        """Whether an event belongs to this turn's sender (events from before senders were
        recorded belong to the session's customer)."""
        return self.session.sender_of(event) == self.sender

    def writer_of(self, offset: int | None) -> str | None:
        """Who wrote the customer message at `offset` as its channel named them (None when it
        did not); without an offset, or for one no longer at hand, this turn's last message's."""
        if offset is not None:
            for events in (self.events, self.session.events, self.session.kept_evidence):
                for event in events:
                    if event.offset == offset and event.kind is EventKind.MESSAGE:
                        sender = event.data.get("sender")
                        return str(sender) if sender else None
        return self.messages[-1].sender_id if self.messages else None

    def messages_from(self, sender: str) -> list[InboundMessage]:
        """This turn's messages written by `sender` (a message that names nobody is the
        session's customer's)."""
        customer = self.session.customer_id
        return [m for m in self.messages if (m.sender_id or customer) == sender]

    @property
    def reply_address(self) -> dict[str, Any] | None:
        """Where the customer is answered: the channel address of this turn's latest message that
        carries one (bounded: `latest_reply_to`), else the one the session remembers (a message
        posted through the API carries none)."""
        return latest_reply_to(self.messages) or self.session.last_reply_to

    @property
    def principal(self) -> dict[str, Any] | None:
        """Who a tool established this turn's sender to be, if anyone."""
        return self.principals.get(self.sender)

    def prerequisites_met(self, journey: Journey) -> bool:
        return all(self.completed_by_sender(r) for r in journey.requires)

    def completed_by_sender(self, journey_id: str) -> bool:
        """Whether this turn's sender has completed `journey_id` (for prerequisites)."""
        if journey_id not in self.completed:
            return False
        senders = self.completed_by.get(journey_id)
        if senders is None:
            return self.sender == self.session.customer_id
        return self.sender in senders
