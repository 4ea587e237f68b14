"""Building channels from the environment: enabled only with all their secrets, otherwise a 404
naming the variables to set; secrets never in reprs."""

from __future__ import annotations

import httpx
import pytest

from infra.channels.base import Channel, OutboundReply
from infra.channels.errors import ChannelNotEnabled, ChannelNotFound, DeliveryRejected
from infra.channels.registry import (
    ChannelSecrets,
    DisabledChannel,
    build_channels,
    enabled_channels,
    lookup_channel,
)
from tests.channels.payloads import tg_text_update
from tests.channels.signed import ALL_SECRETS, channel_secrets, telegram_request

ENV = {
    "WAYPOINT_TELEGRAM_SECRET_TOKEN": "sekret-tg",
    "WAYPOINT_TELEGRAM_BOT_TOKEN": "42:sekret-bot",
    "WAYPOINT_SLACK_SIGNING_SECRET": "sekret-slack-signing",
    "WAYPOINT_SLACK_BOT_TOKEN": "xoxb-sekret",
    "WAYPOINT_WHATSAPP_APP_SECRET": "sekret-wa-app",
    "WAYPOINT_WHATSAPP_VERIFY_TOKEN": "sekret-wa-verify",
    "WAYPOINT_WHATSAPP_ACCESS_TOKEN": "sekret-wa-access",
    "WAYPOINT_TWILIO_AUTH_TOKEN": "sekret-twilio",
    "WAYPOINT_TWILIO_ACCOUNT_SID": "AC1",
    "WAYPOINT_TWILIO_SHARED_KEY": "sekret-shared-key",
    "WAYPOINT_GENERIC_SECRET": "sekret-generic",
}


def test_every_secret_is_read_from_its_documented_variable() -> None:
    secrets = ChannelSecrets.from_env(ENV)
    for field in ChannelSecrets.model_fields:
        value = getattr(secrets, field)
        assert value is not None and value.get_secret_value() == ENV[ChannelSecrets.env_var(field)]


def test_all_channels_are_enabled_when_every_secret_is_set() -> None:
    channels = build_channels(ChannelSecrets.from_env(ENV), callback_hosts=["chat.example.com"])
    assert sorted(enabled_channels(channels)) == [
        "generic",
        "slack",
        "telegram",
        "twilio",
        "whatsapp",
    ]


def test_a_channel_missing_a_secret_is_a_404_naming_the_variable() -> None:
    env = {k: v for k, v in ENV.items() if k != "WAYPOINT_SLACK_SIGNING_SECRET"}
    env["WAYPOINT_WHATSAPP_ACCESS_TOKEN"] = "   "  # blank counts as unset
    channels = build_channels(ChannelSecrets.from_env(env))

    assert "slack" not in enabled_channels(channels)
    with pytest.raises(ChannelNotEnabled) as caught:
        channels["slack"].handle(telegram_request(tg_text_update()))
    assert caught.value.status == 404
    assert "WAYPOINT_SLACK_SIGNING_SECRET" in str(caught.value)
    assert "WAYPOINT_SLACK_BOT_TOKEN" not in str(caught.value)  # only what is missing
    with pytest.raises(ChannelNotEnabled, match="WAYPOINT_WHATSAPP_ACCESS_TOKEN"):
        channels["whatsapp"].handle(telegram_request(tg_text_update()))


def test_no_environment_means_no_channel() -> None:
    channels = build_channels(ChannelSecrets.from_env({}))
    assert enabled_channels(channels) == {}
    assert all(isinstance(channel, DisabledChannel) for channel in channels.values())


def test_an_invalid_secret_disables_its_channel_with_the_reason() -> None:
    env = ENV | {"WAYPOINT_TELEGRAM_SECRET_TOKEN": "has*stars/and.dots"}
    channel = build_channels(ChannelSecrets.from_env(env))["telegram"]
    with pytest.raises(ChannelNotEnabled) as caught:
        channel.handle(telegram_request(tg_text_update()))
    assert "A-Z a-z 0-9 _ -" in str(caught.value) and "stars" not in str(caught.value)


def test_a_secret_holds_at_most_two_values_and_a_sending_token_one() -> None:
    # A verifying secret holds the new and the old value during a rotation, never a phrase.
    env = ENV | {"WAYPOINT_TELEGRAM_SECRET_TOKEN": "has spaces in it"}
    telegram = build_channels(ChannelSecrets.from_env(env))["telegram"]
    with pytest.raises(ChannelNotEnabled, match="holds 4 space-separated values") as caught:
        telegram.handle(telegram_request(tg_text_update()))
    assert "spaces" not in str(caught.value)
    env = ENV | {"WAYPOINT_SLACK_BOT_TOKEN": "xoxb-new xoxb-old"}
    slack = build_channels(ChannelSecrets.from_env(env))["slack"]
    with pytest.raises(ChannelNotEnabled, match="WAYPOINT_SLACK_BOT_TOKEN holds 2") as caught:
        slack.handle(telegram_request(tg_text_update()))
    assert "xoxb" not in str(caught.value)
    assert "WAYPOINT_TELEGRAM_SECRET_TOKEN" in str(caught.value)


def test_the_generic_channel_refuses_to_start_without_a_callback_allow_list() -> None:
    for hosts in (None, [], [" "]):
        channel = build_channels(ChannelSecrets.from_env(ENV), callback_hosts=hosts)["generic"]
        assert "generic" not in enabled_channels({"generic": channel})
        with pytest.raises(ChannelNotEnabled, match="WAYPOINT_CALLBACK_HOSTS"):
            channel.handle(telegram_request(tg_text_update()))


async def test_a_disabled_channel_cannot_send() -> None:
    channel = build_channels(ChannelSecrets())["generic"]
    async with httpx.AsyncClient() as client:
        with pytest.raises(DeliveryRejected, match="WAYPOINT_GENERIC_SECRET"):
            await channel.send(OutboundReply(text="hi"), client)


def test_unknown_channel_is_a_404_listing_the_known_ones(channels: dict[str, Channel]) -> None:
    with pytest.raises(ChannelNotFound) as caught:
        lookup_channel(channels, "foo")
    assert caught.value.status == 404 and "telegram" in str(caught.value)
    assert lookup_channel(channels, "slack") is channels["slack"]


def test_secrets_never_show_in_reprs(channels: dict[str, Channel]) -> None:
    shown = repr(channel_secrets()) + str(channel_secrets()) + repr(channels)
    shown += repr(ChannelSecrets.from_env(ENV))
    for secret in (*ALL_SECRETS, *ENV.values()):
        assert secret not in shown


def test_every_channel_satisfies_the_protocol(channels: dict[str, Channel]) -> None:
    assert all(isinstance(channel, Channel) for channel in channels.values())
    assert {name: channel.name for name, channel in channels.items()} == {
        name: name for name in channels
    }
