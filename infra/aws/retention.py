"""Retention settings for the state table's TTLs: defined in `engine.privacy.retention`, shared with the
in-memory stores, which expire the same items after the same times."""

from engine.privacy.retention import (
    DAY,
    DEFAULT_EVENT_DAYS,
    DEFAULT_IDLE_DAYS,
    DEFAULT_TRACE_DAYS,
    EVENTS_ENV,
    IDLE_ENV,
    TRACES_ENV,
    InvalidRetention,
    Retention,
)

__all__ = [
    "DAY",
    "DEFAULT_EVENT_DAYS",
    "DEFAULT_IDLE_DAYS",
    "DEFAULT_TRACE_DAYS",
    "EVENTS_ENV",
    "IDLE_ENV",
    "TRACES_ENV",
    "InvalidRetention",
    "Retention",
]
