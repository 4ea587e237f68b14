"""The CPU time of one strand of asyncio work, in a process whose event loop does other work too.

`python -m bench compare` needs the reference engine's CPU per turn, and the reference is one
process: its engine, its HTTP server answering the measuring client's polls, its plugin server.
The process's CPU over a turn counts all of it. This counts only the callbacks of the engine's
own tasks:

- `install()` wraps `asyncio.events.Handle._run`, through which an asyncio event loop runs every
  callback (every step of every task, every `call_soon` / `call_later` callback), and times each
  on the running thread's CPU clock (`time.thread_time`: another thread's work is never in it);
- a callback's time is charged to the `TaskCpu` account of the context it ran in. `mark()`
  called inside a task puts the account into that task's context; every task or callback the
  task creates afterwards copies its context and so is charged to the account too.

Not charged: callbacks outside marked contexts (other requests' handlers, protocol callbacks
that parse HTTP bytes), the event loop's own bookkeeping between callbacks (selecting, timer
heaps) and other threads. Charged on top of the work: two `thread_time()` reads per marked
callback (about a microsecond).

Standard library only: `bench/reference_driver.py` loads it by name inside the reference's own
virtual environment.
"""

from __future__ import annotations

import time
from asyncio import events
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

_ACCOUNT: ContextVar[TaskCpu | None] = ContextVar("bench_task_cpu_account", default=None)
_INSTALLED = "_bench_task_cpu"


class TaskCpu:
    """CPU seconds of the callbacks that ran in contexts marked with this account."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.callbacks = 0

    def mark(self) -> None:
        """Charge the current task (from now on) and all it creates from now on to this
        account. Call it inside the task: a task's steps run in its own copy of the context."""
        _ACCOUNT.set(self)

    @property
    def ms(self) -> float:
        return self.seconds * 1000


def install() -> None:
    """Time every asyncio callback of every thread's event loop and charge it to its context's
    account (once per process; callbacks in unmarked contexts are timed and dropped)."""
    original: Callable[[Any], None] = events.Handle._run
    if getattr(original, _INSTALLED, False):
        return

    def _run(self: events.Handle) -> None:
        started = time.thread_time()
        try:
            original(self)
        finally:
            # Read after the callback: the first step of a task that marks itself counts too.
            context = self._context  # type: ignore[attr-defined]  # set by Handle.__init__
            account = context.get(_ACCOUNT) if context is not None else None
            if account is not None:
                account.seconds += time.thread_time() - started
                account.callbacks += 1

    setattr(_run, _INSTALLED, True)
    events.Handle._run = _run  # type: ignore[method-assign]
