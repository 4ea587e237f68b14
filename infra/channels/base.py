"""The channel layer's contract: what comes in (`ChannelRequest`), what a webhook yields
(`WebhookOutcome` with `NormalizedMessage`s), what goes out (`OutboundReply` → `DeliveryReceipt`),
and the `Channel` protocol every platform adapter implements.

Independent of AWS and of the turn logic: the webhook Lambda turns its event into a
`ChannelRequest`, calls `channel.handle(request)`, answers with the outcome's status/body/headers
and enqueues the messages; the turn worker later calls `channel.send(reply, client)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.sessions.session import Attachment, InboundMessage

if TYPE_CHECKING:  # httpx costs ~180 ms to import and the webhook path never sends
    import httpx

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _now() -> datetime:
    return datetime.now(UTC)


class Clock(Protocol):
    """Same shape as `engine.ports.Clock` (any engine clock fits), declared here so the webhook
    Lambda does not import `engine.ports` and, with it, numpy."""

    def now(self) -> datetime: ...


class ChannelRequest(BaseModel):
    """One inbound HTTP request, exactly as received.

    `url` is the public URL the platform called, query string included (Twilio signs it, so behind
    API Gateway build it from the configured public base URL, never from `Host`). Header names are
    lower-cased on construction, so lookups are case-insensitive whether the event came from a REST
    (v1, case kept) or HTTP (v2, lower-cased) API. `body` is the raw bytes: signatures are verified
    on them, never on re-serialized data.
    """

    model_config = _FROZEN
    method: str
    url: str
    path: str
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    query: dict[str, str] = Field(default_factory=dict)
    body: bytes = Field(default=b"", repr=False)
    received_at: datetime = Field(default_factory=_now)

    @field_validator("method")
    @classmethod
    def _upper_method(cls, value: str) -> str:
        return value.upper()

    @field_validator("headers", mode="before")
    @classmethod
    def _lower_header_names(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k).lower(): v for k, v in value.items()}
        return value

    def header(self, name: str) -> str | None:
        """The value of header `name` (any case), or None."""
        return self.headers.get(name.lower())

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-cased (`application/json`), or ""."""
        raw = self.header("content-type") or ""
        return raw.split(";", 1)[0].strip().lower()

    @classmethod
    def from_http(
        cls,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        received_at: datetime | None = None,
    ) -> ChannelRequest:
        """Build a request from a method, full URL, headers and raw body; `path` and `query` are
        derived from the URL (first value wins for repeated query parameters)."""
        parts = urlsplit(url)
        query: dict[str, str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            query.setdefault(key, value)
        return cls(
            method=method,
            url=url,
            path=parts.path or "/",
            headers=dict(headers or {}),
            query=query,
            body=body,
            received_at=received_at or _now(),
        )


class InterruptResult(BaseModel):
    """The result of a pending interrupter step (a form submitted, a link's flow finished),
    delivered for the session by the management API rather than typed by the customer."""

    model_config = _FROZEN
    call_id: str = Field(min_length=1, max_length=200)  # the pending interrupt it completes
    result: Any = Field(repr=False)


class NormalizedMessage(BaseModel):
    """One customer message, the same shape whichever channel it came from.

    - `event_id`: the platform's id for this delivery, stable across its retries: the dedup id.
    - `account_id`: which of our accounts received it (Telegram bot id, Slack team, WhatsApp phone
      number id, Twilio AccountSid, "generic"); event ids are only unique within an account.
    - `conversation_key`: the session key (`tg:{bot_id}:{chat_id}[:{topic}][:user:{id}]`,
      `slack:{team}:{channel}` for a DM, `slack:{team}:{channel}[:{thread}]:user:{id}` in a channel,
      `wa:{phone_number_id}:{bsuid or wa_id}`, `twilio:{AccountSid}:{To}:{From}`, `generic:{id}`).
    - `text`: what the customer wrote; for a button click, the button's label when the platform
      tells it, else "". Cleaned of control characters and capped (`infra.channels.text`).
    - `choice`: the picked option's id (callback data, action value, button/list reply id, button
      payload), or None for plain text.
    - `reply_to`: everything `Channel.send` needs to answer (chat id, thread, phone number id,
      callback query id, response_url …); opaque to the engine.
    - `attachments`: files (by the platform's reference, see `engine.sessions.session.Attachment`) and
      shared locations; a caption or a file's comment is the `text`.
    - `raw_type`: the platform's own kind of event (`message`, `callback_query`, `block_actions`,
      `interactive.button_reply`, `sms` …), for traces.
    - `sender_team`: the sender's own workspace, where the platform states it (Slack: the event's
      `user_team` / `team`, a click's `user.team_id`). A Slack Connect channel holds people of
      other organizations; the support relay trusts only its allowed teams
      (`infra.channels.support_channel`).
    """

    model_config = _FROZEN
    channel: str
    account_id: str
    event_id: str
    conversation_key: str
    customer_id: str = Field(repr=False)
    customer_name: str | None = Field(default=None, repr=False)
    text: str = Field(default="", repr=False)
    choice: str | None = None
    reply_to: dict[str, Any] = Field(default_factory=dict, repr=False)
    raw_type: str
    received_at: datetime
    sent_at: datetime | None = None
    interrupt_result: InterruptResult | None = None  # set on a delivered form result only
    sender_team: str | None = None
    # Files and shared locations (a photo's caption, a file's comment, is `text`).
    attachments: list[Attachment] = Field(default_factory=list, repr=False)

    @property
    def dedup_key(self) -> str:
        """Globally unique id of this delivery: `{channel}:{account_id}:{event_id}`."""
        return f"{self.channel}:{self.account_id}:{self.event_id}"

    def to_inbound(self) -> InboundMessage:
        """The engine's view of this message. Channel details travel in `metadata` (`reply_to`
        too: a pending interrupter keeps it); a delivered interrupt result as `resume` +
        `call_id` (what `engine.stages.interrupts` reads)."""
        metadata: dict[str, Any] = {
            "channel": self.channel,
            "conversation_key": self.conversation_key,
            "customer_id": self.customer_id,
            "raw_type": self.raw_type,
        }
        if self.reply_to:
            # Kept with a pending interrupter, to answer its result when it arrives.
            metadata["reply_to"] = dict(self.reply_to)
        if self.interrupt_result is not None:
            metadata["resume"] = self.interrupt_result.result
            metadata["call_id"] = self.interrupt_result.call_id
        return InboundMessage(
            event_id=self.dedup_key,
            text=self.text,
            choice=self.choice,
            received_at=self.received_at,
            metadata=metadata,
            attachments=tuple(
                a if a.channel else a.model_copy(update={"channel": self.channel})
                for a in self.attachments
            ),
        )


OutcomeKind = Literal["messages", "handshake", "ignored"]


class WebhookOutcome(BaseModel):
    """What to answer the platform, and the messages (possibly several, possibly none) to process.

    `kind="ignored"` means authentic but nothing to do (bot echo, delivery status, unsupported
    event); `reason` says why, for logs. Rejections are not outcomes: they are raised as
    `WebhookRejected` errors carrying their status.
    """

    model_config = _FROZEN
    kind: OutcomeKind
    messages: list[NormalizedMessage] = Field(default_factory=list)
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = Field(default_factory=dict)
    reason: str | None = None


class ReplyOption(BaseModel):
    """One choice offered to the customer: `id` comes back as `NormalizedMessage.choice`."""

    model_config = _FROZEN
    id: str = Field(min_length=1)
    label: str = Field(min_length=1)


class OutboundReply(BaseModel):
    """An agent reply to deliver. `reply_to` is the `NormalizedMessage.reply_to` being answered.

    `options` are rendered natively (Telegram inline keyboard, Slack buttons, WhatsApp buttons or
    list) or as numbered text (SMS). `view` is UI-facing tool output: Slack appends `view["blocks"]`
    (Block Kit) and the generic channel forwards it verbatim; other channels ignore it, so `text`
    must always stand on its own.
    """

    model_config = _FROZEN
    text: str = ""
    options: list[ReplyOption] = Field(default_factory=list)
    view: dict[str, Any] | None = None
    reply_to: dict[str, Any] = Field(default_factory=dict, repr=False)
    # Stable per reply (the agent's event id): a retried delivery repeats it, so a receiver that
    # can (the generic channel's front end) drops what it already has.
    id: str = ""
    # The language the reply is written in: what a channel adds around it ("Reply with a
    # number:", a list's button) is written in it too (`line`).
    language: str = "en"

    @model_validator(mode="after")
    def _has_something_to_say(self) -> OutboundReply:
        if not self.text.strip() and not self.options:
            raise ValueError("a reply needs text, options, or both")
        return self

    @property
    def display_text(self) -> str:
        """The text to show: `text`, or a neutral prompt when only options were given (every
        platform rejects an empty message)."""
        return self.text.strip() or self.line("choose_option")

    def line(self, key: str, **values: object) -> str:
        """The engine's line `key` (`engine.language.lines`) in the reply's language, its
        placeholders filled with `values`."""
        from engine.language.lines import line  # (read once, on the first send that needs it)

        return line(key, self.language, **values)


class DeliveryReceipt(BaseModel):
    """A reply went out. `message_ids`: the platform's id of each message sent (a long reply is
    split into several parts; an id is "" when the platform returns none)."""

    model_config = _FROZEN
    channel: str
    message_ids: list[str] = Field(default_factory=list)
    # Why a rendered payload (buttons, list, blocks) went out as plain numbered text instead:
    # a renderer bug signal (`infra.channels.delivery.rich_or_plain`); empty normally.
    plain_fallbacks: list[str] = Field(default_factory=list)

    @property
    def parts(self) -> int:
        return len(self.message_ids)


@runtime_checkable
class Channel(Protocol):
    """A chat platform: verifies and normalizes its webhooks, and sends replies through its API."""

    name: str

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """Verify `request` (raw bytes, constant time) then normalize it. Raises a
        `WebhookRejected` subclass for anything not to be processed as authentic."""
        ...

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """Deliver `reply`. Raises a `DeliveryError` subclass (`retryable` says whether to retry)."""
        ...
