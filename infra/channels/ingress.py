"""Guards every channel runs on an inbound request, in this order: method → size → content type
→ authenticity (per channel) → parse. Each failure is a typed `WebhookRejected` with its status.

Nothing here looks at a body before its size is known to be acceptable, and nothing parses a body
before its channel has verified it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from pydantic import BaseModel, ValidationError

from infra.channels.base import ChannelRequest
from infra.channels.errors import (
    MalformedRequest,
    MethodNotAllowed,
    PayloadTooLarge,
    SignatureRejected,
    StaleRequest,
    UnsupportedMediaType,
)

DEFAULT_MAX_BODY_BYTES = 256 * 1024
REPLAY_WINDOW_SECONDS = 300  # Slack's and Standard Webhooks' tolerance: ±5 min
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
_MAX_FORM_FIELDS = 1000
_UNIX_SECONDS = re.compile(r"^[0-9]{1,12}$")  # not \d, nor str.isdigit: both accept "١" or "¹"
_CONTENT_LENGTH = re.compile(r"^[0-9]{1,18}$")

Model = TypeVar("Model", bound=BaseModel)


def require_method(request: ChannelRequest, allowed: Iterable[str], channel: str) -> None:
    """405 with an `Allow` header unless the method is one of `allowed`."""
    allowed = tuple(allowed)
    if request.method not in allowed:
        raise MethodNotAllowed(
            f"{channel} webhooks accept {', '.join(allowed)}, not {request.method[:16]}",
            channel=channel,
            headers={"Allow": ", ".join(allowed)},
        )


def require_size(request: ChannelRequest, max_bytes: int, channel: str) -> None:
    """413 if the declared Content-Length or the actual body exceeds `max_bytes`. The actual
    length is what counts: a Content-Length smaller than the body proves nothing."""
    declared = (request.header("content-length") or "").strip()
    too_big = len(request.body) > max_bytes or (
        bool(_CONTENT_LENGTH.match(declared)) and int(declared) > max_bytes
    )
    if too_big:
        raise PayloadTooLarge(
            f"{channel} webhook body is over the {max_bytes}-byte limit", channel=channel
        )


def require_content_type(request: ChannelRequest, allowed: Iterable[str], channel: str) -> str:
    """The request's media type, or 415 unless it is one of `allowed`."""
    allowed = tuple(allowed)
    media_type = request.content_type
    if media_type not in allowed:
        shown = media_type[:64] or "none"
        raise UnsupportedMediaType(
            f"{channel} webhooks must be {' or '.join(allowed)}, got {shown}", channel=channel
        )
    return media_type


def require_header(request: ChannelRequest, name: str, channel: str) -> str:
    """The value of an authentication header, or 401 naming the missing header."""
    value = request.header(name)
    if not value:
        raise SignatureRejected(f"missing {name} header", channel=channel)
    return value


def require_fresh_timestamp(
    raw: str | None, now: datetime, channel: str, header: str, window: int = REPLAY_WINDOW_SECONDS
) -> str:
    """`raw` stripped, or 401 unless it is unix seconds within ±`window` of `now`. Garbage ("abc",
    "", floats, absurdly long digit strings) is rejected, never allowed to raise anything else."""
    timestamp = (raw or "").strip()
    if not _UNIX_SECONDS.match(timestamp):
        raise SignatureRejected(f"missing or invalid {header} header", channel=channel)
    skew = abs(now.timestamp() - int(timestamp))
    if skew > window:
        raise StaleRequest(
            f"{header} is {int(skew)} s away from our clock (limit {window} s): a replay, or a "
            "clock out of sync",
            channel=channel,
        )
    return timestamp


# Replays by the payload's own timestamp. A platform retries a message for a while (Meta up to 7
# days, Telegram 24 h), and the webhook's inbox remembers each event for 8 days
# (functions/webhook.py INBOX_TTL_SECONDS), so a message older than this window is a replay that
# the inbox may have forgotten: it is acknowledged (200, so the platform stops) and dropped.
MAX_MESSAGE_AGE = timedelta(days=7)


def replay_age(sent_at: datetime | None, received_at: datetime) -> timedelta | None:
    """How much older than `MAX_MESSAGE_AGE` a message sent at `sent_at` is, or None when it is
    fresh or its time is unknown (the platform's signature still holds; the inbox dedupes)."""
    if sent_at is None:
        return None
    age = received_at - sent_at
    return age if age > MAX_MESSAGE_AGE else None


def unix_time(value: int | float | str | None) -> datetime | None:
    """A platform's unix timestamp (seconds, possibly as a string like Slack's "1595926230.0096")
    as a UTC datetime; None when absent, zero or unrepresentable: it is informative only."""
    try:
        seconds = 0.0 if value is None or value == "" else float(value)
        return datetime.fromtimestamp(seconds, UTC) if seconds > 0 else None
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def parse_json_object(body: bytes, channel: str) -> dict[str, Any]:
    """The body as a JSON object, or 400. Strict UTF-8; arrays, scalars and `null` at the top
    level, invalid escapes and pathological nesting are all malformed."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError covers JSONDecodeError and ints over Python's digit limit; RecursionError
        # is `[[[[…` nested deeper than the parser's stack.
        raise MalformedRequest(
            f"{channel} webhook body is not valid JSON", channel=channel
        ) from None
    if not isinstance(data, dict):
        raise MalformedRequest(f"{channel} webhook body must be a JSON object", channel=channel)
    return _without_lone_surrogates(data)


def _without_lone_surrogates(value: Any) -> Any:
    """A JSON `\\ud83d` escape without its pair decodes to a lone surrogate, which nothing
    downstream (SQS, DynamoDB, UTF-8) can encode; replace it in every string, keys included."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_form(body: bytes, channel: str) -> list[tuple[str, str]]:
    """The body as `application/x-www-form-urlencoded` pairs (order and repeats kept), or 400."""
    try:
        return parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=bool(body),
            max_num_fields=_MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedRequest(
            f"{channel} webhook body is not valid form data", channel=channel
        ) from exc


def validate(model: type[Model], data: Any, channel: str) -> Model:
    """`data` validated as `model`, or 400 listing what is wrong (locations and reasons only; the
    offending values are customer data and stay out of the message)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)[:5]
        )
        raise MalformedRequest(
            f"{channel} webhook payload has an unexpected shape: {problems}", channel=channel
        ) from None
