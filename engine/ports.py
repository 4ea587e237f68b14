"""Ports: how the engine talks to the world. Adapters in `infra/` implement them; the engine only
depends on these Protocols (and tests use in-memory or scripted implementations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from engine.model import AgentSnapshot
from engine.sessions.inbox import ClaimOutcome
from engine.sessions.session import Event, SessionState

if TYPE_CHECKING:  # annotations only: a CLI command that reads an agent does not load numpy
    import numpy as np
    from numpy.typing import NDArray

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Usage:
    """Tokens of one answer. `prompt_tokens` counts the whole prompt, cached parts included;
    `cached_prompt_tokens` / `cache_write_tokens` say how much of it a provider read from (or
    wrote to) its prompt cache, when it reports that (OpenAI's automatic cache, Bedrock's cache
    points)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    # of the prompt tokens, those the provider's prompt cache served (OpenAI's
    # `prompt_tokens_details.cached_tokens`, Bedrock's `cacheReadInputTokens`)
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0  # written to the cache (Bedrock's `cacheWriteInputTokens`)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_prompt_tokens + other.cached_prompt_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Generation(Generic[T]):
    """A validated LLM answer with what it cost."""

    value: T
    usage: Usage
    model: str
    latency_ms: float
    attempts: int = 1


@runtime_checkable
class SchematicLLM(Protocol):
    """Prompt + pydantic schema → validated object + usage.

    Adapters raise `LLMTransientError` (429 / 5xx / timeout), `LLMOutputInvalid` (not JSON or not
    the schema) or `LLMError`. Retries, repair, routing and budgets are added by
    `engine.llm.TurnLLM`, so every adapter gets the same policy.
    """

    async def generate(self, prompt: str, schema: type[T], *, model: str) -> Generation[T]: ...


@runtime_checkable
class Embedder(Protocol):
    """Texts → unit-length float32 vectors, shape (len(texts), dim)."""

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Top-k over precomputed embeddings of one agent version (journeys, terms, …).

    `namespace` says which collection ("journeys", "terms"); results are (id, cosine score), best
    first. Only the query is embedded on the hot path.
    """

    async def nearest(
        self, namespace: str, query: NDArray[np.float32], k: int
    ) -> list[tuple[str, float]]: ...


@runtime_checkable
class AgentStore(Protocol):
    async def get(self, agent_id: str, version: str | None = None) -> AgentSnapshot:
        """The given version, or the published one when `version` is None. Raises AgentNotFound."""
        ...

    async def publish(self, snapshot: AgentSnapshot) -> str:
        """Store a version and make it the published one atomically; returns the version."""
        ...


@dataclass(frozen=True)
class TurnCommit:
    """Everything one turn writes, committed atomically. The store owns `trace` and the dicts of
    `masked_traces` from the commit on (it may keep them as they are): build them for the commit
    and do not change them after it."""

    turn_id: str
    expected_version: int
    state: SessionState  # the new state, version already = expected_version + 1
    new_events: Sequence[Event]  # stores persist these (state.events is the recent window)
    trace: dict[str, Any] = field(default_factory=dict)
    # Earlier events rewritten with a secret masked, at their own offsets: the customer typed a
    # password before the turn that recognised it as one (`engine.privacy.secrets`).
    masked_events: Sequence[Event] = ()
    # The stored traces of those earlier events' turns, rewritten with the secret masked too
    # (turn id → trace): their recorded prompts quote the customer's words.
    masked_traces: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # Whether the session had a journey in flight before this turn: a store that indexes
    # sessions in flight (for publish-time checks) then knows to clear its entry.
    in_flight_before: bool = True


@runtime_checkable
class SessionStore(Protocol):
    async def load(self, session_id: str) -> SessionState | None:
        """The session's state with its most recent events only (`engine.sessions.history.EVENT_WINDOW`):
        a turn's reads are bounded however long the session has run."""
        ...

    async def create(self, state: SessionState) -> SessionState:
        """Create a new session; if it exists already, return the stored one."""
        ...

    async def commit(self, commit: TurnCommit) -> bool:
        """Write the turn if the stored version still equals `expected_version`.

        Returns True when written, False when this `turn_id` was already committed (idempotent
        replay). Raises `SessionConflict` when another turn moved the version first.
        """
        ...

    async def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None: ...

    async def events(
        self, session_id: str, *, after: int = -1, limit: int = 100
    ) -> list[Event] | None:
        """The stored history beyond what `load` returns: up to `limit` events with an offset
        above `after`, in order; None for an unknown session. Never read by a turn."""
        ...

    async def erased_at(self, channel: str, customer_id: str) -> datetime | None:
        """When `(channel, customer_id)` was last erased (while remembered,
        `engine.privacy.erasure.ERASURE_TOMBSTONE_DAYS`), or None. Read only where a session is
        created: it starts with their queued messages dropped (`SessionState.erased_senders`)."""
        ...

    def person_digest(self, channel: str, person: str) -> str:
        """How this store names a person where it remembers their erasure (tombstones, a
        session's `erased_senders`): a keyed digest (`engine.privacy.erasure.PersonDigest`), never the
        id, and never a hash anyone could recompute without the store's key."""
        ...


@runtime_checkable
class VariableStore(Protocol):
    """Per-customer values of context variables (customer → agent → defaults, later wins). A
    customer is an id on a channel, as everywhere: the same id on two channels is two people."""

    async def get_variables(
        self, agent_id: str, channel: str, customer_id: str
    ) -> dict[str, Any]: ...

    async def set_variable(
        self, agent_id: str, channel: str, customer_id: str, name: str, value: Any
    ) -> None: ...


@runtime_checkable
class InboxStore(Protocol):
    """Deduplication of inbound channel events. A claim is CLAIMED by an owner (one request)
    until that owner marks it QUEUED. The same owner claiming again gets it again (a retried
    call whose first response was lost); another owner gets it only once the claim's lease has
    run out without it being queued (the claimant died between the claim and the enqueue)."""

    async def claim(
        self, channel: str, event_id: str, ttl_seconds: int, *, owner: str, lease_seconds: int
    ) -> ClaimOutcome: ...

    async def mark_queued(self, channel: str, event_id: str, owner: str) -> bool: ...

    async def release(self, channel: str, event_id: str, owner: str) -> None: ...

    async def note_one_moment(self, channel: str, event_id: str, ttl_seconds: int) -> bool:
        """Note on the event's claim that its "one moment" line goes out now: True for the first
        caller only, ever (a conditional write), so two deliveries never both send it. A claim
        that is not there (expired, or a message queued without one) is created, queued."""
        ...


@dataclass(frozen=True)
class ToolCall:
    """One call the engine decided to make. `idempotency_key` = session:turn:index."""

    id: str
    tool: str
    arguments: dict[str, Any]
    idempotency_key: str


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the conversation it runs in.

    `sender_id` is who wrote the message this turn answers (in a group, one of several people);
    `principal` is who a tool established that sender to be (e.g. after a login), or None. Only
    tool results set it — never the model — so a tool checks ownership against it."""

    agent_id: str
    session_id: str
    customer_id: str
    turn_id: str
    variables: dict[str, Any] = field(default_factory=dict)
    sender_id: str = ""
    principal: dict[str, Any] | None = None
    # Files and locations the customer sent with the messages this turn answers (`Attachment`
    # as JSON); a tool fetches a file with the channel's credentials (infra.channels.media).
    attachments: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result; errors are results too (`error` set), never exceptions."""

    call_id: str
    tool: str
    data: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    control: dict[str, Any] = field(default_factory=dict)
    view: dict[str, Any] | None = None
    fragments: Sequence[dict[str, Any]] = ()
    error: str | None = None
    duration_ms: float = 0.0
    # the arguments that produced this result (secrets masked), shown next to it in prompts so
    # two results of one tool (ages 16 and 30) can be told apart
    arguments: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ToolDispatcher(Protocol):
    async def dispatch(
        self, calls: Sequence[ToolCall], context: ToolContext
    ) -> list[ToolOutcome]: ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class IdGenerator(Protocol):
    def new_id(self, prefix: str = "") -> str: ...
