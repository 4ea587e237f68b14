"""WhatsApp Cloud API (Meta): GET subscription handshake and signed POSTs in, Graph API out.

Inbound:
- `GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` → the challenge, if the verify token
  matches (403 otherwise). Meta does not sign this GET; the verify token is the credential.
- `POST` JSON signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`.
  No timestamp: deduplication on the wamid is the only replay defence. One POST may batch several
  entries × changes × messages, so it may yield several messages. Text, reply-button and list picks
  (choice = the row/button id) and template quick replies are kept; delivery statuses and other
  message types are acknowledged and ignored.

Customers are keyed on their BSUID (`from_user_id` / `contacts[].user_id`, business-scoped and
stable across usernames) and only fall back to `wa_id` (the phone number) when no BSUID is present.

Outbound: ≤3 options as reply buttons, 4–10 as a list, more as numbered text (the platform's
limits, `infra.channels.platform_limits`), with short titles that stay distinct
(`infra.channels.titles`). Replies go `to` the wa_id when known, else to the BSUID as `recipient`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
    DeliveryRejected,
    HandshakeRejected,
    MalformedRequest,
    SignatureRejected,
)
from infra.channels.ingress import (
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
from infra.channels.media import MediaFile, download, location_text, require_host
from infra.channels.options import numbered_options
from infra.channels.platform_limits import whatsapp_violations
from infra.channels.signing import (
    META_SIGNATURE,
    Secret,
    as_secret,
    constant_time_equals,
    sign_meta,
)
from infra.channels.text import clean_text
from infra.channels.whatsapp_messages import MAX_LIST_ROWS, bodies, plain_bodies

if TYPE_CHECKING:
    import httpx

GRAPH_API = "https://graph.facebook.com"
GRAPH_API_VERSION = "v26.0"
# Meta batches and cannot be asked to split: a 413 would only earn 7 days of redeliveries of the
# same batch, so this cap is well above the 256 KiB used for one-message-per-request platforms.
MAX_META_BODY_BYTES = 3 * 1024 * 1024
# Graph error codes meaning "slow down" (app / account / throughput / pair / spam rate limits) and
# "our side failed, try again".
_RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131048, 131056})
_TRANSIENT_CODES = frozenset({1, 2, 131000, 131016})
# Where the Graph API's media URLs point (lookaside.fbsbx.com today).
_MEDIA_HOSTS = ("fbsbx.com", "facebook.com", "whatsapp.net")
# "Invalid parameter", "Required parameter is missing", "Parameter value is not valid".
_MALFORMED_CODES = frozenset({"100", "131008", "131009"})


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class _Profile(_Payload):
    name: str | None = None


class _Contact(_Payload):
    wa_id: str | None = None
    user_id: str | None = None  # the BSUID
    profile: _Profile | None = None


class _Text(_Payload):
    body: str


class _Reply(_Payload):
    id: str
    title: str = ""


class _Interactive(_Payload):
    type: str
    button_reply: _Reply | None = None
    list_reply: _Reply | None = None


class _TemplateButton(_Payload):
    payload: str | None = None
    text: str = ""


class _Media(_Payload):
    id: str
    mime_type: str | None = None
    caption: str | None = None
    filename: str | None = None
    voice: bool = False  # an audio message recorded in the app (a voice note)


class _Location(_Payload):
    latitude: float = Field(ge=-90, le=90)  # NaN and out-of-range values are refused here
    longitude: float = Field(ge=-180, le=180)
    name: str | None = None
    address: str | None = None


class _Message(_Payload):
    id: str
    type: str
    sender: str | None = Field(default=None, alias="from")
    from_user_id: str | None = None
    timestamp: str | None = None
    text: _Text | None = None
    interactive: _Interactive | None = None
    button: _TemplateButton | None = None
    image: _Media | None = None
    video: _Media | None = None
    audio: _Media | None = None
    voice: _Media | None = None
    document: _Media | None = None
    sticker: _Media | None = None
    location: _Location | None = None


class _Metadata(_Payload):
    phone_number_id: str


class _MessagesValue(_Payload):
    metadata: _Metadata
    contacts: list[_Contact] = Field(default_factory=list)
    messages: list[_Message] = Field(default_factory=list)
    statuses: list[Any] = Field(default_factory=list)


class _Change(_Payload):
    field: str = ""
    value: dict[str, Any] = Field(default_factory=dict)


class _Entry(_Payload):
    changes: list[_Change] = Field(default_factory=list)


class _Notification(_Payload):
    object: str = ""
    entry: list[_Entry] = Field(default_factory=list)


class WhatsAppChannel:
    """A WhatsApp Business phone number (or several: `phone_number_id` travels in each message).

    `app_secret` verifies POSTs, `verify_token` answers the subscription handshake, and
    `access_token` (a system-user token) authenticates Graph API sends."""

    name = "whatsapp"
    typing_refresh_seconds: float | None = 20.0  # shown up to 25 s, or until the reply

    def __init__(
        self,
        *,
        app_secret: Secret,
        verify_token: Secret,
        access_token: Secret,
        base_url: str = GRAPH_API,
        api_version: str = GRAPH_API_VERSION,
        max_body_bytes: int = MAX_META_BODY_BYTES,
    ) -> None:
        self._app_secret = as_secret(app_secret)
        self._verify_token = as_secret(verify_token)
        self._access_token = as_secret(access_token)
        self.base_url = base_url.rstrip("/")
        self.api_version = api_version
        self.max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return f"WhatsAppChannel(base_url={self.base_url!r}, api_version={self.api_version!r})"

    # -- inbound --------------------------------------------------------------------------------

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """The GET handshake, or a verified POST batch → its text / choice messages."""
        require_method(request, ("GET", "POST"), self.name)
        if request.method == "GET":
            return self._handshake(request)
        require_size(request, self.max_body_bytes, self.name)
        require_content_type(request, (JSON,), self.name)
        signature = require_header(request, META_SIGNATURE, self.name)
        if not constant_time_equals(signature.strip(), sign_meta(self._app_secret, request.body)):
            raise SignatureRejected(f"wrong {META_SIGNATURE} header", channel=self.name)

        notification = validate(
            _Notification, parse_json_object(request.body, self.name), self.name
        )
        if notification.object != "whatsapp_business_account":
            return WebhookOutcome(kind="ignored", reason="not a WhatsApp Business notification")
        messages: list[NormalizedMessage] = []
        skipped: list[str] = []
        for entry in notification.entry:
            for change in entry.changes:
                if change.field != "messages":
                    skipped.append(f"field {change.field!r:.40}")
                    continue
                value = validate(_MessagesValue, change.value, self.name)
                messages.extend(self._normalize(value, request, skipped))
                if value.statuses:
                    skipped.append("delivery statuses")
        if messages:
            return WebhookOutcome(kind="messages", messages=messages)
        reason = ", ".join(dict.fromkeys(skipped)) or "no messages"
        return WebhookOutcome(kind="ignored", reason=f"nothing to answer: {reason}")

    def _handshake(self, request: ChannelRequest) -> WebhookOutcome:
        mode = request.query.get("hub.mode")
        challenge = request.query.get("hub.challenge")
        if mode != "subscribe" or not challenge:
            raise MalformedRequest(
                "a GET must be Meta's subscription handshake "
                "(hub.mode=subscribe, hub.verify_token, hub.challenge)",
                channel=self.name,
            )
        token = request.query.get("hub.verify_token") or ""
        if not constant_time_equals(token, self._verify_token.get_secret_value()):
            raise HandshakeRejected("wrong hub.verify_token", channel=self.name)
        return WebhookOutcome(
            kind="handshake",
            body=challenge.encode(),
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )

    def _normalize(
        self, value: _MessagesValue, request: ChannelRequest, skipped: list[str]
    ) -> list[NormalizedMessage]:
        phone_number_id = value.metadata.phone_number_id
        normalized: list[NormalizedMessage] = []
        for message in value.messages:
            content = _content(message)
            if content is None:
                skipped.append(f"message type {message.type!r:.40}")
                continue
            text, choice, raw_type, attachments = content
            if replay_age(unix_time(message.timestamp), request.received_at) is not None:
                skipped.append(f"replayed messages (sent over {MAX_MESSAGE_AGE.days} days ago)")
                continue
            contact = _contact_of(message, value.contacts)
            bsuid = message.from_user_id or (contact.user_id if contact else None)
            wa_id = message.sender or (contact.wa_id if contact else None)
            customer = bsuid or wa_id
            if not customer:
                raise MalformedRequest(
                    "message without a sender (no from_user_id, user_id, from or wa_id)",
                    channel=self.name,
                )
            reply_to: dict[str, Any] = {
                "phone_number_id": phone_number_id,
                "message_id": message.id,
            }
            if wa_id:
                reply_to["wa_id"] = wa_id
            if bsuid:
                reply_to["bsuid"] = bsuid
            name = contact.profile.name if contact and contact.profile else None
            normalized.append(
                NormalizedMessage(
                    channel=self.name,
                    account_id=phone_number_id,
                    event_id=message.id,
                    conversation_key=f"wa:{phone_number_id}:{customer}",
                    customer_id=customer,
                    customer_name=name,
                    text=clean_text(text),
                    choice=choice,
                    reply_to=reply_to,
                    raw_type=raw_type,
                    received_at=request.received_at,
                    sent_at=unix_time(message.timestamp),
                    attachments=attachments,
                )
            )
        return normalized

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """Send the text (split at 4096), with options as buttons, a list, or numbered text. An
        interactive message Meta refuses as malformed is sent once more as plain numbered text."""
        phone_number_id = reply.reply_to.get("phone_number_id")
        recipient = _recipient(reply.reply_to)
        if not phone_number_id or recipient is None:
            raise DeliveryRejected(
                "reply_to needs phone_number_id and wa_id or bsuid", channel=self.name
            )
        options = reply.options
        text = reply.display_text
        if len(options) > MAX_LIST_ROWS:
            text, options = f"{text}\n\n{numbered_options(options)}", []
        messages = bodies(text, options)
        sent: list[str] = []
        fallbacks: list[str] = []

        async def post(body: dict[str, Any]) -> str:
            payload: dict[str, Any] = {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
            }
            payload.update(recipient)
            payload.update(body)
            return await self._post(client, str(phone_number_id), payload, tuple(sent))

        interactive = messages.pop() if options else None
        for body in messages:
            sent.append(await post(body))
        if interactive is not None:

            async def rich() -> list[str]:
                return [await post(interactive)]

            async def plain() -> list[str]:
                return [await post(text_body) for text_body in plain_bodies(interactive, options)]

            sent += await rich_or_plain(
                rich,
                plain,
                channel=self.name,
                problems=whatsapp_violations(interactive),
                is_malformed=_is_malformed,
                fallbacks=fallbacks,
            )
        return DeliveryReceipt(channel=self.name, message_ids=sent, plain_fallbacks=fallbacks)

    async def show_typing(self, reply_to: dict[str, Any], client: httpx.AsyncClient) -> bool:
        """Mark the customer's message as read, with the typing indicator (Cloud API
        `status: read` + `typing_indicator: {type: text}`)."""
        phone_number_id = reply_to.get("phone_number_id")
        message_id = reply_to.get("message_id")
        if not phone_number_id or not message_id:
            return False
        payload = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": str(message_id),
            "typing_indicator": {"type": "text"},
        }
        await self._post(client, str(phone_number_id), payload, ())
        return True

    async def fetch_media(self, attachment: Attachment, client: httpx.AsyncClient) -> MediaFile:
        """The media's URL from the Graph API (`GET /{media id}`), then the file, both with the
        access token; the URL must be on Meta's hosts (the token goes nowhere else)."""
        if not attachment.platform_id:
            raise DeliveryRejected("the attachment has no WhatsApp media id", channel=self.name)
        token = self._access_token.get_secret_value()
        auth = {"Authorization": f"Bearer {token}"}
        meta = await download(
            client,
            f"{self.base_url}/{self.api_version}/{attachment.platform_id}",
            channel=self.name,
            secrets=(token,),
            headers=auth,
            max_bytes=64 * 1024,
        )
        try:
            url = json.loads(meta.data).get("url")
        except (ValueError, AttributeError):
            url = None
        if not isinstance(url, str):
            raise DeliveryRejected("the Graph API gave no media URL", channel=self.name)
        hosts = (*_MEDIA_HOSTS, urlsplit(self.base_url).hostname or "")
        url = require_host(url, hosts, channel=self.name)
        return await download(client, url, channel=self.name, secrets=(token,), headers=auth)

    async def _post(
        self,
        client: httpx.AsyncClient,
        phone_number_id: str,
        payload: dict[str, Any],
        delivered: tuple[str, ...],
    ) -> str:
        token = self._access_token.get_secret_value()
        response = await post(
            client,
            f"{self.base_url}/{self.api_version}/{phone_number_id}/messages",
            channel=self.name,
            secrets=(token,),
            delivered=delivered,
            json=payload,
            headers={"Authorization": f"Bearer {token}"},
        )
        data = json_body(response)
        if response.is_success:
            ids = data.get("messages")
            first = ids[0] if isinstance(ids, list) and ids else {}
            return str(first.get("id", "")) if isinstance(first, dict) else ""
        error = data.get("error")
        error = error if isinstance(error, dict) else {}
        code = error.get("code") if isinstance(error.get("code"), int) else None
        detail = f"{code}: {error.get('message', '')}" if code is not None else None
        raise error_for_status(
            self.name,
            response,
            platform_error=detail,
            rate_limited=code in _RATE_LIMIT_CODES,
            transient=code in _TRANSIENT_CODES,
            delivered=delivered,
        )


# Customer messages the agent cannot read but should not ignore: a shared contact card, and what
# Meta itself could not render ("unsupported"). Reactions and system notices are not answered.
_OTHER_TYPES = frozenset({"contacts", "unsupported"})
_MEDIA_KINDS: dict[str, AttachmentKind] = {
    "image": "image",
    "video": "video",
    "audio": "audio",
    "voice": "voice",
    "document": "document",
    "sticker": "sticker",
}


def _content(message: _Message) -> tuple[str, str | None, str, list[Attachment]] | None:
    """(text, choice, raw type, attachments) of a message we answer, or None for other types
    (reactions, contacts, system notices …). A media message's caption is its text; the media
    itself is referenced by its id (fetched later with the access token)."""
    if message.type == "text" and message.text is not None:
        return message.text.body, None, "text", []
    if message.type == "interactive" and message.interactive is not None:
        picked = message.interactive.button_reply or message.interactive.list_reply
        if picked is not None:
            return picked.title, picked.id, f"interactive.{message.interactive.type}", []
    if message.type == "button" and message.button is not None and message.button.payload:
        return message.button.text, message.button.payload, "button", []
    if message.type in _MEDIA_KINDS and (media := getattr(message, message.type)) is not None:
        kind = "voice" if message.type == "audio" and media.voice else _MEDIA_KINDS[message.type]
        attachment = Attachment(
            kind=kind, platform_id=media.id, mime=media.mime_type, name=media.filename
        )
        return media.caption or "", None, message.type, [attachment]
    if message.type in _OTHER_TYPES:  # not readable by the agent, but answered, not dropped
        return "", None, message.type, [Attachment(kind="other", name=message.type)]
    if message.type == "location" and message.location is not None:
        place = message.location
        attachment = Attachment(
            kind="location",
            latitude=place.latitude,
            longitude=place.longitude,
            name=place.name,
            address=place.address,
        )
        return location_text([attachment]), None, "location", [attachment]
    return None


def _contact_of(message: _Message, contacts: list[_Contact]) -> _Contact | None:
    """The contact entry describing the sender of `message`."""
    for contact in contacts:
        if (message.from_user_id and contact.user_id == message.from_user_id) or (
            message.sender and contact.wa_id == message.sender
        ):
            return contact
    return contacts[0] if len(contacts) == 1 else None


def _recipient(reply_to: dict[str, Any]) -> dict[str, str] | None:
    if wa_id := reply_to.get("wa_id"):
        return {"to": str(wa_id)}
    if bsuid := reply_to.get("bsuid"):
        return {"recipient": str(bsuid)}
    return None


def _is_malformed(error: DeliveryRejected) -> bool:
    """Meta's answer to a payload it cannot accept (invalid or missing parameter), as opposed to
    one it will not deliver (outside the 24 h window, blocked, bad token)."""
    code = (error.platform_error or "").split(":", 1)[0]
    return error.platform_status == 400 and code in _MALFORMED_CODES
