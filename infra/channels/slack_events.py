"""What Slack sends the webhook, read into normalized messages: Events API callbacks and
interactivity payloads (button clicks). `SlackChannel.handle` (`infra.channels.slack`) verifies a
request before it gets here.

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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.sessions.session import Attachment, AttachmentKind
from infra.channels.base import ChannelRequest, NormalizedMessage, WebhookOutcome
from infra.channels.errors import MalformedRequest
from infra.channels.ingress import parse_json_object, unix_time, validate
from infra.channels.text import clean_text

CHANNEL = "slack"

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
    # The author's own team: `user_team` (Slack Connect), else `team`. Not the envelope's
    # `team_id`, which names the installation the event is delivered to.
    user_team: str | None = None
    team: str | None = None
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


def from_event_body(
    data: dict[str, Any], request: ChannelRequest, *, bot_user_id: str | None
) -> WebhookOutcome:
    """A JSON body: the `url_verification` handshake, or an `event_callback` (bot and own
    messages, `bot_user_id` among them, ignored)."""
    kind = data.get("type")
    if kind == "url_verification":
        challenge = data.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise MalformedRequest("url_verification without a challenge", channel=CHANNEL)
        return WebhookOutcome(
            kind="handshake",
            body=challenge.encode(),
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
    if kind != "event_callback":
        return WebhookOutcome(kind="ignored", reason=f"unsupported Slack body type {kind!r:.40}")
    callback = validate(_EventCallback, data, CHANNEL)
    return _from_event(callback, request, bot_user_id=bot_user_id)


def _from_event(
    callback: _EventCallback, request: ChannelRequest, *, bot_user_id: str | None
) -> WebhookOutcome:
    event = callback.event
    if event.type not in _HANDLED_EVENTS:
        return WebhookOutcome(kind="ignored", reason=f"unsupported event type {event.type!r:.40}")
    own_ids = {a.user_id for a in callback.authorizations if a.is_bot and a.user_id}
    if bot_user_id:
        own_ids.add(bot_user_id)
    if (event.subtype and event.subtype not in _PERSON_SUBTYPES) or (
        event.bot_id or event.user in own_ids
    ):
        # Edits, deletions, joins, bot posts and our own replies: answering them would loop.
        return WebhookOutcome(kind="ignored", reason="not a new message from a person")
    if not (event.user and event.ts and event.channel):
        raise MalformedRequest("message event without user, ts or channel", channel=CHANNEL)
    # app_mention events carry no channel_type; DM channel ids start with "D".
    is_dm = event.channel_type == "im" or event.channel.startswith("D")
    thread_ts = event.thread_ts if is_dm else (event.thread_ts or event.ts)
    reply_to: dict[str, Any] = {"team_id": callback.team_id, "channel": event.channel}
    if thread_ts:
        reply_to["thread_ts"] = thread_ts
    message = NormalizedMessage(
        channel=CHANNEL,
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
        sender_team=event.user_team or event.team,
    )
    return WebhookOutcome(kind="messages", messages=[message])


def from_form(pairs: list[tuple[str, str]], request: ChannelRequest) -> WebhookOutcome:
    """A form body: a `block_actions` payload (a button click or a menu pick)."""
    fields = dict(pairs)
    if "payload" not in fields:
        return WebhookOutcome(kind="ignored", reason="slash commands are not supported")
    payload = parse_json_object(fields["payload"].encode(), CHANNEL)
    if payload.get("type") != "block_actions":
        return WebhookOutcome(
            kind="ignored", reason=f"unsupported interaction {payload.get('type')!r:.40}"
        )
    click = validate(_BlockActions, payload, CHANNEL)
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
        channel=CHANNEL,
        account_id=team,
        event_id=click.trigger_id,
        conversation_key=_conversation(team, channel, thread_ts, is_dm=is_dm, user=click.user.id),
        customer_id=click.user.id,
        customer_name=click.user.name,
        text=clean_text(label),
        choice=choice,
        reply_to=reply_to,
        raw_type="block_actions",
        received_at=request.received_at,
        sender_team=click.user.team_id,
    )
    return WebhookOutcome(kind="messages", messages=[message])


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
