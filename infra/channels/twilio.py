"""Twilio Messaging (SMS, and WhatsApp through Twilio): form webhooks in, Messages API out.

Inbound: `application/x-www-form-urlencoded` POSTs signed with
`X-Twilio-Signature = base64(HMAC-SHA1(auth token, url + Σ sorted(name + value)))`. The signature
covers the decoded parameters, so the form is parsed (bounded, no JSON) before it is verified, and
it covers the exact public URL Twilio called: behind API Gateway or a custom domain the URL this
Lambda sees differs, so pass `public_base_url` and the URL is rebuilt from it plus path and query.
Like Twilio's own validator we also accept the URL with the default port added or any port removed.
Accounts that switched to SharedKey signing send the same construction with HMAC-SHA256 and the
shared key's secret, announced by `X-Twilio-Webhooks-Signature-Settings: key=…,algorithm=HMAC_SHA256`;
both schemes are accepted, each only with its own secret.
No timestamp: deduplication on `MessageSid` is the only replay defence.

SMS has no buttons: options go out as numbered lines, and the reply comes back as plain text
(`NormalizedMessage.choice` is None). The turn worker, which knows the options it offered, maps
"2" or "billing" back with `infra.channels.options.match_numbered_reply`. WhatsApp quick replies
through Twilio carry `ButtonPayload`, which becomes the choice.

The webhook is acknowledged with empty TwiML; the reply is sent later through the Messages API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from engine.sessions.session import Attachment, AttachmentKind
from infra.channels.base import (
    ChannelRequest,
    DeliveryReceipt,
    NormalizedMessage,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.delivery import error_for_status, json_body, post
from infra.channels.errors import DeliveryRejected, MalformedRequest, SignatureRejected
from infra.channels.ingress import (
    DEFAULT_MAX_BODY_BYTES,
    FORM,
    parse_form,
    require_content_type,
    require_header,
    require_method,
    require_size,
)
from infra.channels.media import MediaFile, download, location_text, require_host
from infra.channels.options import numbered_options
from infra.channels.platform_limits import SMS_MAX_SEGMENTS, TWILIO_BODY_UTF16
from infra.channels.signing import (
    TWILIO_HMAC_SHA1,
    TWILIO_HMAC_SHA256,
    TWILIO_SIGNATURE,
    TWILIO_SIGNATURE_SETTINGS,
    Secret,
    as_secret,
    sign_twilio,
    twilio_signature_settings,
)
from infra.channels.sms import sms_cost
from infra.channels.text import clean_text, split_text, utf16_len
from infra.rotating_secrets import RotatingSecret

if TYPE_CHECKING:
    import httpx

TWILIO_API = "https://api.twilio.com"
TWILIO_MESSAGING_API = "https://messaging.twilio.com"  # the typing indicator's API (v2)
MAX_BODY_CHARS = TWILIO_BODY_UTF16  # the Messages API's limit for one message's Body
EMPTY_TWIML = b'<?xml version="1.0" encoding="UTF-8"?><Response/>'
_TWIML_HEADERS = {"Content-Type": "text/xml; charset=utf-8"}
_REQUIRED = ("MessageSid", "AccountSid", "From", "To")
_DEFAULT_PORTS = {"https": 443, "http": 80}


class TwilioChannel:
    """A Twilio account. `auth_token` verifies webhooks signed with the Auth Token scheme and, with
    `account_sid`, authenticates the Messages API (HTTP Basic). `shared_key` (optional) verifies
    webhooks signed with a SharedKey (HMAC-SHA256), for accounts that switched to it. Both may
    hold two values, space-separated, while they are rotated (`infra.rotating_secrets`: every
    value verifies; the first authenticates sends). `public_base_url`
    (`https://hooks.example.com`) is the scheme and host Twilio calls, when it differs from what
    the request shows."""

    name = "twilio"
    typing_refresh_seconds: float | None = 20.0  # WhatsApp shows it up to 25 s (SMS has none)

    def __init__(
        self,
        *,
        auth_token: Secret | RotatingSecret,
        account_sid: Secret,
        public_base_url: str | None = None,
        base_url: str = TWILIO_API,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        shared_key: Secret | RotatingSecret | None = None,
        messaging_base_url: str = TWILIO_MESSAGING_API,
    ) -> None:
        self._auth_token = RotatingSecret(auth_token)
        self._shared_key = RotatingSecret(shared_key) if shared_key is not None else None
        self._account_sid = as_secret(account_sid)
        self.public_base_url = public_base_url.rstrip("/") if public_base_url else None
        self.base_url = base_url.rstrip("/")
        self.messaging_base_url = messaging_base_url.rstrip("/")
        self.max_body_bytes = max_body_bytes

    def __repr__(self) -> str:
        return f"TwilioChannel(public_base_url={self.public_base_url!r})"

    # -- inbound --------------------------------------------------------------------------------

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        """Verify the signature over URL + parameters, then normalize an inbound message."""
        require_method(request, ("POST",), self.name)
        require_size(request, self.max_body_bytes, self.name)
        require_content_type(request, (FORM,), self.name)
        signature = require_header(request, TWILIO_SIGNATURE, self.name).strip()
        params = parse_form(request.body, self.name)
        algorithm, secret = self._signing_secret(request)

        def signed_for(url: str) -> bool:
            return secret.verifies(
                signature, lambda value: sign_twilio(value, url, params, algorithm=algorithm)
            )

        if not any([signed_for(url) for url in _url_variants(self.signed_url(request))]):
            raise SignatureRejected(
                f"wrong {TWILIO_SIGNATURE} header ({algorithm}; it also covers the exact public "
                "URL: check the public base URL setting)",
                channel=self.name,
            )

        fields: dict[str, str] = {}
        for key, value in params:
            fields.setdefault(key, value)
        missing = [name for name in _REQUIRED if not fields.get(name)]
        if missing:
            raise MalformedRequest(
                f"Twilio message webhook without {', '.join(missing)}", channel=self.name
            )
        if fields["AccountSid"] != self._account_sid.get_secret_value():
            raise SignatureRejected("request is for another Twilio account", channel=self.name)
        if "MessageStatus" in fields or fields.get("SmsStatus", "received") != "received":
            return _ack_ignored("a status callback, not an inbound message")
        return self._normalize(fields, request)

    def _signing_secret(self, request: ChannelRequest) -> tuple[str, RotatingSecret]:
        """The algorithm the request says it was signed with, and the secret that may have signed
        it: the Auth Token for HMAC_SHA1, the configured shared key for SharedKey's HMAC_SHA256
        (each with every value it holds). Each scheme is checked only with its own secret."""
        algorithm, _key_id = twilio_signature_settings(request.header(TWILIO_SIGNATURE_SETTINGS))
        if algorithm == TWILIO_HMAC_SHA1:
            return algorithm, self._auth_token
        if algorithm != TWILIO_HMAC_SHA256:
            raise SignatureRejected(
                f"unsupported Twilio signature algorithm {algorithm!r:.40} (supported: "
                f"{TWILIO_HMAC_SHA1} with the Auth Token, {TWILIO_HMAC_SHA256} with a SharedKey)",
                channel=self.name,
            )
        if self._shared_key is None:
            raise SignatureRejected(
                "the request is signed with a Twilio SharedKey (HMAC_SHA256), but no shared key "
                "is configured: set WAYPOINT_TWILIO_SHARED_KEY to the key's secret",
                channel=self.name,
            )
        return algorithm, self._shared_key

    def signed_url(self, request: ChannelRequest) -> str:
        """The URL Twilio signed: the request's own, or `public_base_url` + path + query."""
        if self.public_base_url is None:
            return request.url
        query = urlsplit(request.url).query
        return f"{self.public_base_url}{request.path}" + (f"?{query}" if query else "")

    def _normalize(self, fields: dict[str, str], request: ChannelRequest) -> WebhookOutcome:
        choice = fields.get("ButtonPayload") or None
        body = fields.get("Body", "")
        attachments = _attachments(fields)
        text = clean_text((fields.get("ButtonText") or body) if choice else body)
        text = text or location_text(attachments)
        if not text and not choice and not attachments:
            return _ack_ignored("empty message")
        account, ours, customer = fields["AccountSid"], fields["To"], fields["From"]
        reply_to: dict[str, Any] = {
            "to": customer,
            "from": ours,
            "message_sid": fields["MessageSid"],
        }
        if service := fields.get("MessagingServiceSid"):
            reply_to["messaging_service_sid"] = service
        message = NormalizedMessage(
            channel=self.name,
            account_id=account,
            event_id=fields["MessageSid"],
            conversation_key=f"twilio:{account}:{ours}:{customer}",
            customer_id=customer,
            customer_name=fields.get("ProfileName") or None,
            text=text,
            choice=choice,
            reply_to=reply_to,
            raw_type="whatsapp" if customer.startswith("whatsapp:") else "sms",
            received_at=request.received_at,
            attachments=attachments,
        )
        return WebhookOutcome(
            kind="messages", messages=[message], body=EMPTY_TWIML, headers=dict(_TWIML_HEADERS)
        )

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """One Messages API call per part; options as numbered lines. A part is at most 1600
        UTF-16 units (Twilio's Body limit) and, for SMS, at most 10 segments (GSM-7 or UCS-2)."""
        to = reply.reply_to.get("to")
        sender = _sender(reply.reply_to)
        if not to or sender is None:
            raise DeliveryRejected(
                "reply_to needs 'to' and 'from' or 'messaging_service_sid'", channel=self.name
            )
        text = reply.display_text
        if reply.options:
            text = f"{text}\n\n{reply.line('reply_with_number')}\n{numbered_options(reply.options)}"
        is_sms = not str(to).startswith("whatsapp:")
        sent: list[str] = []
        for part in split_text(text, MAX_BODY_CHARS, length=sms_length if is_sms else utf16_len):
            form = {"To": str(to), **sender, "Body": part}
            sent.append(await self._create_message(client, form, tuple(sent)))
        return DeliveryReceipt(channel=self.name, message_ids=sent)

    async def show_typing(self, reply_to: dict[str, Any], client: httpx.AsyncClient) -> bool:
        """WhatsApp through Twilio: the Typing Indicators resource (public beta), which also
        marks the customer's message read. SMS has no typing indicator."""
        message_sid = reply_to.get("message_sid")
        if not message_sid or not str(reply_to.get("to", "")).startswith("whatsapp:"):
            return False
        sid = self._account_sid.get_secret_value()
        token = self._auth_token.current.get_secret_value()
        response = await post(
            client,
            f"{self.messaging_base_url}/v2/Indicators/Typing.json",
            channel=self.name,
            secrets=(token,),
            data={"channel": "whatsapp", "messageId": str(message_sid)},
            auth=(sid, token),
        )
        if not response.is_success:
            raise error_for_status(self.name, response, platform_error=None)
        return True

    async def fetch_media(self, attachment: Attachment, client: httpx.AsyncClient) -> MediaFile:
        """A `MediaUrl`, downloaded with the account's credentials (HTTP Basic, when the account
        requires it), only from Twilio's hosts; Twilio redirects to storage, which gets no
        credentials (httpx drops them on a cross-host redirect)."""
        if not attachment.url:
            raise DeliveryRejected("the attachment has no Twilio MediaUrl", channel=self.name)
        hosts = ("twilio.com", urlsplit(self.base_url).hostname or "")
        url = require_host(attachment.url, hosts, channel=self.name)
        sid = self._account_sid.get_secret_value()
        token = self._auth_token.current.get_secret_value()
        return await download(client, url, channel=self.name, secrets=(token,), auth=(sid, token))

    async def _create_message(
        self, client: httpx.AsyncClient, form: dict[str, str], delivered: tuple[str, ...]
    ) -> str:
        sid = self._account_sid.get_secret_value()
        token = self._auth_token.current.get_secret_value()
        response = await post(
            client,
            f"{self.base_url}/2010-04-01/Accounts/{sid}/Messages.json",
            channel=self.name,
            secrets=(token,),
            delivered=delivered,
            data=form,
            auth=(sid, token),
        )
        data = json_body(response)
        if response.is_success:
            return str(data.get("sid", ""))
        code = data.get("code")
        detail = f"{code}: {data.get('message', '')}" if code is not None else None
        raise error_for_status(self.name, response, platform_error=detail, delivered=delivered)


def sms_length(text: str) -> int:
    """A length under which "≤ 1600" means both Twilio's Body limit (1600 UTF-16 units) and our
    SMS ceiling of `SMS_MAX_SEGMENTS` segments (each segment counted as 1600 / 10). It grows with
    the text, as `split_text` needs."""
    per_segment = MAX_BODY_CHARS // SMS_MAX_SEGMENTS
    return max(utf16_len(text), sms_cost(text).segments * per_segment)


MAX_MEDIA = 10  # Twilio sends at most 10 media per message (MediaUrl0 … MediaUrl9)


def _attachments(fields: dict[str, str]) -> list[Attachment]:
    """`MediaUrl{n}` / `MediaContentType{n}` for n < NumMedia (fetched later with the account's
    credentials), and a WhatsApp location (`Latitude`, `Longitude`, `Address`, `Label`)."""
    found: list[Attachment] = []
    try:
        count = min(int(fields.get("NumMedia") or 0), MAX_MEDIA)
    except ValueError:
        count = 0
    for n in range(max(count, 0)):
        url = fields.get(f"MediaUrl{n}")
        if not url:
            continue
        mime = fields.get(f"MediaContentType{n}") or None
        found.append(Attachment(kind=_kind_of(mime), url=url, mime=mime))
    try:
        latitude, longitude = float(fields["Latitude"]), float(fields["Longitude"])
    except (KeyError, ValueError):
        return found
    if not (-90 <= latitude <= 90 and -180 <= longitude <= 180):  # also false for NaN
        return found
    found.append(
        Attachment(
            kind="location",
            latitude=latitude,
            longitude=longitude,
            name=fields.get("Label") or None,
            address=fields.get("Address") or None,
        )
    )
    return found


def _kind_of(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/", 1)[0]
    kinds: dict[str, AttachmentKind] = {"image": "image", "video": "video", "audio": "audio"}
    return kinds.get(major, "document")


def _ack_ignored(reason: str) -> WebhookOutcome:
    return WebhookOutcome(
        kind="ignored", reason=reason, body=EMPTY_TWIML, headers=dict(_TWIML_HEADERS)
    )


def _sender(reply_to: dict[str, Any]) -> dict[str, str] | None:
    if sender := reply_to.get("from"):
        return {"From": str(sender)}
    if service := reply_to.get("messaging_service_sid"):
        return {"MessagingServiceSid": str(service)}
    return None


def _url_variants(url: str) -> list[str]:
    """`url` as given, plus the same URL with any port removed or, if it has none, with the
    scheme's default port: proxies and Twilio disagree about ports (Twilio's validator does the
    same)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return [url]
    userinfo, _, hostport = parts.netloc.rpartition("@")
    prefix = f"{userinfo}@" if userinfo else ""
    if port is not None:
        host = hostport[: hostport.rfind(":")]
        return [url, urlunsplit(parts._replace(netloc=f"{prefix}{host}"))]
    default = _DEFAULT_PORTS.get(parts.scheme)
    if default is None or not hostport:
        return [url]
    return [url, urlunsplit(parts._replace(netloc=f"{prefix}{hostport}:{default}"))]
