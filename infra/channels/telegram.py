"""Telegram Bot API: webhook updates in, `sendMessage` out.

Inbound: one `Update` per POST, authenticated by the static secret given to `setWebhook`, echoed
in `X-Telegram-Bot-Api-Secret-Token`. No HMAC and no timestamp, so there is no replay window:
deduplication on `update_id` is the only replay defence. Text messages and inline-keyboard clicks
(`callback_query`, choice = its `callback_data`) become messages; everything else is ignored.

Outbound: `sendMessage` with an inline keyboard for options (one button per row: labels stay
readable; past 100 options, numbered lines instead), split at 4096 UTF-16 units; a reply to a click first calls `answerCallbackQuery`, or
the customer's client keeps spinning.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from engine.session import Attachment, AttachmentKind
from infra.channels.base import (
    ChannelRequest,
    DeliveryReceipt,
    NormalizedMessage,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.delivery import error_for_status, json_body, post, rich_or_plain
from infra.channels.errors import (
    ChannelConfigError,
    DeliveryError,
    DeliveryRejected,
    SignatureRejected,
)
from infra.channels.ingress import (
    DEFAULT_MAX_BODY_BYTES,
    JSON,
    MAX_MESSAGE_AGE,
    parse_json_object,
    replay_age,
    require_content_type,
    require_header,
    require_method,
    require_size,
    unix_time,
    validate,
)
from infra.channels.media import MediaFile, download, location_text
from infra.channels.options import compact_choice_id, numbered_options
from infra.channels.platform_limits import (
    TELEGRAM_CALLBACK_DATA_BYTES,
    TELEGRAM_MAX_BUTTONS,
    TELEGRAM_TEXT_UTF16,
    telegram_violations,
)
from infra.channels.signing import TELEGRAM_SECRET, Secret, as_secret, constant_time_equals
from infra.channels.text import clean_text, split_text, utf16_len

if TYPE_CHECKING:
    import httpx

TELEGRAM_API = "https://api.telegram.org"
MAX_TEXT_UTF16 = TELEGRAM_TEXT_UTF16
MAX_CALLBACK_DATA_BYTES = TELEGRAM_CALLBACK_DATA_BYTES
_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what setWebhook accepts
_BOT_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")


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


class TelegramChannel:
    """A Telegram bot. `secret_token` is the one given to `setWebhook`; `bot_token` authenticates
    `sendMessage` and its numeric prefix is the bot id in conversation keys."""

    name = "telegram"
    typing_refresh_seconds: float | None = 4.0  # a chat action shows for about 5 s

    def __init__(
        self,
        *,
        secret_token: Secret,
        bot_token: Secret,
        base_url: str = TELEGRAM_API,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._secret_token = as_secret(secret_token)
        self._bot_token = as_secret(bot_token)
        if not _SECRET_TOKEN.match(self._secret_token.get_secret_value()):
            raise ChannelConfigError(
                "the Telegram webhook secret token must be 1-256 characters of A-Z a-z 0-9 _ -",
                channel=self.name,
            )
        if not _BOT_TOKEN.match(self._bot_token.get_secret_value()):
            raise ChannelConfigError(
                "the Telegram bot token must look like '<bot id>:<secret>' (as BotFather gives it)",
                channel=self.name,
            )
        self.bot_id = self._bot_token.get_secret_value().split(":", 1)[0]
        self.base_url = base_url.rstrip("/")
        self.max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return f"TelegramChannel(bot_id={self.bot_id!r}, base_url={self.base_url!r})"

    # -- inbound --------------------------------------------------------------------------------

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """Verify the secret token, then normalize a text message or a button click."""
        require_method(request, ("POST",), self.name)
        require_size(request, self.max_body_bytes, self.name)
        require_content_type(request, (JSON,), self.name)
        received = require_header(request, TELEGRAM_SECRET, self.name)
        if not constant_time_equals(received, self._secret_token.get_secret_value()):
            raise SignatureRejected(f"wrong {TELEGRAM_SECRET} header", channel=self.name)

        update = validate(_Update, parse_json_object(request.body, self.name), self.name)
        if update.message is not None:
            return self._from_message(update, update.message, request)
        if update.callback_query is not None:
            return self._from_click(update, update.callback_query, request)
        return WebhookOutcome(kind="ignored", reason="update carries no message or button click")

    def _from_message(
        self, update: _Update, message: _Message, request: ChannelRequest
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
        normalized = self._normalized(
            update,
            message,
            sender=message.sender,
            text=clean_text(text),
            choice=None,
            raw_type="message",
            request=request,
            attachments=attachments,
        )
        return WebhookOutcome(kind="messages", messages=[normalized])

    def _from_click(
        self, update: _Update, click: _CallbackQuery, request: ChannelRequest
    ) -> WebhookOutcome:
        if click.message is None or click.data is None:
            return WebhookOutcome(kind="ignored", reason="button click outside a chat message")
        normalized = self._normalized(
            update,
            click.message,
            sender=click.sender,
            text=clean_text(_label_of(click.message, click.data)),
            choice=click.data,
            raw_type="callback_query",
            request=request,
            callback_query_id=click.id,
        )
        return WebhookOutcome(kind="messages", messages=[normalized])

    def _normalized(
        self,
        update: _Update,
        message: _Message,
        *,
        sender: _User,
        text: str,
        choice: str | None,
        raw_type: str,
        request: ChannelRequest,
        callback_query_id: str | None = None,
        attachments: list[Attachment] | None = None,
    ) -> NormalizedMessage:
        key = f"tg:{self.bot_id}:{message.chat.id}"
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
            channel=self.name,
            account_id=self.bot_id,
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

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """Answer the click (if any), then `sendMessage` each part; buttons go on the last (past
        100 options, the options are numbered lines instead). A keyboard Telegram refuses as
        malformed is sent once more as plain numbered text."""
        chat_id = reply.reply_to.get("chat_id")
        if chat_id is None:
            raise DeliveryRejected("reply_to has no Telegram chat_id", channel=self.name)
        if callback_query_id := reply.reply_to.get("callback_query_id"):
            await self._answer_click(client, str(callback_query_id))

        text, options = reply.display_text, reply.options
        if len(options) > TELEGRAM_MAX_BUTTONS:
            text, options = f"{text}\n\n{numbered_options(options)}", []
        parts = split_text(text, MAX_TEXT_UTF16, length=utf16_len)
        sent: list[str] = []
        fallbacks: list[str] = []
        for part in parts[:-1] if options else parts:
            sent.append(await self._send_message(client, reply, part, None, sent))
        if options:
            keyboard = {
                "inline_keyboard": [
                    [
                        {
                            "text": " ".join(option.label.split()) or f"Option {n}",
                            "callback_data": compact_choice_id(option.id, MAX_CALLBACK_DATA_BYTES),
                        }
                    ]
                    for n, option in enumerate(options, start=1)
                ]
            }
            last = parts[-1]
            payload = self._payload(reply, last, keyboard)

            async def rich() -> list[str]:
                return [await self._send_message(client, reply, last, keyboard, sent)]

            async def plain() -> list[str]:
                ids: list[str] = []
                plain_text = f"{last}\n\n{numbered_options(options)}"
                for piece in split_text(plain_text, MAX_TEXT_UTF16, length=utf16_len):
                    ids.append(await self._send_message(client, reply, piece, None, sent + ids))
                return ids

            sent += await rich_or_plain(
                rich,
                plain,
                channel=self.name,
                problems=telegram_violations(payload),
                is_malformed=_is_malformed,
                fallbacks=fallbacks,
            )
        return DeliveryReceipt(channel=self.name, message_ids=sent, plain_fallbacks=fallbacks)

    def _payload(
        self, reply: OutboundReply, text: str, keyboard: dict[str, Any] | None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"chat_id": reply.reply_to.get("chat_id"), "text": text}
        if thread := reply.reply_to.get("message_thread_id"):
            payload["message_thread_id"] = thread
        if keyboard is not None:
            payload["reply_markup"] = keyboard
        return payload

    async def _send_message(
        self,
        client: httpx.AsyncClient,
        reply: OutboundReply,
        text: str,
        keyboard: dict[str, Any] | None,
        sent: list[str],
    ) -> str:
        payload = self._payload(reply, text, keyboard)
        result = await self._call(client, "sendMessage", payload, delivered=tuple(sent))
        return str(result.get("message_id", "")) if isinstance(result, dict) else ""

    async def show_typing(self, reply_to: dict[str, Any], client: httpx.AsyncClient) -> bool:
        """`sendChatAction(typing)` in the chat (and forum topic) being answered."""
        chat_id = reply_to.get("chat_id")
        if chat_id is None:
            return False
        payload: dict[str, Any] = {"chat_id": chat_id, "action": "typing"}
        if thread := reply_to.get("message_thread_id"):
            payload["message_thread_id"] = thread
        await self._call(client, "sendChatAction", payload)
        return True

    async def fetch_media(self, attachment: Attachment, client: httpx.AsyncClient) -> MediaFile:
        """`getFile` for the file's path, then the file itself (bots may download up to 20 MB)."""
        if not attachment.platform_id:
            raise DeliveryRejected("the attachment has no Telegram file_id", channel=self.name)
        result = await self._call(client, "getFile", {"file_id": attachment.platform_id})
        path = result.get("file_path") if isinstance(result, dict) else None
        if not isinstance(path, str) or not path:
            raise DeliveryRejected(
                "Telegram gave no file_path (bots cannot download files over 20 MB)",
                channel=self.name,
            )
        token = self._bot_token.get_secret_value()
        media = await download(
            client, f"{self.base_url}/file/bot{token}/{path}", channel=self.name, secrets=(token,)
        )
        return (
            media if attachment.mime is None else media.model_copy(update={"mime": attachment.mime})
        )

    async def _answer_click(self, client: httpx.AsyncClient, callback_query_id: str) -> None:
        # Best effort: a query older than ~15 min (e.g. on a retried send) can no longer be
        # answered, and that must not stop the reply itself.
        with contextlib.suppress(DeliveryError):
            await self._call(
                client, "answerCallbackQuery", {"callback_query_id": callback_query_id}
            )

    async def _call(
        self,
        client: httpx.AsyncClient,
        method: str,
        payload: dict[str, Any],
        *,
        delivered: tuple[str, ...] = (),
    ) -> Any:
        token = self._bot_token.get_secret_value()
        response = await post(
            client,
            f"{self.base_url}/bot{token}/{method}",
            channel=self.name,
            secrets=(token,),
            delivered=delivered,
            json=payload,
        )
        data = json_body(response)
        if response.status_code == 200 and data.get("ok") is True:
            return data.get("result")
        parameters = data.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise error_for_status(
            self.name,
            response,
            platform_error=str(data.get("description") or "") or None,
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
            rate_limited=data.get("error_code") == 429,
            delivered=delivered,
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


# What Telegram's "Bad Request" descriptions say when the payload itself is wrong (a keyboard
# or text it cannot take), as opposed to "chat not found", "bot was blocked" and the like.
_MALFORMED_HINTS = ("button", "markup", "keyboard", "too long", "text is empty", "can't parse")


def _is_malformed(error: DeliveryRejected) -> bool:
    description = (error.platform_error or "").lower()
    return error.platform_status == 400 and any(hint in description for hint in _MALFORMED_HINTS)


def _label_of(message: _Message, data: str) -> str:
    """The label of the clicked button, read from the message's own keyboard ("" if absent)."""
    if message.reply_markup is None:
        return ""
    for row in message.reply_markup.inline_keyboard:
        for button in row:
            if button.callback_data == data:
                return button.text
    return ""
