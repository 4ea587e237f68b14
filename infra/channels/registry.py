"""Which channels are on, built from secrets in the environment.

A channel is enabled only when every secret it needs, for receiving and for replying, is set;
otherwise it is present as a `DisabledChannel` that answers 404 naming the variables to set. (A
channel that could receive but never answer would silently swallow customers' messages.)

A secret that verifies requests (`ROTATABLE_SECRETS`) may hold two values, space-separated, while
it is rotated (`infra.rotating_secrets`); a token a channel sends with holds exactly one.

    channels = build_channels(ChannelSecrets.from_env())
    outcome = lookup_channel(channels, "slack").handle(request)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, SecretStr

from engine.clock import SystemClock
from infra.channels.base import (
    Channel,
    ChannelRequest,
    Clock,
    DeliveryReceipt,
    OutboundReply,
    WebhookOutcome,
)
from infra.channels.callbacks import Resolver
from infra.channels.errors import (
    ChannelConfigError,
    ChannelNotEnabled,
    ChannelNotFound,
    DeliveryRejected,
)

if TYPE_CHECKING:
    import httpx

ENV_PREFIX = "WAYPOINT_"


class ChannelSecrets(BaseModel):
    """Every channel secret, each read from `WAYPOINT_<FIELD NAME IN CAPITALS>`
    (`telegram_secret_token` ← `WAYPOINT_TELEGRAM_SECRET_TOKEN`). `SecretStr` keeps the values
    out of reprs and logs; a blank variable counts as unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    telegram_secret_token: SecretStr | None = None
    telegram_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_bot_token: SecretStr | None = None
    whatsapp_app_secret: SecretStr | None = None
    whatsapp_verify_token: SecretStr | None = None
    whatsapp_access_token: SecretStr | None = None
    twilio_auth_token: SecretStr | None = None
    twilio_account_sid: SecretStr | None = None
    twilio_shared_key: SecretStr | None = None  # optional: SharedKey (HMAC-SHA256) signing
    generic_secret: SecretStr | None = None

    @staticmethod
    def env_var(field: str) -> str:
        """The environment variable a field is read from."""
        return ENV_PREFIX + field.upper()

    @classmethod
    def env_names(cls) -> tuple[str, ...]:
        """Every variable a channel secret is read from (what the secrets path may hold)."""
        return tuple(cls.env_var(field) for field in cls.model_fields)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ChannelSecrets:
        """Read every secret from `environ` (default: the process environment)."""
        env = os.environ if environ is None else environ
        values = {}
        for field in cls.model_fields:
            value = (env.get(cls.env_var(field)) or "").strip()
            if value:
                values[field] = SecretStr(value)
        return cls(**values)

    def get(self, field: str) -> SecretStr:
        """A secret that must be set (the registry checks before building a channel)."""
        value = getattr(self, field)
        if not isinstance(value, SecretStr):
            raise ChannelConfigError(f"{self.env_var(field)} is not set")
        return value

    def rotating(self, field: str) -> SecretStr:
        """A secret that verifies requests: set, holding one value, or two (space-separated)
        while it is rotated."""
        value = self.get(field)
        count = len(value.get_secret_value().split())
        if count > MAX_ROTATION_VALUES:
            raise ChannelConfigError(
                f"{self.env_var(field)} holds {count} space-separated values; during a rotation "
                "it holds two, the new value and the old one (docs/deploy.md, rotating secrets)"
            )
        return value

    def single(self, field: str) -> SecretStr:
        """A secret that must be set and hold one value: a token a channel sends with (only the
        secrets that verify requests take a second value during a rotation)."""
        value = self.get(field)
        count = len(value.get_secret_value().split())
        if count > 1:
            raise ChannelConfigError(
                f"{self.env_var(field)} holds {count} space-separated values; a token the "
                "channel sends with is one value (only the secrets that verify requests, "
                f"{', '.join(self.env_var(f) for f in ROTATABLE_SECRETS)}, take a second one "
                "during a rotation)"
            )
        return value


# The secrets that verify what comes in: each may hold two values during a rotation.
MAX_ROTATION_VALUES = 2
ROTATABLE_SECRETS = (
    "telegram_secret_token",
    "slack_signing_secret",
    "whatsapp_app_secret",
    "whatsapp_verify_token",
    "twilio_auth_token",
    "twilio_shared_key",
    "generic_secret",
)

# What each channel needs, in both directions.
REQUIRED_SECRETS: dict[str, tuple[str, ...]] = {
    "telegram": ("telegram_secret_token", "telegram_bot_token"),
    "slack": ("slack_signing_secret", "slack_bot_token"),
    "whatsapp": ("whatsapp_app_secret", "whatsapp_verify_token", "whatsapp_access_token"),
    "twilio": ("twilio_auth_token", "twilio_account_sid"),
    "generic": ("generic_secret",),
}


class DisabledChannel:
    """Stands in for a channel whose secrets are missing or invalid: every request is a 404
    `ChannelNotEnabled` and every send a `DeliveryRejected`, both saying what to configure."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def __repr__(self) -> str:
        return f"DisabledChannel(name={self.name!r})"

    def handle(self, request: ChannelRequest) -> WebhookOutcome:
        raise ChannelNotEnabled(self.reason, channel=self.name)

    async def send(self, reply: OutboundReply, client: httpx.AsyncClient) -> DeliveryReceipt:
        raise DeliveryRejected(self.reason, channel=self.name)


def build_channels(
    secrets: ChannelSecrets,
    clock: Clock | None = None,
    base_urls: Mapping[str, str] | None = None,
    *,
    public_base_url: str | None = None,
    callback_hosts: Iterable[str] | None = None,
    callback_resolver: Resolver | None = None,
) -> dict[str, Channel]:
    """Every known channel by name: enabled ones ready to use, the others `DisabledChannel`s.

        `clock` drives the replay windows (Slack, generic). `base_urls` overrides platform API roots
        by channel name (tests point them at a local fake). `public_base_url` is the scheme + host
        Twilio calls (its signature covers the URL). `callback_hosts` is the generic channel's required
    allow-list of callback hosts (without it that channel is disabled, saying so);
    `callback_resolver` replaces DNS for its address check (tests)."""
    clock = clock or SystemClock()
    urls = dict(base_urls or {})
    # Each platform's module is imported when its channel is built, i.e. only if it is enabled:
    # a deployment answering Telegram alone does not load the other four adapters on a cold
    # start.

    def telegram() -> Channel:
        from infra.channels.telegram import TELEGRAM_API, TelegramChannel

        return TelegramChannel(
            secret_token=secrets.rotating("telegram_secret_token"),
            bot_token=secrets.single("telegram_bot_token"),
            base_url=urls.get("telegram", TELEGRAM_API),
        )

    def slack() -> Channel:
        from infra.channels.slack import SLACK_API, SlackChannel

        return SlackChannel(
            signing_secret=secrets.rotating("slack_signing_secret"),
            bot_token=secrets.single("slack_bot_token"),
            clock=clock,
            base_url=urls.get("slack", SLACK_API),
        )

    def whatsapp() -> Channel:
        from infra.channels.whatsapp import GRAPH_API, WhatsAppChannel

        return WhatsAppChannel(
            app_secret=secrets.rotating("whatsapp_app_secret"),
            verify_token=secrets.rotating("whatsapp_verify_token"),
            access_token=secrets.single("whatsapp_access_token"),
            base_url=urls.get("whatsapp", GRAPH_API),
        )

    def twilio() -> Channel:
        from infra.channels.twilio import TWILIO_API, TWILIO_MESSAGING_API, TwilioChannel

        return TwilioChannel(
            auth_token=secrets.rotating("twilio_auth_token"),
            account_sid=secrets.single("twilio_account_sid"),
            public_base_url=public_base_url,
            base_url=urls.get("twilio", TWILIO_API),
            shared_key=secrets.rotating("twilio_shared_key") if secrets.twilio_shared_key else None,
            messaging_base_url=urls.get(
                "twilio_messaging", urls.get("twilio", TWILIO_MESSAGING_API)
            ),
        )

    def generic() -> Channel:
        from infra.channels.generic import GenericChannel

        return GenericChannel(
            secret=secrets.rotating("generic_secret"),
            clock=clock,
            callback_hosts=callback_hosts,
            resolve=callback_resolver,
        )

    factories: dict[str, Callable[[], Channel]] = {
        "telegram": telegram,
        "slack": slack,
        "whatsapp": whatsapp,
        "twilio": twilio,
        "generic": generic,
    }
    channels: dict[str, Channel] = {}
    for name, factory in factories.items():
        missing = [
            ChannelSecrets.env_var(field)
            for field in REQUIRED_SECRETS[name]
            if getattr(secrets, field) is None
        ]
        if missing:
            channels[name] = DisabledChannel(
                name, f"the {name} channel is not enabled: set {' and '.join(missing)}"
            )
            continue
        try:
            channels[name] = factory()
        except ChannelConfigError as exc:
            variables = ", ".join(ChannelSecrets.env_var(field) for field in REQUIRED_SECRETS[name])
            channels[name] = DisabledChannel(
                name, f"the {name} channel is not enabled: {exc} (check {variables})"
            )
    return channels


def lookup_channel(channels: Mapping[str, Channel], name: str) -> Channel:
    """The channel called `name` (possibly disabled: its `handle` then raises a 404), or
    `ChannelNotFound` (404) listing the known names."""
    channel = channels.get(name)
    if channel is None:
        known = ", ".join(sorted(channels))
        raise ChannelNotFound(f"unknown channel {name[:40]!r}; known channels: {known}")
    return channel


def enabled_channels(channels: Mapping[str, Channel]) -> dict[str, Channel]:
    """Only the channels that are enabled."""
    return {
        name: channel
        for name, channel in channels.items()
        if not isinstance(channel, DisabledChannel)
    }
