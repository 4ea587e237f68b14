"""Slack: Events API and interactivity in, `chat.postMessage` out.

Inbound, one URL for both (told apart by content type), every request signed with v0 HMAC over
`v0:{timestamp}:{raw body}` and refused outside ±300 s of our clock:
- JSON `url_verification` → echo the challenge (a handshake; it is signed too).
- JSON `event_callback` with a `message` / `app_mention` from a person → a message. Bot messages,
  our own messages and every `subtype` (edits, deletions, joins, file shares …) are ignored, or the
  agent would answer itself in a loop.
- Form `payload=<json>` of type `block_actions` (a button click) → a message whose choice is the
  button's value. Other interactivity and slash commands are acknowledged and ignored.

Dedup id: for events, `{channel}:{ts}` rather than Slack's `event_id`. It is just as stable across
Slack's retries, and also equal for the two events (`app_mention` + `message.channels`, different
`event_id`s) Slack sends for one message when the app subscribes to both; so the agent answers once.
For clicks it is the `trigger_id`.

Conversations: a DM is one conversation (`slack:{team}:{channel}`); in channels each thread is one
(`slack:{team}:{channel}:{thread_ts}`), and the agent answers in that thread.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from engine.session import Attachment, AttachmentKind
from infra.channels.base import (
    ChannelRequest,
    Clock,
    DeliveryReceipt,
    NormalizedMessage,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.delivery import (
    error_for_status,
    json_body,
    post,
    retry_after_header,
    rich_or_plain,
)
from infra.channels.errors import DeliveryRejected, MalformedRequest, SignatureRejected
from infra.channels.ingress import (
    DEFAULT_MAX_BODY_BYTES,
    FORM,
    JSON,
    parse_form,
    parse_json_object,
    require_content_type,
    require_fresh_timestamp,
    require_header,
    require_method,
    require_size,
    unix_time,
    validate,
)
from infra.channels.media import MediaFile, download, require_host
from infra.channels.options import numbered_options
from infra.channels.platform_limits import SLACK_SELECT_OPTIONS, slack_violations
from infra.channels.signing import (
    SLACK_SIGNATURE,
    SLACK_TIMESTAMP,
    Secret,
    as_secret,
    constant_time_equals,
    sign_slack,
)
from infra.channels.slack_blocks import MAX_SECTION_CHARS, blocks_for, parts
from infra.channels.text import clean_text, utf16_len

if TYPE_CHECKING:
    import httpx

SLACK_API = "https://slack.com/api"
TYPING_STATUS = "is typing…"
# `ok:false` errors meaning "this payload is malformed": a renderer bug, retried as plain text.
_MALFORMED_ERRORS = frozenset(
    {"invalid_blocks", "invalid_blocks_format", "invalid_arguments", "msg_too_long"}
)
# `ok:false` errors that mean "Slack had a problem, try again", as opposed to "your request is wrong".
_TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
_HANDLED_EVENTS = frozenset({"message", "app_mention"})
# Subtypes that are still a person's new message: files shared with a comment, and a thread reply
# also sent to the channel. Every other subtype (edits, deletions, joins, bots) is ignored.
_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast"})


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Authorization(_Payload):
    user_id: str | None = None
    is_bot: bool = False


class _File(_Payload):
    id: str
    name: str | None = None
    mimetype: str | None = None
    size: int | None = None
    url_private: str | None = None


class _Event(_Payload):
    type: str
    user: str | None = None
    bot_id: str | None = None
    subtype: str | None = None
    text: str = ""
    ts: str | None = None
    thread_ts: str | None = None
    channel: str | None = None
    channel_type: str | None = None
    files: list[_File] = Field(default_factory=list)


class _EventCallback(_Payload):
    team_id: str
    event_id: str
    event: _Event
    authorizations: list[_Authorization] = Field(default_factory=list)


class _Text(_Payload):
    text: str = ""


class _Option(_Payload):
    value: str
    text: _Text | None = None


class _Action(_Payload):
    action_id: str
    value: str | None = None
    text: _Text | None = None
    selected_option: _Option | None = None  # static_select menus


class _Id(_Payload):
    id: str


class _User(_Id):
    team_id: str | None = None
    name: str | None = None


class _Container(_Payload):
    channel_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None


class _ClickedMessage(_Payload):
    ts: str | None = None
    thread_ts: str | None = None


class _BlockActions(_Payload):
    trigger_id: str
    user: _User
    team: _Id | None = None
    channel: _Id | None = None
    container: _Container | None = None
    message: _ClickedMessage | None = None
    response_url: str | None = None
    actions: list[_Action] = Field(default_factory=list)


def _conversation(team: str, channel: str, thread_ts: str | None, *, is_dm: bool, user: str) -> str:
    """A DM is one session; in a channel each person in each thread has their own session, so a
    login or a collected value never serves another member's message."""
    if is_dm:
        return f"slack:{team}:{channel}"
    thread = f":{thread_ts}" if thread_ts else ""
    return f"slack:{team}:{channel}{thread}:user:{user}"


class SlackChannel:
    """A Slack app. `signing_secret` verifies requests; `bot_token` (xoxb-…) posts replies.
    `bot_user_id`, if known, is ignored as a sender; the ids in each event's `authorizations`
    that are bots are ignored as well, so it is optional."""

    name = "slack"
    typing_refresh_seconds: float | None = None  # the status stays until the app replies

    def __init__(
        self,
        *,
        signing_secret: Secret,
        bot_token: Secret,
        clock: Clock,
        base_url: str = SLACK_API,
        bot_user_id: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._signing_secret = as_secret(signing_secret)
        self._bot_token = as_secret(bot_token)
        self.clock = clock
        self.base_url = base_url.rstrip("/")
        self.bot_user_id = bot_user_id
        self.max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return f"SlackChannel(base_url={self.base_url!r})"

    # -- inbound --------------------------------------------------------------------------------

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """Verify the v0 signature and timestamp, then dispatch on the body's kind."""
        require_method(request, ("POST",), self.name)
        require_size(request, self.max_body_bytes, self.name)
        media_type = require_content_type(request, (JSON, FORM), self.name)
        self._verify(request)
        if media_type == JSON:
            return self._from_event_body(parse_json_object(request.body, self.name), request)
        return self._from_form(parse_form(request.body, self.name), request)

    def _verify(self, request: ChannelRequest) -> None:
        signature = require_header(request, SLACK_SIGNATURE, self.name)
        timestamp = require_fresh_timestamp(
            request.header(SLACK_TIMESTAMP), self.clock.now(), self.name, SLACK_TIMESTAMP
        )
        expected = sign_slack(self._signing_secret, request.body, timestamp)
        if not constant_time_equals(signature.strip(), expected):
            raise SignatureRejected(f"wrong {SLACK_SIGNATURE} header", channel=self.name)

    def _from_event_body(self, data: dict[str, Any], request: ChannelRequest) -> WebhookOutcome:
        kind = data.get("type")
        if kind == "url_verification":
            challenge = data.get("challenge")
            if not isinstance(challenge, str) or not challenge:
                raise MalformedRequest("url_verification without a challenge", channel=self.name)
            return WebhookOutcome(
                kind="handshake",
                body=challenge.encode(),
                headers={"Content-Type": "text/plain; charset=utf-8"},
            )
        if kind != "event_callback":
            return WebhookOutcome(
                kind="ignored", reason=f"unsupported Slack body type {kind!r:.40}"
            )
        callback = validate(_EventCallback, data, self.name)
        return self._from_event(callback, request)

    def _from_event(self, callback: _EventCallback, request: ChannelRequest) -> WebhookOutcome:
        event = callback.event
        if event.type not in _HANDLED_EVENTS:
            return WebhookOutcome(
                kind="ignored", reason=f"unsupported event type {event.type!r:.40}"
            )
        own_ids = {a.user_id for a in callback.authorizations if a.is_bot and a.user_id}
        if self.bot_user_id:
            own_ids.add(self.bot_user_id)
        if (event.subtype and event.subtype not in _PERSON_SUBTYPES) or (
            event.bot_id or event.user in own_ids
        ):
            # Edits, deletions, joins, bot posts and our own replies: answering them would loop.
            return WebhookOutcome(kind="ignored", reason="not a new message from a person")
        if not (event.user and event.ts and event.channel):
            raise MalformedRequest("message event without user, ts or channel", channel=self.name)
        # app_mention events carry no channel_type; DM channel ids start with "D".
        is_dm = event.channel_type == "im" or event.channel.startswith("D")
        thread_ts = event.thread_ts if is_dm else (event.thread_ts or event.ts)
        reply_to: dict[str, Any] = {"team_id": callback.team_id, "channel": event.channel}
        if thread_ts:
            reply_to["thread_ts"] = thread_ts
        message = NormalizedMessage(
            channel=self.name,
            account_id=callback.team_id,
            event_id=f"{event.channel}:{event.ts}",
            conversation_key=_conversation(
                callback.team_id, event.channel, thread_ts, is_dm=is_dm, user=event.user
            ),
            customer_id=event.user,
            text=clean_text(_plain_text(event.text, own_ids)),
            reply_to=reply_to,
            raw_type=f"{event.type}.{event.subtype}" if event.subtype else event.type,
            attachments=[_attachment(file) for file in event.files],
            received_at=request.received_at,
            sent_at=unix_time(event.ts),
        )
        return WebhookOutcome(kind="messages", messages=[message])

    def _from_form(self, pairs: list[tuple[str, str]], request: ChannelRequest) -> WebhookOutcome:
        fields = dict(pairs)
        if "payload" not in fields:
            return WebhookOutcome(kind="ignored", reason="slash commands are not supported")
        payload = parse_json_object(fields["payload"].encode(), self.name)
        if payload.get("type") != "block_actions":
            return WebhookOutcome(
                kind="ignored", reason=f"unsupported interaction {payload.get('type')!r:.40}"
            )
        click = validate(_BlockActions, payload, self.name)
        channel = (click.channel.id if click.channel else None) or (
            click.container.channel_id if click.container else None
        )
        team = (click.team.id if click.team else None) or click.user.team_id
        if not click.actions or not channel or not team:
            return WebhookOutcome(kind="ignored", reason="button click outside a conversation")
        action = click.actions[0]
        choice, label = _picked(action)
        is_dm = channel.startswith("D")
        thread_ts = _click_thread(click, is_dm=is_dm)
        reply_to: dict[str, Any] = {"team_id": team, "channel": channel}
        if thread_ts:
            reply_to["thread_ts"] = thread_ts
        if click.response_url:
            reply_to["response_url"] = click.response_url
        message = NormalizedMessage(
            channel=self.name,
            account_id=team,
            event_id=click.trigger_id,
            conversation_key=_conversation(
                team, channel, thread_ts, is_dm=is_dm, user=click.user.id
            ),
            customer_id=click.user.id,
            customer_name=click.user.name,
            text=clean_text(label),
            choice=choice,
            reply_to=reply_to,
            raw_type="block_actions",
            received_at=request.received_at,
        )
        return WebhookOutcome(kind="messages", messages=[message])

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """`chat.postMessage` each part (in the thread, if any); options go on the last part: up
        to 25 as buttons, up to 100 as a select menu, more as numbered lines. Blocks Slack refuses
        as malformed are sent once more as plain numbered text."""
        channel = reply.reply_to.get("channel")
        if not channel:
            raise DeliveryRejected("reply_to has no Slack channel", channel=self.name)
        text, options = reply.display_text, reply.options
        if len(options) > SLACK_SELECT_OPTIONS:
            text, options = f"{text}\n\n{numbered_options(options)}", []
        text_parts = parts(text)
        sent: list[str] = []
        fallbacks: list[str] = []
        for part in text_parts[:-1]:
            sent.append(await self._post_part(client, reply, part, None, sent))
        last = text_parts[-1]
        blocks = blocks_for(last, options, reply.view)
        if not blocks:
            sent.append(await self._post_part(client, reply, last, None, sent))
            return DeliveryReceipt(channel=self.name, message_ids=sent)

        async def rich() -> list[str]:
            return [await self._post_part(client, reply, last, blocks, sent)]

        async def plain() -> list[str]:
            # `last` is already escaped; only the numbered labels still need it.
            listed = parts(numbered_options(options)) if options else []
            joined = f"{last}\n\n{listed[0]}" if len(listed) == 1 else ""
            fits = joined and utf16_len(joined) <= MAX_SECTION_CHARS
            pieces = [joined] if fits else [last, *listed]
            ids: list[str] = []
            for piece in pieces:
                ids.append(await self._post_part(client, reply, piece, None, sent + ids))
            return ids

        sent += await rich_or_plain(
            rich,
            plain,
            channel=self.name,
            problems=slack_violations(self._payload(reply, last, blocks)),
            is_malformed=lambda error: error.platform_error in _MALFORMED_ERRORS,
            fallbacks=fallbacks,
        )
        return DeliveryReceipt(channel=self.name, message_ids=sent, plain_fallbacks=fallbacks)

    def _payload(
        self, reply: OutboundReply, text: str, blocks: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"channel": reply.reply_to.get("channel"), "text": text}
        if thread_ts := reply.reply_to.get("thread_ts"):
            payload["thread_ts"] = thread_ts
        if blocks:
            payload["blocks"] = blocks
        return payload

    async def _post_part(
        self,
        client: httpx.AsyncClient,
        reply: OutboundReply,
        text: str,
        blocks: list[dict[str, Any]] | None,
        sent: list[str],
    ) -> str:
        payload = self._payload(reply, text, blocks)
        return await self._post_message(client, payload, delivered=tuple(sent))

    async def show_typing(self, reply_to: dict[str, Any], client: httpx.AsyncClient) -> bool:
        """`assistant.threads.setStatus` in the thread being answered. Only apps with Slack's
        AI assistant feature, in an assistant thread, may set it: otherwise Slack says no
        (`ok: false`) and the conversation goes without a status."""
        channel, thread_ts = reply_to.get("channel"), reply_to.get("thread_ts")
        if not channel or not thread_ts:
            return False
        token = self._bot_token.get_secret_value()
        response = await post(
            client,
            f"{self.base_url}/assistant.threads.setStatus",
            channel=self.name,
            secrets=(token,),
            json={"channel_id": channel, "thread_ts": thread_ts, "status": TYPING_STATUS},
            headers={"Authorization": f"Bearer {token}"},
        )
        return response.status_code == 200 and json_body(response).get("ok") is True

    async def fetch_media(self, attachment: Attachment, client: httpx.AsyncClient) -> MediaFile:
        """A shared file's `url_private`, downloaded with the bot token (scope `files:read`);
        only from Slack's own hosts."""
        if not attachment.url:
            raise DeliveryRejected("the attachment has no Slack url_private", channel=self.name)
        hosts = ("slack.com", "slack-edge.com", urlsplit(self.base_url).hostname or "")
        url = require_host(attachment.url, hosts, channel=self.name)
        token = self._bot_token.get_secret_value()
        return await download(
            client,
            url,
            channel=self.name,
            secrets=(token,),
            headers={"Authorization": f"Bearer {token}"},
        )

    async def _post_message(
        self, client: httpx.AsyncClient, payload: dict[str, Any], *, delivered: tuple[str, ...]
    ) -> str:
        token = self._bot_token.get_secret_value()
        response = await post(
            client,
            f"{self.base_url}/chat.postMessage",
            channel=self.name,
            secrets=(token,),
            delivered=delivered,
            json=payload,
            headers={"Authorization": f"Bearer {token}"},
        )
        data = json_body(response)
        # Slack reports most failures as HTTP 200 with ok:false, so the field is what counts.
        if response.status_code == 200 and data.get("ok") is True:
            return str(data.get("ts") or "")
        error = str(data.get("error") or "") or None
        raise error_for_status(
            self.name,
            response,
            platform_error=error,
            retry_after=retry_after_header(response),
            rate_limited=error in ("ratelimited", "rate_limited"),
            transient=error in _TRANSIENT_ERRORS,
            delivered=delivered,
        )


def _attachment(file: _File) -> Attachment:
    """A shared file, by its id and `url_private` (downloaded with the bot token)."""
    mime = file.mimetype or ""
    kind: AttachmentKind = (
        "image"
        if mime.startswith("image/")
        else "video"
        if mime.startswith("video/")
        else "audio"
        if mime.startswith("audio/")
        else "file"
    )
    return Attachment(
        kind=kind,
        platform_id=file.id,
        url=file.url_private,
        mime=file.mimetype,
        size=file.size,
        name=file.name,
    )


def _plain_text(text: str, own_ids: set[str]) -> str:
    """Slack's message text as the customer typed it: mentions of our bot removed and Slack's
    three HTML escapes undone."""
    for user_id in own_ids:
        text = re.sub(rf"<@{re.escape(user_id)}(\|[^>]*)?>", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _picked(action: _Action) -> tuple[str, str]:
    """(choice id, visible label) of a clicked button or a picked menu option."""
    if action.selected_option is not None:
        label = action.selected_option.text.text if action.selected_option.text else ""
        return action.selected_option.value, label
    return action.value or action.action_id, action.text.text if action.text else ""


def _click_thread(click: _BlockActions, *, is_dm: bool) -> str | None:
    """The thread a click belongs to: the clicked message's thread; in a channel, a top-level
    message with buttons starts its own."""
    message = click.message
    container = click.container
    thread = (message.thread_ts if message else None) or (
        container.thread_ts if container else None
    )
    if thread or is_dm:
        return thread
    return (message.ts if message else None) or (container.message_ts if container else None)
