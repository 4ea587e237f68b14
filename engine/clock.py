"""Default Clock and IdGenerator, plus deterministic ones for tests."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """Starts at `start` and moves `step` forward on every reading: deterministic timestamps."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(seconds=1)):
        self._t = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._step = step

    def now(self) -> datetime:
        t = self._t
        self._t = t + self._step
        return t


class UuidIds:
    def new_id(self, prefix: str = "") -> str:
        return f"{prefix}{uuid.uuid4().hex[:20]}"


class SequentialIds:
    def __init__(self) -> None:
        self._n = itertools.count(1)

    def new_id(self, prefix: str = "") -> str:
        return f"{prefix}{next(self._n):06d}"
