"""What reading and grounding values costs a turn: the CPU spent in `bind_answers` and
`ground_call`, summed over the turn (its concurrent node selections included) and recorded on the
trace (`TurnTrace.values_ms`), so a benchmark can show it beside the engine's other work."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

# A mutable box: tasks a turn gathers copy the context, and still add to the same total.
_SPENT: ContextVar[list[float] | None] = ContextVar("values_seconds", default=None)


def start() -> list[float]:
    """Begin counting for this turn; the returned box holds the seconds spent so far."""
    box = [0.0]
    _SPENT.set(box)
    return box


def measured(fn: Callable[P, R]) -> Callable[P, R]:
    """Count `fn`'s time into the turn's box (a no-op outside a turn)."""

    @functools.wraps(fn)
    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        box = _SPENT.get()
        if box is None:
            return fn(*args, **kwargs)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            box[0] += time.perf_counter() - started

    return timed
