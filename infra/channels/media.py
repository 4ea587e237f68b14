"""What customers send besides text: the `Attachment`s the channels read from their payloads."""

from __future__ import annotations

from engine.session import Attachment


def location_text(attachments: list[Attachment]) -> str:
    """A shared location, as the text of a message that has no other: what the agent reads
    ("Shared location: Eiffel Tower, Champ de Mars (48.858400, 2.294500)"); "" if none."""
    for attachment in attachments:
        if attachment.kind == "location" and attachment.latitude is not None:
            place = ", ".join(p for p in (attachment.name, attachment.address) if p)
            where = f"{attachment.latitude:.6f}, {attachment.longitude:.6f}"
            return f"Shared location: {place} ({where})" if place else f"Shared location: {where}"
    return ""
