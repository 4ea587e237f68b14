"""Telegram Bot API: webhook updates in, `sendMessage` out.

Inbound: one `Update` per POST, authenticated by the static secret given to `setWebhook`, echoed
in `X-Telegram-Bot-Api-Secret-Token`. No HMAC and no request timestamp: replays are stopped by
deduplication on `update_id` and by the age of the message itself (older than `MAX_MESSAGE_AGE`:
ignored). Text messages and inline-keyboard clicks (`callback_query`, choice = its
`callback_data`) become messages; everything else is ignored (reading an update:
`infra.channels.telegram_updates`).

Outbound: `sendMessage` with an inline keyboard for options (one button per row: labels stay
readable; past 100 options, numbered lines instead), split at 4096 UTF-16 units; a reply to a
click first calls `answerCallbackQuery`, or the customer's client keeps spinning.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from engine.sessions.session import Attachment
from infra.channels.base import (
    ChannelRequest,
    DeliveryReceipt,
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
    parse_json_object,
    require_content_type,
    require_header,
    require_method,
    require_size,
)
from infra.channels.media import MediaFile, download
from infra.channels.options import compact_choice_id, numbered_options
from infra.channels.platform_limits import (
    TELEGRAM_CALLBACK_DATA_BYTES,
    TELEGRAM_MAX_BUTTONS,
    TELEGRAM_TEXT_UTF16,
    telegram_violations,
)
from infra.channels.signing import TELEGRAM_SECRET, Secret, as_secret
from infra.channels.telegram_updates import CHANNEL, from_update
from infra.channels.text import split_text, utf16_len
from infra.rotating_secrets import RotatingSecret

if TYPE_CHECKING:
    import httpx

TELEGRAM_API = "https://api.telegram.org"
MAX_TEXT_UTF16 = TELEGRAM_TEXT_UTF16
MAX_CALLBACK_DATA_BYTES = TELEGRAM_CALLBACK_DATA_BYTES
_SECRET_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # what setWebhook accepts
_BOT_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")


class TelegramChannel:
    """A Telegram bot. `secret_token` is the one given to `setWebhook` (two, space-separated,
    while it is rotated: `infra.rotating_secrets`); `bot_token` authenticates `sendMessage` and its
    numeric prefix is the bot id in conversation keys."""

    name = CHANNEL
    typing_refresh_seconds: float | None = 4.0  # a chat action shows for about 5 s

    def __init__(
        self,
        *,
        secret_token: Secret | RotatingSecret,
        bot_token: Secret,
        base_url: str = TELEGRAM_API,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._bot_token = as_secret(bot_token)
        try:
            self._secret_token = RotatingSecret(secret_token)
            valid = all(
                _SECRET_TOKEN.match(v.get_secret_value()) for v in self._secret_token.values
            )
        except ValueError:  # no value at all
            valid = False
        if not valid:
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
        if not self._secret_token.verifies(received, SecretStr.get_secret_value):
            raise SignatureRejected(f"wrong {TELEGRAM_SECRET} header", channel=self.name)
        return from_update(parse_json_object(request.body, self.name), request, bot_id=self.bot_id)

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


# What Telegram's "Bad Request" descriptions say when the payload itself is wrong (a keyboard
# or text it cannot take), as opposed to "chat not found", "bot was blocked" and the like.
_MALFORMED_HINTS = ("button", "markup", "keyboard", "too long", "text is empty", "can't parse")


def _is_malformed(error: DeliveryRejected) -> bool:
    description = (error.platform_error or "").lower()
    return error.platform_status == 400 and any(hint in description for hint in _MALFORMED_HINTS)
