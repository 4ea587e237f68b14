"""Typed errors of the channel layer.

Two families:

- `WebhookRejected` and its subclasses: an inbound request we refuse. Each carries the HTTP
  `status` to answer with, and a message that is safe to send back to the caller: it names what is
  wrong, never a secret, a signature we computed, or the body.
- `DeliveryError` and its subclasses: sending a reply through a platform failed. `retryable` and
  `retry_after` tell the turn worker whether (and when) trying again can help.

Status codes: every authentication failure (missing or forged signature, wrong secret token,
out-of-window timestamp) is 401. The request lacks valid credentials *now*, and a stale timestamp is
just a signature that has expired, which is why `StaleRequest` is a `SignatureRejected`. 403 is
kept for the one case where the caller authenticates by presenting a token we compare, and presents
the wrong one: Meta's GET handshake with a wrong `hub.verify_token` (Meta and pywa use 403 there).
"""

from __future__ import annotations

from typing import ClassVar

from engine.errors import WaypointError


class ChannelError(WaypointError):
    """Base of every error raised by `infra.channels`."""

    def __init__(self, message: str, *, channel: str | None = None) -> None:
        super().__init__(message)
        self.channel = channel


class ChannelConfigError(ChannelError, ValueError):
    """A channel was configured with an unusable value (e.g. a malformed Telegram secret token)."""


# -- inbound ------------------------------------------------------------------------------------


class WebhookRejected(ChannelError):
    """An inbound webhook request we refuse. Answer with `status` and `str(error)`."""

    status: ClassVar[int] = 400

    def __init__(
        self, message: str, *, channel: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, channel=channel)
        self.headers: dict[str, str] = dict(headers or {})


class SignatureRejected(WebhookRejected):
    """Missing, malformed or wrong signature / secret token."""

    status: ClassVar[int] = 401


class StaleRequest(SignatureRejected):
    """Correctly formed, but its signed timestamp is outside the replay window (Slack, generic)."""

    status: ClassVar[int] = 401


class HandshakeRejected(WebhookRejected):
    """A subscription handshake presented the wrong verify token (Meta's GET `hub.*`)."""

    status: ClassVar[int] = 403


class MalformedRequest(WebhookRejected):
    """Authentic, but not JSON / form data of the shape the platform documents."""

    status: ClassVar[int] = 400


class PayloadTooLarge(WebhookRejected):
    """The body (or its declared Content-Length) is over the channel's size cap."""

    status: ClassVar[int] = 413


class UnsupportedMediaType(WebhookRejected):
    """The Content-Type is not one this channel's platform sends."""

    status: ClassVar[int] = 415


class MethodNotAllowed(WebhookRejected):
    """An HTTP method the channel does not accept; `headers` carries `Allow`."""

    status: ClassVar[int] = 405


class ChannelNotFound(WebhookRejected):
    """No channel by that name exists, or it exists but is not enabled (its secrets are not set)."""

    status: ClassVar[int] = 404


class ChannelNotEnabled(ChannelNotFound):
    """The channel is known but disabled; the message names the environment variables to set."""


# -- outbound -----------------------------------------------------------------------------------


class DeliveryError(ChannelError):
    """Sending a reply failed.

    `retryable`: whether the same send may succeed later. `retry_after`: seconds the platform asked
    us to wait, when it said. `platform_status` / `platform_error`: the HTTP status and the
    platform's error code or description, for logs. `delivered`: ids of the parts of a long reply
    that did go out before the failure (retrying the whole reply would repeat them).
    """

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        channel: str | None = None,
        retry_after: float | None = None,
        platform_status: int | None = None,
        platform_error: str | None = None,
        delivered: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, channel=channel)
        self.retry_after = retry_after
        self.platform_status = platform_status
        self.platform_error = platform_error
        self.delivered = delivered


class RateLimited(DeliveryError):
    """The platform throttled us (HTTP 429, Slack `ratelimited`, Meta throughput codes)."""

    retryable: ClassVar[bool] = True


class DeliveryUnavailable(DeliveryError):
    """The platform could not be reached or failed on its side (network error, timeout, 5xx)."""

    retryable: ClassVar[bool] = True


class DeliveryRejected(DeliveryError):
    """The platform refused the message for good (bad token, unknown chat, blocked by the user,
    outside WhatsApp's 24 h window …). Retrying the same request will not help."""

    retryable: ClassVar[bool] = False
