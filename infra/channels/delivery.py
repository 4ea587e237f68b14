"""Outbound HTTP shared by the channels' `send`: one POST with transport failures turned into
`DeliveryUnavailable`, and platform answers turned into the right `DeliveryError`.

Messages never contain the request URL or headers: Telegram's bot token is part of its URL, and
httpx puts URLs into some of its exception texts, so exceptions are re-raised `from None` with any
known secret scrubbed from their text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from infra.channels.errors import (
    DeliveryError,
    DeliveryRejected,
    DeliveryUnavailable,
    RateLimited,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("waypoint.channels")


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each (non-empty) secret replaced by `***`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


async def post(
    client: httpx.AsyncClient,
    url: str,
    *,
    channel: str,
    secrets: Iterable[str] = (),
    delivered: tuple[str, ...] = (),
    **kwargs: Any,
) -> httpx.Response:
    """POST through `client`; a network failure or timeout becomes `DeliveryUnavailable`, an
    unusable URL `DeliveryRejected`."""
    import httpx  # here, not at module level: a webhook Lambda that never sends never pays for it

    try:
        return await client.post(url, **kwargs)
    except httpx.TimeoutException as exc:
        raise DeliveryUnavailable(
            f"{channel} API did not answer in time ({type(exc).__name__})",
            channel=channel,
            delivered=delivered,
        ) from None
    except httpx.HTTPError as exc:
        detail = redact(str(exc), secrets)
        raise DeliveryUnavailable(
            f"{channel} API unreachable: {type(exc).__name__}: {detail}",
            channel=channel,
            delivered=delivered,
        ) from None
    except httpx.InvalidURL:
        raise DeliveryRejected(
            f"{channel} reply URL is not a valid http(s) URL", channel=channel, delivered=delivered
        ) from None


def json_body(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object, or {} when it is not one (an HTML error page from a proxy)."""
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def retry_after_header(response: httpx.Response) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or HTTP-date), or None."""
    raw = (response.headers.get("retry-after") or "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_for_status(
    channel: str,
    response: httpx.Response,
    *,
    platform_error: str | None,
    retry_after: float | None = None,
    rate_limited: bool = False,
    transient: bool = False,
    delivered: tuple[str, ...] = (),
) -> DeliveryError:
    """The error for a failed platform answer: 429 (or `rate_limited`) → `RateLimited`,
    5xx (or `transient`: a platform error code meaning "try again") → `DeliveryUnavailable`,
    anything else → `DeliveryRejected`."""
    status = response.status_code
    cls: type[DeliveryError]
    if status == 429 or rate_limited:
        cls = RateLimited
        retry_after = retry_after if retry_after is not None else retry_after_header(response)
    elif status >= 500 or transient:
        cls = DeliveryUnavailable
    else:
        cls = DeliveryRejected
    detail = f": {platform_error}" if platform_error else ""
    return cls(
        f"{channel} API refused the message (HTTP {status}){detail}",
        channel=channel,
        retry_after=retry_after,
        platform_status=status,
        platform_error=platform_error,
        delivered=delivered,
    )


async def rich_or_plain(
    rich: Callable[[], Awaitable[list[str]]],
    plain: Callable[[], Awaitable[list[str]]],
    *,
    channel: str,
    problems: list[str],
    is_malformed: Callable[[DeliveryRejected], bool],
    fallbacks: list[str],
) -> list[str]:
    """Send a rendered payload (buttons, a list, blocks) or, in its place, its plain form
    (the text with the options numbered), which every platform takes.

    The plain form is sent when the rendered payload breaks a documented rule (`problems`, from
    `infra.channels.platform_limits`: never sent, as the platform would refuse it), or when the
    platform refused it as malformed (`is_malformed`). Either is a bug in a renderer: logged as an
    error and noted in `fallbacks` (the receipt carries it; the worker counts it in a metric).
    The plain form is tried once; if it is refused too, that error is raised."""
    if problems:
        logger.error(
            "rendered payload breaks the platform's rules; sending it as plain text",
            extra={"channel": channel, "problems": problems[:5]},
        )
        fallbacks.append("; ".join(problems[:5]))
        return await plain()
    try:
        return await rich()
    except DeliveryRejected as error:
        if not is_malformed(error):
            raise
        logger.error(
            "platform refused a rendered payload as malformed; retrying once as plain text",
            extra={"channel": channel, "platform_error": error.platform_error},
        )
        fallbacks.append(error.platform_error or str(error))
        return await plain()
