"""A secret that may hold two values while it is rotated, so a key changes without downtime.

A secret that *verifies* what comes in — the management API key, a webhook's secret token, a
signing secret, an app secret — is compared with every value it holds. During a rotation its
parameter holds the new value and the old one, separated by a space (`"NEW OLD"`): callers and
platforms still using the old value are accepted while they move to the new one; once the old
value is removed, it is refused. The first value is the current one: it is what Waypoint itself
signs or sends with (the generic channel's callbacks, Twilio's Messages API). The deployed
functions read the parameters again after `WAYPOINT_SECRETS_MAX_AGE_SECONDS` (`infra.runtime`),
so each step of a rotation reaches every warm container within that time (docs/deploy.md,
"Rotating keys and secrets").

A value never contains whitespace: the secrets Waypoint uses are hex, base64url or the platforms'
own tokens, and `openssl rand -hex 32` makes new ones.

    key = RotatingSecret("k-new k-old")
    key.verifies(received, lambda value: value.get_secret_value())   # either value → True
    key.current.get_secret_value()                                   # "k-new"
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import SecretStr

from infra.channels.signing import Secret, constant_time_equals


class RotatingSecret:
    """The values one secret holds: the current one first, then any still accepted (the old
    value, during a rotation). Never shown in reprs or logs."""

    __slots__ = ("_values",)

    def __init__(self, value: Secret | RotatingSecret) -> None:
        if isinstance(value, RotatingSecret):
            self._values: tuple[SecretStr, ...] = value.values
            return
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        values = tuple(dict.fromkeys(raw.split()))  # the same value twice counts once
        if not values:
            raise ValueError("a secret needs a value")
        self._values = tuple(SecretStr(part) for part in values)

    def __repr__(self) -> str:
        return f"RotatingSecret(values={len(self._values)})"

    @property
    def current(self) -> SecretStr:
        """The value Waypoint signs or sends with: the first one."""
        return self._values[0]

    @property
    def values(self) -> tuple[SecretStr, ...]:
        """Every value accepted, the current one first."""
        return self._values

    @property
    def rotating(self) -> bool:
        """Whether it holds more than one value (a rotation is under way)."""
        return len(self._values) > 1

    def verifies(self, received: str, expected: Callable[[SecretStr], str]) -> bool:
        """Whether `received` equals `expected(value)` for one of the values. Every value is
        compared, in constant time, whichever matches: the timing tells nothing about which."""
        matches = [constant_time_equals(received, expected(value)) for value in self._values]
        return any(matches)
