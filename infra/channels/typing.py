""" "Working on it": a typing indicator shown while a turn runs (tens of seconds with a real model),
so the customer does not retype.

A channel that can show one implements `ShowsTyping`: Telegram (`sendChatAction`, shown ~5 s, so
refreshed every 4 s), WhatsApp (mark-as-read with `typing_indicator`, shown up to 25 s or until
the reply, refreshed every 20 s; through Twilio too, with its Typing Indicators resource), Slack (`assistant.threads.setStatus` in assistant threads; kept
until the reply, so sent once). The worker wraps the turn in `typing_while(...)`: the indicator is
sent as soon as the turn is picked up and refreshed until it ends. It is best effort by design: a
failure is logged and stops the indicator, never the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("waypoint.channels")


@runtime_checkable
class ShowsTyping(Protocol):
    """A channel that can show the customer that a reply is being prepared."""

    name: str
    # Seconds between two indicators while the turn runs; None: one is enough (it lasts).
    typing_refresh_seconds: float | None

    async def show_typing(self, reply_to: dict[str, Any], client: httpx.AsyncClient) -> bool:
        """Show the indicator in the conversation `reply_to` points at. False when this
        conversation cannot show one (no need to try again); raises `DeliveryError` on failure."""
        ...


@contextlib.asynccontextmanager
async def typing_while(
    channel: object, reply_to: dict[str, Any], client: httpx.AsyncClient
) -> AsyncIterator[None]:
    """Show `channel`'s typing indicator now and keep it up until the block ends. Does nothing
    for a channel without one; never raises because of it."""
    if not isinstance(channel, ShowsTyping) or not reply_to:
        yield
        return
    task = asyncio.create_task(_keep_typing(channel, reply_to, client))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _keep_typing(
    channel: ShowsTyping, reply_to: dict[str, Any], client: httpx.AsyncClient
) -> None:
    while True:
        try:
            shown = await channel.show_typing(reply_to, client)
        except Exception as error:  # best effort: the turn goes on without an indicator
            logger.warning(
                "typing indicator not shown",
                extra={"channel": channel.name, "error": f"{type(error).__name__}: {error}"},
            )
            return
        if not shown or channel.typing_refresh_seconds is None:
            return
        await asyncio.sleep(channel.typing_refresh_seconds)
