"""WhatsApp Cloud API (Meta): GET subscription handshake and signed POSTs in, Graph API out.

Inbound:
- `GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…` → the challenge, if the verify token
  matches (403 otherwise). Meta does not sign this GET; the verify token is the credential.
- `POST` JSON signed with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`.
  No timestamp: deduplication on the wamid is the only replay defence. What a verified POST says
  (a batch of messages, keyed on the customer's BSUID) is read by
  `infra.channels.whatsapp_notifications`.

Outbound: options in the first form that shows every label in full
(`infra.channels.whatsapp_reply_messages.choice_form`): reply buttons (≤3, each label ≤20
characters), a list (≤10 rows, each label ≤72: a short distinct title, the full label below it),
else numbered text the customer answers with a number. Replies go `to` the wa_id when known, else
to the BSUID as `recipient`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
    DeliveryRejected,
    HandshakeRejected,
    MalformedRequest,
    SignatureRejected,
)
from infra.channels.ingress import (
    JSON,
    parse_json_object,
    require_content_type,
    require_header,
    require_method,
    require_size,
)
from infra.channels.media import MediaFile, download, require_host
from infra.channels.options import numbered_options
from infra.channels.platform_limits import whatsapp_violations
from infra.channels.signing import (
    META_SIGNATURE,
    Secret,
    as_secret,
    sign_meta,
)
from infra.channels.whatsapp_notifications import CHANNEL, from_notification
from infra.channels.whatsapp_reply_messages import (
    bodies,
    choice_form,
    list_labels,
    plain_bodies,
)
from infra.rotating_secrets import RotatingSecret

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


class WhatsAppChannel:
    """A WhatsApp Business phone number (or several: `phone_number_id` travels in each message).

    `app_secret` verifies POSTs, `verify_token` answers the subscription handshake (each may hold
    two values, space-separated, while it is rotated: `infra.rotating_secrets`), and
    `access_token` (a system-user token) authenticates Graph API sends."""

    name = CHANNEL
    typing_refresh_seconds: float | None = 20.0  # shown up to 25 s, or until the reply

    def __init__(
        self,
        *,
        app_secret: Secret | RotatingSecret,
        verify_token: Secret | RotatingSecret,
        access_token: Secret,
        base_url: str = GRAPH_API,
        api_version: str = GRAPH_API_VERSION,
        max_body_bytes: int = MAX_META_BODY_BYTES,
    ) -> None:
        self._app_secret = RotatingSecret(app_secret)
        self._verify_token = RotatingSecret(verify_token)
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
        if not self._app_secret.verifies(
            signature.strip(), lambda secret: sign_meta(secret, request.body)
        ):
            raise SignatureRejected(f"wrong {META_SIGNATURE} header", channel=self.name)
        return from_notification(parse_json_object(request.body, self.name), request)

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
        if not self._verify_token.verifies(token, SecretStr.get_secret_value):
            raise HandshakeRejected("wrong hub.verify_token", channel=self.name)
        return WebhookOutcome(
            kind="handshake",
            body=challenge.encode(),
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """Send the text (split at 4096), with options as buttons, a list, or numbered text, the
        first that shows every label in full (`choice_form`). An interactive message Meta
        refuses as malformed is sent once more as plain numbered text."""
        phone_number_id = reply.reply_to.get("phone_number_id")
        recipient = _recipient(reply.reply_to)
        if not phone_number_id or recipient is None:
            raise DeliveryRejected(
                "reply_to needs phone_number_id and wa_id or bsuid", channel=self.name
            )
        options = reply.options
        text = reply.display_text
        if options and choice_form(options) == "numbered":
            # The customer types the number; the engine maps it back to the option
            # (`engine.tools.calls.resolve_pick`), in the order listed here.
            listed = numbered_options(options)
            text, options = f"{text}\n\n{reply.line('reply_with_number')}\n{listed}", []
        messages = bodies(text, options, labels=list_labels(reply))
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
