"""The generic JSON channel: for our own web widget, a CRM relay, or `waypoint demo`.

Inbound: `POST` JSON `{event_id, conversation_id, customer_id, text, choice?, callback_url?}`,
signed with `X-Waypoint-Signature: sha256=<hex HMAC-SHA256(secret, "{timestamp}.{raw body}")>` and
`X-Waypoint-Timestamp: <unix seconds>`, refused outside ±300 s of our clock. `event_id` is the
sender's idempotency key: resending the same event must reuse it.

Outbound: the reply is POSTed as JSON to the message's `callback_url`, signed the same way, so the
receiver verifies it with the same code (`infra.channels.signing.sign_generic`). `callback_hosts`
is the required allow-list of hosts a callback may target, and every address a host resolves to
must be public (`infra.channels.callbacks`: no SSRF through a leaked secret or a relay).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from infra.channels.base import (
    ChannelRequest,
    Clock,
    DeliveryReceipt,
    NormalizedMessage,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.callbacks import (
    CallbackRefused,
    CallbackTargets,
    CallbackUnresolvable,
    Resolver,
)
from infra.channels.delivery import error_for_status, json_body, post
from infra.channels.errors import (
    DeliveryRejected,
    DeliveryUnavailable,
    MalformedRequest,
    PayloadTooLarge,
    SignatureRejected,
)
from infra.channels.ingress import (
    DEFAULT_MAX_BODY_BYTES,
    JSON,
    parse_json_object,
    require_content_type,
    require_fresh_timestamp,
    require_header,
    require_method,
    require_size,
    validate,
)
from infra.channels.signing import (
    GENERIC_SIGNATURE,
    GENERIC_TIMESTAMP,
    Secret,
    generic_headers,
    sign_generic,
)
from infra.channels.text import MAX_INBOUND_CHARS, clean_text
from infra.rotating_secrets import RotatingSecret

if TYPE_CHECKING:
    import httpx

_ID = Field(min_length=1, max_length=200)


class _Inbound(BaseModel):
    model_config = ConfigDict(extra="ignore")
    event_id: str = _ID
    conversation_id: str = _ID
    customer_id: str = _ID
    text: str = ""
    choice: str | None = Field(default=None, min_length=1, max_length=256)
    callback_url: str | None = Field(default=None, max_length=2048)


class GenericChannel:
    """Our own signed JSON webhook. `secret` signs both directions."""

    name = "generic"

    def __init__(
        self,
        *,
        secret: Secret,
        clock: Clock,
        callback_hosts: Iterable[str] | None,
        resolve: Resolver | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._secret = RotatingSecret(secret)
        self.clock = clock
        # Refuses to start without an allow-list (ChannelConfigError, naming the setting).
        self.callbacks = CallbackTargets(callback_hosts, resolve=resolve)
        self.callback_hosts = self.callbacks.hosts
        self.max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return f"GenericChannel(callback_hosts={sorted(self.callback_hosts)!r})"

    # -- inbound --------------------------------------------------------------------------------

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """Verify signature and timestamp, then normalize the one message in the body."""
        require_method(request, ("POST",), self.name)
        require_size(request, self.max_body_bytes, self.name)
        require_content_type(request, (JSON,), self.name)
        signature = require_header(request, GENERIC_SIGNATURE, self.name)
        timestamp = require_fresh_timestamp(
            request.header(GENERIC_TIMESTAMP), self.clock.now(), self.name, GENERIC_TIMESTAMP
        )
        if not self._secret.verifies(
            signature.strip(), lambda secret: sign_generic(secret, request.body, timestamp)
        ):
            raise SignatureRejected(f"wrong {GENERIC_SIGNATURE} header", channel=self.name)

        inbound = validate(_Inbound, parse_json_object(request.body, self.name), self.name)
        if len(inbound.text) > MAX_INBOUND_CHARS:  # our own sender: told, never cut
            raise PayloadTooLarge(
                f"text is over the {MAX_INBOUND_CHARS}-character limit; split the message",
                channel=self.name,
            )
        text = clean_text(inbound.text)
        if not text and inbound.choice is None:
            raise MalformedRequest(
                "a message needs a non-empty text or a choice", channel=self.name
            )
        reply_to: dict[str, Any] = {
            "conversation_id": inbound.conversation_id,
            "event_id": inbound.event_id,
        }
        if inbound.callback_url is not None:
            try:
                self.callbacks.check_url(inbound.callback_url)
            except CallbackRefused as refused:
                raise MalformedRequest(str(refused), channel=self.name) from None
            reply_to["callback_url"] = inbound.callback_url
        message = NormalizedMessage(
            channel=self.name,
            account_id=self.name,
            event_id=inbound.event_id,
            conversation_key=f"generic:{inbound.conversation_id}",
            customer_id=inbound.customer_id,
            text=text,
            choice=inbound.choice,
            reply_to=reply_to,
            raw_type="message",
            received_at=request.received_at,
        )
        return WebhookOutcome(
            kind="messages",
            messages=[message],
            body=json.dumps({"status": "accepted", "event_id": inbound.event_id}).encode(),
            headers={"Content-Type": "application/json"},
        )

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """POST the reply (text, options, view) to the callback URL, signed like inbound requests."""
        url = reply.reply_to.get("callback_url")
        if not isinstance(url, str) or not url:
            raise DeliveryRejected("the message had no callback_url to reply to", channel=self.name)
        try:
            await self.callbacks.check_destination(url)  # resolved now, right before the POST
        except CallbackRefused as refused:
            raise DeliveryRejected(str(refused), channel=self.name) from None
        except CallbackUnresolvable as unresolvable:
            raise DeliveryUnavailable(str(unresolvable), channel=self.name) from None
        payload = {
            "id": reply.id,  # the same on every retry of this reply: drop repeats
            "conversation_id": reply.reply_to.get("conversation_id"),
            "in_reply_to": reply.reply_to.get("event_id"),
            "text": reply.text,
            "options": [option.model_dump() for option in reply.options],
            "view": reply.view,
        }
        body = json.dumps(payload, separators=(",", ":")).encode()
        timestamp = int(self.clock.now().timestamp())
        response = await post(
            client,
            url,
            channel=self.name,
            content=body,
            headers={
                **generic_headers(self._secret.current, body, timestamp),
                **({"Idempotency-Key": reply.id} if reply.id else {}),
            },
        )
        data = json_body(response)
        if response.is_success:
            return DeliveryReceipt(channel=self.name, message_ids=[str(data.get("id", ""))])
        error = data.get("error")
        raise error_for_status(
            self.name, response, platform_error=str(error)[:200] if error else None
        )
