"""What Telegram posts to the webhook, read into normalized messages: one `Update` per POST, of
which text and media messages and inline-keyboard clicks (`callback_query`, choice = its
`callback_data`) are answered and everything else is ignored. `TelegramChannel.handle`
(`infra.channels.telegram`) checks the secret token before an update gets here.

Conversations: a private chat is one conversation (`tg:{bot}:{chat}`), a forum topic one of its
own (`…:{thread}`); in a group each person has their own (`…:user:{sender}`). The dedup id is the
`update_id`; a message sent longer than `MAX_MESSAGE_AGE` ago is a replay and ignored (a click is
not judged by its age: the message it was on is the bot's own, and may rightly be old).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.sessions.session import Attachment, AttachmentKind
from infra.channels.base import ChannelRequest, NormalizedMessage, WebhookOutcome
from infra.channels.ingress import MAX_MESSAGE_AGE, replay_age, unix_time, validate
from infra.channels.media import location_text
from infra.channels.text import clean_text

CHANNEL = "telegram"


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _User(_Payload):
    id: int
    is_bot: bool = False
    first_name: str = ""


class _Chat(_Payload):
    id: int
    type: str = "private"  # private | group | supergroup | channel


class _Button(_Payload):
    text: str = ""
    callback_data: str | None = None


class _Keyboard(_Payload):
    inline_keyboard: list[list[_Button]] = Field(default_factory=list)


class _File(_Payload):
    file_id: str
    file_size: int | None = None
    mime_type: str | None = None
    file_name: str | None = None


class _Location(_Payload):
    latitude: float = Field(ge=-90, le=90)  # NaN and out-of-range values are refused here
    longitude: float = Field(ge=-180, le=180)


class _Venue(_Payload):
    location: _Location
    title: str | None = None
    address: str | None = None


class _Message(_Payload):
    message_id: int
    chat: _Chat
    sender: _User | None = Field(default=None, alias="from")
    date: int = 0  # 0 on an "inaccessible" message inside an old callback_query
    text: str | None = None
    caption: str | None = None  # of a photo, video, document, audio or voice note
    photo: list[_File] = Field(default_factory=list)  # the same photo in several sizes
    video: _File | None = None
    video_note: _File | None = None
    animation: _File | None = None
    voice: _File | None = None
    audio: _File | None = None
    document: _File | None = None
    sticker: _File | None = None
    location: _Location | None = None
    venue: _Venue | None = None
    contact: dict[str, Any] | None = None
    poll: dict[str, Any] | None = None
    message_thread_id: int | None = None
    is_topic_message: bool = False
    reply_markup: _Keyboard | None = None


class _CallbackQuery(_Payload):
    id: str
    sender: _User = Field(alias="from")
    message: _Message | None = None  # absent for buttons on inline-mode messages
    data: str | None = None  # absent for game buttons


class _Update(_Payload):
    update_id: int
    message: _Message | None = None
    callback_query: _CallbackQuery | None = None


def from_update(data: dict[str, Any], request: ChannelRequest, *, bot_id: str) -> WebhookOutcome:
    """An `Update` → its text message or button click, normalized; anything else is ignored.
    `bot_id` (the bot token's numeric prefix) goes into conversation keys."""
    update = validate(_Update, data, CHANNEL)
    if update.message is not None:
        return _from_message(update, update.message, request, bot_id=bot_id)
    if update.callback_query is not None:
        return _from_click(update, update.callback_query, request, bot_id=bot_id)
    return WebhookOutcome(kind="ignored", reason="update carries no message or button click")


def _from_message(
    update: _Update, message: _Message, request: ChannelRequest, *, bot_id: str
) -> WebhookOutcome:
    if message.sender is None or message.sender.is_bot:
        return WebhookOutcome(kind="ignored", reason="message not sent by a person")
    attachments = _attachments(message)
    text = message.text if message.text is not None else (message.caption or "")
    text = text or location_text(attachments)
    if not text and not attachments:
        return WebhookOutcome(
            kind="ignored", reason="unsupported message type (no text, file or location)"
        )
    # Only messages are judged by their date: a button click's message is the bot's own, and
    # may rightly be old (the click itself carries no time; the inbox dedupes it by update_id).
    if replay_age(unix_time(message.date), request.received_at) is not None:
        return WebhookOutcome(
            kind="ignored",
            reason=f"replayed message: sent over {MAX_MESSAGE_AGE.days} days ago",
        )
    normalized = _normalized(
        update,
        message,
        bot_id=bot_id,
        sender=message.sender,
        text=clean_text(text),
        choice=None,
        raw_type="message",
        request=request,
        attachments=attachments,
    )
    return WebhookOutcome(kind="messages", messages=[normalized])


def _from_click(
    update: _Update, click: _CallbackQuery, request: ChannelRequest, *, bot_id: str
) -> WebhookOutcome:
    if click.message is None or click.data is None:
        return WebhookOutcome(kind="ignored", reason="button click outside a chat message")
    normalized = _normalized(
        update,
        click.message,
        bot_id=bot_id,
        sender=click.sender,
        text=clean_text(_label_of(click.message, click.data)),
        choice=click.data,
        raw_type="callback_query",
        request=request,
        callback_query_id=click.id,
    )
    return WebhookOutcome(kind="messages", messages=[normalized])


def _normalized(
    update: _Update,
    message: _Message,
    *,
    bot_id: str,
    sender: _User,
    text: str,
    choice: str | None,
    raw_type: str,
    request: ChannelRequest,
    callback_query_id: str | None = None,
    attachments: list[Attachment] | None = None,
) -> NormalizedMessage:
    key = f"tg:{bot_id}:{message.chat.id}"
    reply_to: dict[str, Any] = {"chat_id": message.chat.id, "message_id": message.message_id}
    if message.is_topic_message and message.message_thread_id is not None:
        key += f":{message.message_thread_id}"  # forum topics are separate conversations
        reply_to["message_thread_id"] = message.message_thread_id
    if message.chat.type != "private":
        # In a group each person has their own session: their login, their collected values.
        key += f":user:{sender.id}"
    if callback_query_id is not None:
        reply_to["callback_query_id"] = callback_query_id
    return NormalizedMessage(
        channel=CHANNEL,
        account_id=bot_id,
        event_id=str(update.update_id),
        conversation_key=key,
        customer_id=str(sender.id),
        customer_name=sender.first_name or None,
        text=text,
        choice=choice,
        reply_to=reply_to,
        raw_type=raw_type,
        received_at=request.received_at,
        sent_at=unix_time(message.date),
        attachments=attachments or [],
    )


_FILE_KINDS: tuple[tuple[str, AttachmentKind], ...] = (
    ("video", "video"),
    ("video_note", "video"),
    ("animation", "video"),
    ("voice", "voice"),
    ("audio", "audio"),
    ("document", "document"),
    ("sticker", "sticker"),
)


def _attachments(message: _Message) -> list[Attachment]:
    """The files and location of a message: the largest size of a photo, each other file by its
    `file_id` (fetched later with `getFile` and the bot token), a location or venue as values."""
    found: list[Attachment] = []
    if message.photo:
        largest = message.photo[-1]  # Telegram lists the sizes smallest first
        found.append(_file("image", largest, mime="image/jpeg"))
    for field, kind in _FILE_KINDS:
        file = getattr(message, field)
        if file is not None:
            found.append(_file(kind, file))
    for field in ("contact", "poll"):  # not readable by the agent, but answered, not dropped
        if getattr(message, field) is not None:
            found.append(Attachment(kind="other", name=field))
    place = message.venue.location if message.venue else message.location
    if place is not None:
        found.append(
            Attachment(
                kind="location",
                latitude=place.latitude,
                longitude=place.longitude,
                name=message.venue.title if message.venue else None,
                address=message.venue.address if message.venue else None,
            )
        )
    return found


def _file(kind: AttachmentKind, file: _File, *, mime: str | None = None) -> Attachment:
    return Attachment(
        kind=kind,
        platform_id=file.file_id,
        mime=file.mime_type or mime,
        size=file.file_size,
        name=file.file_name,
    )


def _label_of(message: _Message, data: str) -> str:
    """The label of the clicked button, read from the message's own keyboard ("" if absent)."""
    if message.reply_markup is None:
        return ""
    for row in message.reply_markup.inline_keyboard:
        for button in row:
            if button.callback_data == data:
                return button.text
    return ""
