"""Session state: everything a stateless turn needs to know about one conversation.

A turn reads a `SessionState`, computes a new one plus the events it adds, and commits both at once
under the session's `version` (optimistic concurrency) and its own `turn_id` (idempotency).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class EventKind(StrEnum):
    MESSAGE = "message"
    TOOL = "tool"
    STATUS = "status"


class EventSource(StrEnum):
    CUSTOMER = "customer"
    AGENT = "agent"
    SYSTEM = "system"
    HUMAN = "human"  # a person from the business, while the session is handed off to them


class Event(BaseModel):
    """One thing that happened in a session, in order (`offset`)."""

    model_config = _FROZEN
    id: str
    offset: int
    kind: EventKind
    source: EventSource
    created_at: datetime
    turn_id: str | None = None
    text: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


# "other": something the platform delivered that is neither text nor a file nor a location (a
# contact card, a poll …), named by `name`; like an unreadable file, it is answered, not dropped.
AttachmentKind = Literal[
    "image", "video", "audio", "voice", "document", "sticker", "file", "location", "other"
]


class Attachment(BaseModel):
    """Something the customer sent besides text: a file (by the platform's reference: fetch it
    with the channel's credentials) or a shared location (as values). A caption or comment is the
    message's text, not part of the attachment."""

    model_config = _FROZEN
    kind: AttachmentKind
    channel: str | None = None  # the channel it came through (whose credentials fetch it)
    platform_id: str | None = None  # Telegram file_id, WhatsApp media id, Slack file id
    url: str | None = None  # Twilio MediaUrl, Slack url_private: needs the channel's credentials
    mime: str | None = None
    size: int | None = None  # bytes, when the platform says
    name: str | None = None  # file name, or a shared place's name
    latitude: float | None = Field(default=None, ge=-90, le=90)
    longitude: float | None = Field(default=None, ge=-180, le=180)
    address: str | None = None


class InboundMessage(BaseModel):
    """A customer message as the engine receives it, already normalized from its channel."""

    model_config = _FROZEN
    event_id: str  # the channel's id for it: deduplication key
    text: str = ""
    choice: str | None = None  # a button / list pick, when the channel carries one
    received_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    attachments: tuple[Attachment, ...] = ()

    @property
    def is_unreadable_media(self) -> bool:
        """Only files the agent cannot read (no text, no pick, no location): answered with the
        agent's `unsupported_media_response` instead of a turn on an empty message."""
        return (
            not self.text.strip()
            and self.choice is None
            and bool(self.attachments)
            and all(a.kind != "location" for a in self.attachments)
        )

    @property
    def sender_id(self) -> str | None:
        """Who wrote it, as the channel names them (`metadata.customer_id`), if it says."""
        sender = self.metadata.get("customer_id")
        return str(sender) if sender else None


class PendingInterrupt(BaseModel):
    """A tool interrupted the turn and waits for the customer (a selector's pick, a form)."""

    model_config = _FROZEN
    tool: str
    call_id: str
    kind: str  # "selector" | "interrupter"
    options: tuple[dict[str, Any], ...] = ()
    journey_id: str | None = None
    node_id: str | None = None
    prompt: str | None = None
    sender: str | None = None  # who was asked: their pick or form result resumes it
    # Where the channel answers the customer who was asked (the message's `reply_to` metadata,
    # opaque here): the reply to a form result delivered later goes there.
    reply_to: dict[str, Any] | None = None


class PendingConfirmation(BaseModel):
    """A consequential call the agent stated and the customer has to agree to, in their next
    message, before it runs. It lives for one turn: anything but a clear yes drops it."""

    model_config = _FROZEN
    tool: str
    arguments: dict[str, Any]
    summary: str  # the action and values as the customer saw them
    sender: str  # only this sender's agreement counts
    journey_id: str | None = None
    node_id: str | None = None
    retry: bool = False  # asked because the same step failed before
    # The customer already said yes, but the call needs a secret that is never kept (masked
    # here): the agreement waits one more turn for the secret to be typed again.
    agreed: bool = False


class CollectedValue(BaseModel):
    """A typed value a journey step collected from the customer.

    `origin` is set when the customer gave it by an act rather than in words — a pick among
    offered options ("customer pick from choose_size") or a submitted form ("form result of
    address_form"): such a value is itself evidence a tool argument may be grounded on."""

    model_config = _FROZEN
    journey_id: str
    node_id: str
    name: str
    value: Any
    turn_id: str
    origin: str | None = None
    sender: str | None = None  # who gave it; a pick or form result grounds only their calls
    # Given ahead of its step (grounded in the customer's words when given): the step it belongs
    # to is passed once the journey reaches it (`engine.matching.values_ahead`).
    ahead: bool = False
    # A secret's clear value exists only in the turn that collected it; stored, it is masked and
    # no longer a value (a later tool that needs it asks again — see `engine.privacy.secrets`).
    secret: bool = False
    # How the customer gave it (`engine.values.binding`): True when they said exactly this for
    # this field — a consequential tool may run on it; False when it was worked out or chosen
    # among several — shown and confirmed first. None: stored before answers were bound, and
    # treated as worked out.
    bound: bool | None = None
    evidence: str = ""  # where it was read ("customer message #7: '40'")


class SecretDigests(BaseModel):
    """What a session keeps of the secret values its customers typed, to recognise one a model
    echoes in a later turn: keyed digests, never a value (`engine.privacy.digests`)."""

    model_config = _FROZEN
    salt: str  # random per session: the same value has unrelated digests in two sessions
    # a MAC of each value under a key derived from the deployment's key and the salt; newest last
    digests: tuple[str, ...] = ()


class SessionMode(StrEnum):
    """Who answers the customer: the agent (`auto`), or a person (`human`) while the agent
    records the conversation and stays silent (`engine.handoff`)."""

    AUTO = "auto"
    HUMAN = "human"


class Handoff(BaseModel):
    """The session is with a person: why, since when, who has it, where the customer is answered.

    Set when the mode turns `human`, cleared when a person hands the session back."""

    model_config = _FROZEN
    reason: str
    # what started it: "customer_request" | "guideline" | "journey_step" | "operator"
    trigger: str
    source_id: str | None = None  # the guideline or journey step that handed off
    since: datetime
    assignee: str | None = None  # the person who took it
    taken_at: datetime | None = None
    # A ticket-style record once no person picked it up in time (or out of business hours).
    ticket_id: str | None = None
    # Where the customer's channel answers them (the last message's `reply_to`, opaque here):
    # a person's message is delivered there.
    reply_to: dict[str, Any] | None = None
    # The support-side conversation (e.g. a Slack thread: channel and thread ts), once opened.
    support_thread: dict[str, str] | None = None


class SessionState(BaseModel):
    """The persisted state of one conversation with one customer and one agent."""

    model_config = _FROZEN
    id: str
    agent_id: str
    customer_id: str
    channel: str = "generic"
    version: int = 0  # bumped by every committed turn; writes are conditional on it
    # The most recent events (at most `engine.sessions.history.EVENT_WINDOW` when loaded from a store),
    # not the whole history: a turn's reads stay bounded however long the session runs.
    events: tuple[Event, ...] = ()
    # Older events still needed as evidence (tool results, the messages collected values came
    # from), folded out of the window by `engine.sessions.history.fold_history`; bounded too.
    kept_evidence: tuple[Event, ...] = ()
    # journey id → visited node ids; a trailing None means the journey was exited. Stored
    # compacted, so a looping journey stays bounded: the last run, each step's last two entries
    # (`engine.matching.journey_graph.compact_path`).
    journey_paths: dict[str, tuple[str | None, ...]] = Field(default_factory=dict)
    completed_journeys: tuple[str, ...] = ()
    # journey id → the senders who completed it; a prerequisite is met only for them (a login
    # one person completed is not another's). Journeys completed before senders were recorded
    # count for the session's customer.
    completed_by: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # a journey waiting for a prerequisite journey to complete, to be resumed afterwards
    suspended_journeys: tuple[str, ...] = ()
    # journey id → the offsets of the customer's messages of the turn that asked for it while a
    # prerequisite ran first: its run may take values said with the request from them
    # (`engine.matching.journeys.said_ahead_messages`); kept until that run ends.
    said_with_request: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    applied_guideline_ids: tuple[str, ...] = ()
    # customer-dependent guidelines whose agent part is done but the customer's is not
    pending_customer_guideline_ids: tuple[str, ...] = ()
    collected: tuple[CollectedValue, ...] = ()
    variables: dict[str, Any] = Field(default_factory=dict)  # per-customer context variable values
    customer_tags: tuple[str, ...] = ()
    pending_interrupt: PendingInterrupt | None = None
    pending_confirmation: PendingConfirmation | None = None
    # sender id → who a tool established they are (`control.principal`); never set by a model
    principals: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # journey id → the tool step whose tool failed last; retrying a consequential one asks first
    failed_steps: dict[str, str] = Field(default_factory=dict)
    # journeys whose failed step's retry the customer was offered and did not take up: the step
    # is held (not run, not asked again) until they ask for it (`engine.stages.retry_offers`)
    retries_not_taken: tuple[str, ...] = ()
    # journey id → a consequential tool step the journey reached when a turn's tool budget ran
    # out: it runs only after the customer's yes to exactly that call, never on whatever they
    # write next (`engine.stages.tools`)
    confirm_steps: dict[str, str] = Field(default_factory=dict)
    # journey id → the offset of the customer message that asked for its current run: a tool
    # result from then on was produced for this request (a declared `source` grounds with it
    # alone; an older one is a candidate the customer confirms)
    run_started: dict[str, int] = Field(default_factory=dict)
    # The language the customer is served in (`engine.language.session`): their latest message's,
    # when the agent serves it; None until they write (the agent's default).
    language: str | None = None
    processed_event_ids: tuple[str, ...] = ()  # inbound ids already answered (bounded window)
    committed_turn_ids: tuple[str, ...] = ()  # bounded window, for idempotent commits
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Secret names the steps the session stands at ask the customer for (`engine.privacy.secrets`): the
    # next message answers them, whatever version reads it — a publish may end that step or
    # drop the declaration, the answer is still the secret that step asked for. Names only.
    secrets_asked: tuple[str, ...] = ()
    # Keyed digests of the secret values typed in this session, for a model's later echoes.
    secret_digests: SecretDigests | None = None
    # The agent version the last turn ran on. While a journey is in flight the next turn runs on
    # it too (pinned) unless the published version migrates it (`engine.versioning.pinning`).
    agent_version: str | None = None
    # `human` while a person has the conversation; changed only by mode events (`engine.handoff`)
    mode: SessionMode = SessionMode.AUTO
    handoff: Handoff | None = None
    # Where the customer's channel last answered this conversation: the `reply_to` of the latest
    # message a turn took that carried one (opaque here; the conversation's address — chat,
    # topic, number — as the channel builds it, not a sender's). A handoff started outside a
    # turn delivers a person's message there. Never in an event, a trace or a prompt; erasure
    # clears it (`engine.privacy.erasure`).
    last_reply_to: dict[str, Any] | None = None
    # Who was erased from this session, and when: `engine.privacy.erasure.person_digest` (never their
    # id) → the erasure's time. A message they wrote before it, still queued then, is dropped by
    # the turn; one written after is answered. Entries expire (`ERASURE_TOMBSTONE_DAYS`).
    erased_senders: dict[str, datetime] = Field(default_factory=dict)

    @property
    def active_journey_ids(self) -> list[str]:
        """Journeys with a live path: visited at least one node and not exited."""
        return [jid for jid, path in self.journey_paths.items() if path and path[-1] is not None]

    def collected_values(self, journey_id: str | None = None) -> dict[str, Any]:
        """Latest value per field name (corrections overwrite), optionally for one journey.
        Secrets are not values of a stored session: they were masked when it was stored."""
        return latest_values(self.collected, journey_id)

    def request_offsets(self) -> frozenset[int]:
        """The offsets of every waiting journey's request messages (`said_with_request`)."""
        return frozenset(o for offsets in self.said_with_request.values() for o in offsets)

    def sender_of(self, event: Event) -> str:
        """Who wrote an event: its `sender`, else the session's customer (events from before
        senders were recorded, and sessions of one customer)."""
        return str(event.data.get("sender") or self.customer_id)

    def next_offset(self) -> int:
        return self.events[-1].offset + 1 if self.events else 0

    def has_processed(self, event_id: str) -> bool:
        """Whether an inbound message id was answered: its message is in the window, or it is
        remembered beyond it (`processed_event_ids`)."""
        return event_id in self.processed_event_ids or any(
            e.data.get("channel_event_id") == event_id for e in self.events
        )

    def has_committed(self, turn_id: str) -> bool:
        """Whether a turn id committed: its events are in the window, or it is remembered
        beyond it (`committed_turn_ids`). Older turns are refused by the store's turn marker."""
        return turn_id in self.committed_turn_ids or any(e.turn_id == turn_id for e in self.events)


# A remembered address larger than this (JSON characters) is not kept: platform addresses are
# a few ids (a generic channel's callback URL is at most 2,048 characters).
MAX_REPLY_TO_CHARS = 4096


def latest_values(
    collected: Iterable[CollectedValue], journey_id: str | None = None
) -> dict[str, Any]:
    """Latest value per field name among `collected` (corrections overwrite), optionally for
    one journey; secrets left out."""
    values: dict[str, Any] = {}
    for c in collected:
        if (journey_id is None or c.journey_id == journey_id) and not c.secret:
            values[c.name] = c.value
    return values


def latest_reply_to(messages: Sequence[InboundMessage]) -> dict[str, Any] | None:
    """Where the channel answers the latest of `messages` that says (their `reply_to`
    metadata), or None: none says (the API channel), or the address is too large to keep."""
    for message in reversed(messages):
        address = message.metadata.get("reply_to")
        if isinstance(address, dict) and address:
            if len(json.dumps(address, default=str)) > MAX_REPLY_TO_CHARS:
                return None
            return dict(address)
    return None


# Bounded windows for processed_event_ids / committed_turn_ids. A turn also recognises the ids
# of the events in its loaded window, and the store refuses a second commit of a turn id (its
# TURN# marker) however old; this window only spares recomputing a recently redelivered turn.
MAX_REMEMBERED_IDS = 32


def remember(
    ids: tuple[str, ...], *new: str, known: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """Append ids to a bounded, duplicate-free window (oldest dropped first). Ids in `known`
    (those the event window itself shows) are not stored twice."""
    merged = tuple(i for i in dict.fromkeys((*ids, *new)) if i not in known)
    return merged[-MAX_REMEMBERED_IDS:]


def window_event_ids(events: tuple[Event, ...] | list[Event]) -> frozenset[str]:
    """The inbound message ids an event window shows (`SessionState.has_processed`)."""
    return frozenset(
        str(e.data["channel_event_id"]) for e in events if e.data.get("channel_event_id")
    )


def window_turn_ids(events: tuple[Event, ...] | list[Event]) -> frozenset[str]:
    """The turn ids an event window shows (`SessionState.has_committed`)."""
    return frozenset(e.turn_id for e in events if e.turn_id)
