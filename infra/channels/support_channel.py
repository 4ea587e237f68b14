"""Who may write to customers from the Slack support channel (`infra.handoff_slack`).

A person's message in a handoff thread is delivered to the customer as the team's, so the
channel id alone is not enough to trust it: a Slack Connect channel holds people of other
organizations, and a member of one of them could otherwise write to customers as the support
team. The relay is therefore configured with the workspaces (and optionally the people) whose
messages it relays:

| variable                           | meaning                                                       |
|------------------------------------|---------------------------------------------------------------|
| `WAYPOINT_SUPPORT_SLACK_CHANNEL`   | the support channel's id (`C…`, or `G…` for an old private one) |
| `WAYPOINT_SUPPORT_SLACK_TEAMS`     | required with the channel: comma-separated team ids (`T…`; `E…` for an Enterprise Grid organization) whose members may write to customers |
| `WAYPOINT_SUPPORT_SLACK_USERS`     | optional: comma-separated user ids (`U…` / `W…`); when set, only these people, and only from an allowed team |

The author's team is the one Slack states for the author: an event's `user_team` (else its
`team`), a click's `user.team_id`. The envelope's `team_id` and `authorizations` are not used:
they name the installation the event is delivered to, not who wrote it. A message whose author's
team is not stated is refused (fail closed).

Kept apart (no engine, no AWS imports) so the webhook can tell at once: a message in the support
channel creates no customer session of its own, and one from outside the allow-list is dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.channels.errors import ChannelConfigError

if TYPE_CHECKING:  # (annotations only: the settings read this module, the channels' models not)
    from infra.channels.base import NormalizedMessage

SUPPORT_CHANNEL_ENV = "WAYPOINT_SUPPORT_SLACK_CHANNEL"
SUPPORT_TEAMS_ENV = "WAYPOINT_SUPPORT_SLACK_TEAMS"
SUPPORT_USERS_ENV = "WAYPOINT_SUPPORT_SLACK_USERS"

# Slack ids: an upper-case kind letter, then upper-case letters and digits.
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,30}$")
_TEAM_ID = re.compile(r"^[TE][A-Z0-9]{2,30}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,30}$")


class SupportRelayConfigError(ChannelConfigError):
    """The support relay's settings are missing or malformed; the message names the variable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, channel="slack")


@dataclass(frozen=True)
class SupportRelay:
    """The Slack support channel and who may write to customers from it."""

    channel: str
    teams: frozenset[str]
    users: frozenset[str] | None = None  # None: every member of an allowed team

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SupportRelay | None:
        """The relay configured in `environ` (default: the process environment); None when no
        support channel is set. Raises `SupportRelayConfigError` naming what to fix."""
        env = os.environ if environ is None else environ
        channel = (env.get(SUPPORT_CHANNEL_ENV) or "").strip()
        if not channel:
            return None
        if not _CHANNEL_ID.match(channel):
            raise SupportRelayConfigError(
                f"{SUPPORT_CHANNEL_ENV}={channel[:40]!r} is not a Slack channel id: use the id "
                "(C0123ABCD — channel details → About → Channel ID), not the channel's name"
            )
        teams = _ids(env.get(SUPPORT_TEAMS_ENV), SUPPORT_TEAMS_ENV, _TEAM_ID, "team", "T0123ABCD")
        if not teams:
            raise SupportRelayConfigError(
                f"{SUPPORT_TEAMS_ENV} is required with {SUPPORT_CHANNEL_ENV}: the comma-separated "
                "Slack team ids (T0123ABCD — `auth.test` returns yours as team_id) whose members "
                "may write to customers from the support channel. A Slack Connect channel also "
                "holds people of other organizations; without this list any of them could."
            )
        users = _ids(env.get(SUPPORT_USERS_ENV), SUPPORT_USERS_ENV, _USER_ID, "user", "U0123ABCD")
        return cls(channel=channel, teams=teams, users=users or None)

    def in_channel(self, message: NormalizedMessage) -> bool:
        """Whether a Slack message was written in the support channel (by anyone)."""
        return message.channel == "slack" and message.reply_to.get("channel") == self.channel

    def admits(self, message: NormalizedMessage) -> bool:
        """Whether a support-channel message may reach a customer: its author is of an allowed
        team (as Slack states it) and, when a user list is set, on it."""
        return (
            self.in_channel(message)
            and message.sender_team is not None
            and message.sender_team in self.teams
            and (self.users is None or message.customer_id in self.users)
        )

    def refuses(self, message: NormalizedMessage) -> bool:
        """A message in the support channel from someone the relay does not trust."""
        return self.in_channel(message) and not self.admits(message)


def _ids(
    raw: str | None, variable: str, pattern: re.Pattern[str], kind: str, example: str
) -> frozenset[str]:
    """Comma-separated Slack ids of one kind; a malformed one is an error naming it."""
    ids = [item.strip() for item in (raw or "").split(",") if item.strip()]
    for item in ids:
        if not pattern.match(item):
            raise SupportRelayConfigError(
                f"{variable}: {item[:40]!r} is not a Slack {kind} id (like {example}: the id, "
                "not a name or an @handle; upper-case letters and digits, comma-separated)"
            )
    return frozenset(ids)
