"""What customers send besides text: the `Attachment`s the channels read from their payloads,
and fetching their files with the channel's credentials (for a tool that reads them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from engine.sessions.session import Attachment
from infra.channels.delivery import error_for_status, redact
from infra.channels.errors import ChannelConfigError, DeliveryRejected, DeliveryUnavailable

if TYPE_CHECKING:
    import httpx


def location_text(attachments: list[Attachment]) -> str:
    """A shared location, as the text of a message that has no other: what the agent reads
    ("Shared location: Eiffel Tower, Champ de Mars (48.858400, 2.294500)"); "" if none."""
    for attachment in attachments:
        if attachment.kind == "location" and attachment.latitude is not None:
            place = ", ".join(p for p in (attachment.name, attachment.address) if p)
            where = f"{attachment.latitude:.6f}, {attachment.longitude:.6f}"
            return f"Shared location: {place} ({where})" if place else f"Shared location: {where}"
    return ""


# -- fetching a file with the channel's credentials ------------------------------------------------

MAX_MEDIA_BYTES = 25 * 1024 * 1024  # above every platform's own media limit (WhatsApp: 100 MB docs)


class MediaFile(BaseModel):
    """A fetched attachment's bytes and media type."""

    model_config = ConfigDict(frozen=True)
    data: bytes = Field(repr=False)
    mime: str | None = None


@runtime_checkable
class FetchesMedia(Protocol):
    """A channel that can download what its customers sent (with its own credentials)."""

    name: str

    async def fetch_media(self, attachment: Attachment, client: httpx.AsyncClient) -> MediaFile:
        """The attachment's bytes; raises `DeliveryError` when the platform will not give them."""
        ...


async def fetch_attachment(
    channels: Mapping[str, object],
    attachment: Attachment | Mapping[str, Any],
    client: httpx.AsyncClient,
    *,
    channel: str | None = None,
) -> MediaFile:
    """Download `attachment` (as a tool finds it in `ToolContext.attachments`) from the channel it
    came through (its `channel`, or `channel`), with that channel's credentials:

        runtime = current_runtime()
        media = await fetch_attachment(runtime.channels, context.attachments[0], runtime.http)
    """
    item = attachment if isinstance(attachment, Attachment) else Attachment(**dict(attachment))
    name = channel or item.channel or ""
    found = channels.get(name)
    if not isinstance(found, FetchesMedia):
        raise ChannelConfigError(f"channel {name!r} cannot fetch media", channel=name)
    if item.kind == "location":
        raise ChannelConfigError("a location has no file to fetch", channel=name)
    return await found.fetch_media(item, client)


def require_host(url: str, allowed: tuple[str, ...], *, channel: str) -> str:
    """`url` if it is https (or the configured API's own scheme) on an allowed host (a host in
    `allowed` or a subdomain of one): the channel's credentials are never sent anywhere else."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("https", "http") or not any(
        host == a or host.endswith("." + a) for a in allowed
    ):
        raise DeliveryRejected(
            f"{channel} media URL is not on the platform's hosts ({', '.join(allowed)})",
            channel=channel,
        )
    return url


async def download(
    client: httpx.AsyncClient,
    url: str,
    *,
    channel: str,
    secrets: tuple[str, ...],
    headers: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    max_bytes: int = MAX_MEDIA_BYTES,
) -> MediaFile:
    """GET a media file (redirects followed; httpx drops credentials on a cross-host redirect),
    refusing one over `max_bytes`."""
    import httpx

    try:
        async with client.stream(
            "GET", url, headers=headers, auth=auth, follow_redirects=True
        ) as response:
            if not response.is_success:
                raise error_for_status(channel, response, platform_error=None)
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise DeliveryRejected(
                        f"{channel} media is over {max_bytes} bytes", channel=channel
                    )
                chunks.append(chunk)
            mime = response.headers.get("content-type")
    except httpx.HTTPError as exc:
        raise DeliveryUnavailable(
            f"{channel} media unreachable: {type(exc).__name__}: {redact(str(exc), secrets)}",
            channel=channel,
        ) from None
    return MediaFile(data=b"".join(chunks), mime=mime)
