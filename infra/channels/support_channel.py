"""Which Slack messages are the support team's, not a customer's (`infra.handoff_slack`).

Kept apart (no engine, no AWS imports) so the webhook can tell at once: a message in the support
channel creates no customer session of its own.
"""

from __future__ import annotations

import os

from infra.channels.base import NormalizedMessage

SUPPORT_CHANNEL_ENV = "WAYPOINT_SUPPORT_SLACK_CHANNEL"


def support_channel() -> str | None:
    """The configured support channel id, if any."""
    return os.environ.get(SUPPORT_CHANNEL_ENV) or None


def is_support_message(message: NormalizedMessage) -> bool:
    """Whether a Slack message was written in the support channel (by a person of the team)."""
    channel = support_channel()
    return bool(
        channel and message.channel == "slack" and message.reply_to.get("channel") == channel
    )
