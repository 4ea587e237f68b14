"""Deferring a turn whose model is rate-limited (`engine.turn`'s `defer_rate_limited`): the turn
ends with `ModelRateLimited` before anything is committed, unless a tool already ran."""

from __future__ import annotations

import asyncio

from engine.errors import ModelRateLimited
from engine.stages.state import TurnState

# A tool call with one of these statuses reached the tool: its turn commits whatever the model does.
_DISPATCHED = frozenset({"ok", "error", "interrupted"})


async def defer_if_rate_limited(
    state: TurnState, drafting: asyncio.Task[str] | None, *, defer: bool
) -> None:
    """Raise `ModelRateLimited` when this turn is to be deferred: the model is rate-limited,
    the deployment defers such turns (`defer`), and no tool has run yet. Drafts are stopped
    first."""
    limited = state.llm.rate_limited
    if limited is None or not defer:
        return
    if any(call.status in _DISPATCHED for call in state.trace.tool_calls):
        state.trace.notes.append(
            "rate-limited after a tool ran: not deferred, the turn commits what ran"
        )
        return
    if drafting is not None:
        drafting.cancel()
        await asyncio.wait({drafting})
        if not drafting.cancelled():
            drafting.exception()  # retrieved: a failed prediction is no unhandled error
    await state.llm.settle_drafts()
    raise ModelRateLimited(
        f"turn {state.turn_id}: the model is rate-limited ({limited}); nothing committed",
        retry_after=limited.retry_after,
    )
