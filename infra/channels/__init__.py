"""Chat channels: verify and normalize inbound webhooks, deliver replies through platform APIs.

Independent of AWS and of the turn logic. See `base` for the contract, one module per platform
(`telegram`, `slack`, `whatsapp`, `twilio`, `generic`), `registry` to build them from the
environment, and `signing` to produce genuinely signed requests (tests, demos).
"""

from infra.channels.base import (
    Channel,
    ChannelRequest,
    DeliveryReceipt,
    NormalizedMessage,
    OutboundReply,
    ReplyOption,
    WebhookOutcome,
)
from infra.channels.errors import (
    ChannelConfigError,
    ChannelError,
    ChannelNotEnabled,
    ChannelNotFound,
    DeliveryError,
    DeliveryRejected,
    DeliveryUnavailable,
    HandshakeRejected,
    MalformedRequest,
    MethodNotAllowed,
    PayloadTooLarge,
    RateLimited,
    SignatureRejected,
    StaleRequest,
    UnsupportedMediaType,
    WebhookRejected,
)
from infra.channels.registry import (
    ChannelSecrets,
    DisabledChannel,
    build_channels,
    enabled_channels,
    lookup_channel,
)

__all__ = [
    "Channel",
    "ChannelConfigError",
    "ChannelError",
    "ChannelNotEnabled",
    "ChannelNotFound",
    "ChannelRequest",
    "ChannelSecrets",
    "DeliveryError",
    "DeliveryReceipt",
    "DeliveryRejected",
    "DeliveryUnavailable",
    "DisabledChannel",
    "HandshakeRejected",
    "MalformedRequest",
    "MethodNotAllowed",
    "NormalizedMessage",
    "OutboundReply",
    "PayloadTooLarge",
    "RateLimited",
    "ReplyOption",
    "SignatureRejected",
    "StaleRequest",
    "UnsupportedMediaType",
    "WebhookOutcome",
    "WebhookRejected",
    "build_channels",
    "enabled_channels",
    "lookup_channel",
]
