"""What Meta posts to the WhatsApp webhook — a notification — read into normalized messages.
`WhatsAppChannel.handle` (`infra.channels.whatsapp`) checks its signature before it gets here;
the messages a reply is sent as are `infra.channels.whatsapp_reply_messages`.

One notification may batch several entries × changes × messages, so it may yield several
messages. Text, reply-button and list picks (choice = the row/button id; text = the row's full
label, its description when it has one), template quick replies,
media (by its id, fetched later) and locations are kept, and so are contact cards and what Meta
could not render (answered, not dropped); delivery statuses and other message types are
acknowledged and ignored, and so is a message sent longer than `MAX_MESSAGE_AGE` ago (a replay).

Customers are keyed on their BSUID (`from_user_id` / `contacts[].user_id`, business-scoped and
stable across usernames) and only fall back to `wa_id` (the phone number) when no BSUID is present.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.sessions.session import Attachment, AttachmentKind
from infra.channels.base import ChannelRequest, NormalizedMessage, WebhookOutcome
from infra.channels.errors import MalformedRequest
from infra.channels.ingress import MAX_MESSAGE_AGE, replay_age, unix_time, validate
from infra.channels.media import location_text
from infra.channels.text import clean_text

CHANNEL = "whatsapp"


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
    description: str = ""  # a list row's; ours is the full label when the title is short


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


def from_notification(data: dict[str, Any], request: ChannelRequest) -> WebhookOutcome:
    """A notification → the messages of every `messages` change in it, or why it is ignored."""
    notification = validate(_Notification, data, CHANNEL)
    if notification.object != "whatsapp_business_account":
        return WebhookOutcome(kind="ignored", reason="not a WhatsApp Business notification")
    messages: list[NormalizedMessage] = []
    skipped: list[str] = []
    for entry in notification.entry:
        for change in entry.changes:
            if change.field != "messages":
                skipped.append(f"field {change.field!r:.40}")
                continue
            value = validate(_MessagesValue, change.value, CHANNEL)
            messages.extend(_normalize(value, request, skipped))
            if value.statuses:
                skipped.append("delivery statuses")
    if messages:
        return WebhookOutcome(kind="messages", messages=messages)
    reason = ", ".join(dict.fromkeys(skipped)) or "no messages"
    return WebhookOutcome(kind="ignored", reason=f"nothing to answer: {reason}")


def _normalize(
    value: _MessagesValue, request: ChannelRequest, skipped: list[str]
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
                channel=CHANNEL,
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
                channel=CHANNEL,
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
            # A row whose label did not fit its title carries the full label as its description
            # (`whatsapp_reply_messages`): the customer picked that, not the short title.
            said = picked.description or picked.title
            return said, picked.id, f"interactive.{message.interactive.type}", []
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
