"""Slack: Events API and interactivity in, `chat.postMessage` out.

Inbound, one URL for both (told apart by content type), every request signed with v0 HMAC over
`v0:{timestamp}:{raw body}` and refused outside ±300 s of our clock; what a verified request says
is read by `infra.channels.slack_events` (events, button clicks, the handshake, dedup ids and
conversation keys). Outbound, the reply's text and options are laid out as Block Kit by
`infra.channels.slack_blocks` and posted here, in the thread being answered; a tool's view too
long for one message (50 blocks) goes on in further messages, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engine.sessions.session import Attachment
from infra.channels.base import (
    ChannelRequest,
    Clock,
    DeliveryReceipt,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.delivery import (
    error_for_status,
    json_body,
    logger,
    post,
    retry_after_header,
    rich_or_plain,
)
from infra.channels.errors import DeliveryRejected, SignatureRejected
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
)
from infra.channels.media import MediaFile, download, require_host
from infra.channels.options import numbered_options
from infra.channels.platform_limits import SLACK_SELECT_OPTIONS, slack_violations
from infra.channels.signing import (
    SLACK_SIGNATURE,
    SLACK_TIMESTAMP,
    Secret,
    as_secret,
    sign_slack,
)
from infra.channels.slack_blocks import (
    MAX_SECTION_CHARS,
    block_messages,
    fallback_text,
    parts,
)
from infra.channels.slack_events import CHANNEL, from_event_body, from_form
from infra.channels.text import utf16_len
from infra.rotating_secrets import RotatingSecret

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


class SlackChannel:
    """A Slack app. `signing_secret` verifies requests (two, space-separated, while it is rotated:
    `infra.rotating_secrets`); `bot_token` (xoxb-…) posts replies.
    `bot_user_id`, if known, is ignored as a sender; the ids in each event's `authorizations`
    that are bots are ignored as well, so it is optional."""

    name = CHANNEL
    typing_refresh_seconds: float | None = None  # the status stays until the app replies

    def __init__(
        self,
        *,
        signing_secret: Secret | RotatingSecret,
        bot_token: Secret,
        clock: Clock,
        base_url: str = SLACK_API,
        bot_user_id: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._signing_secret = RotatingSecret(signing_secret)
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
            data = parse_json_object(request.body, self.name)
            return from_event_body(data, request, bot_user_id=self.bot_user_id)
        return from_form(parse_form(request.body, self.name), request)

    def _verify(self, request: ChannelRequest) -> None:
        signature = require_header(request, SLACK_SIGNATURE, self.name)
        timestamp = require_fresh_timestamp(
            request.header(SLACK_TIMESTAMP), self.clock.now(), self.name, SLACK_TIMESTAMP
        )
        if not self._signing_secret.verifies(
            signature.strip(), lambda secret: sign_slack(secret, request.body, timestamp)
        ):
            raise SignatureRejected(f"wrong {SLACK_SIGNATURE} header", channel=self.name)

    # -- outbound -------------------------------------------------------------------------------

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        """`chat.postMessage` each part (in the thread, if any); options go on the last part: up
        to 25 as buttons, up to 100 as a select menu, more as numbered lines; a tool's view
        follows them, over as many messages as its blocks need (`block_messages`). Blocks Slack
        refuses as malformed are sent once more as plain text (the options numbered)."""
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

        def left_out(count: int) -> str:
            logger.warning(
                "a tool's view is too long for Slack's messages; its last blocks are left out",
                extra={"channel": self.name, "blocks_left_out": count},
            )
            return reply.line("view_left_out", count=count)

        messages = block_messages(
            last,
            options,
            reply.view,
            placeholder=reply.line("select_placeholder"),
            left_out=left_out,
        )
        if not messages:
            sent.append(await self._post_part(client, reply, last, None, sent))
            return DeliveryReceipt(channel=self.name, message_ids=sent)
        blocks, *more = messages

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
        for continued in more:  # the rest of a long view, in order, in the same thread
            sent += await self._post_continued(client, reply, continued, last, sent, fallbacks)
        return DeliveryReceipt(channel=self.name, message_ids=sent, plain_fallbacks=fallbacks)

    async def _post_continued(
        self,
        client: httpx.AsyncClient,
        reply: OutboundReply,
        blocks: list[dict[str, Any]],
        last: str,
        sent: list[str],
        fallbacks: list[str],
    ) -> list[str]:
        """One more message of a long view: its blocks, with their words as the `text` (or, for
        blocks without words, the reply's last part); as plain text if Slack refuses them."""
        text = fallback_text(blocks) or last

        async def rich() -> list[str]:
            return [await self._post_part(client, reply, text, blocks, sent)]

        async def plain() -> list[str]:
            return [await self._post_part(client, reply, text, None, sent)]

        return await rich_or_plain(
            rich,
            plain,
            channel=self.name,
            problems=slack_violations(self._payload(reply, text, blocks)),
            is_malformed=lambda error: error.platform_error in _MALFORMED_ERRORS,
            fallbacks=fallbacks,
        )

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
