"""How long a session store keeps what it stores about a conversation (DynamoDB TTL on AWS; the
in-memory stores expire the same items after the same times).

Three settings, template parameters passed to the functions as environment variables (days; 0 =
keep forever):

- `WAYPOINT_SESSION_IDLE_DAYS` (default 365): a session nobody wrote to for this long expires —
  its META item, its turn markers and its customer index entries. Every turn pushes it back.
- `WAYPOINT_EVENT_RETENTION_DAYS` (default 365): each event item expires this long after it was
  written. A live session loses its oldest events first; a turn reads only the recent window,
  and the evidence a turn needs from older events is kept in the session's state.
- `WAYPOINT_TRACE_RETENTION_DAYS` (default 30): each turn's trace expires this long after it.

Events may not outlive the session they belong to (`event days <= idle days`): a session that
expired can start afresh under the same id, and an old event at an offset it reuses would
otherwise collide with it. DynamoDB deletes expired items lazily, so every read and every
conditional write treats `expires_at <= now` as absent; the in-memory stores do the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from engine.errors import WaypointError

DAY = 24 * 3600
IDLE_ENV = "WAYPOINT_SESSION_IDLE_DAYS"
EVENTS_ENV = "WAYPOINT_EVENT_RETENTION_DAYS"
TRACES_ENV = "WAYPOINT_TRACE_RETENTION_DAYS"
DEFAULT_IDLE_DAYS = 365
DEFAULT_EVENT_DAYS = 365
DEFAULT_TRACE_DAYS = 30


class InvalidRetention(WaypointError):
    """A retention setting is not a whole number of days, or events would outlive sessions."""


@dataclass(frozen=True)
class Retention:
    """TTLs in seconds; None keeps items forever."""

    session_idle: int | None = DEFAULT_IDLE_DAYS * DAY
    events: int | None = DEFAULT_EVENT_DAYS * DAY
    traces: int | None = DEFAULT_TRACE_DAYS * DAY

    def __post_init__(self) -> None:
        if self.session_idle is not None and (
            self.events is None or self.events > self.session_idle
        ):
            raise InvalidRetention(
                f"events are kept {_days(self.events)} but idle sessions only "
                f"{_days(self.session_idle)}: set {EVENTS_ENV} (EventRetentionDays) to at most "
                f"{IDLE_ENV} (SessionIdleDays), or 0 for both to keep everything"
            )

    @classmethod
    def from_env(cls) -> Retention:
        """The deployment's settings (defaults when unset)."""
        return cls(
            session_idle=_seconds(IDLE_ENV, DEFAULT_IDLE_DAYS),
            events=_seconds(EVENTS_ENV, DEFAULT_EVENT_DAYS),
            traces=_seconds(TRACES_ENV, DEFAULT_TRACE_DAYS),
        )

    @classmethod
    def forever(cls) -> Retention:
        return cls(session_idle=None, events=None, traces=None)


def _seconds(name: str, default: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default * DAY
    try:
        days = int(raw)
    except ValueError:
        days = -1
    if days < 0:
        raise InvalidRetention(f"{name}={raw!r}: give a whole number of days (0 = keep forever)")
    return days * DAY if days else None


def _days(seconds: int | None) -> str:
    return "forever" if seconds is None else f"{seconds // DAY} days"
