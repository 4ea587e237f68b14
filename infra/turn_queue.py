"""The turn queue's message (webhook / management API → worker) and the session ids it carries."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from infra.channels.base import NormalizedMessage

SESSION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,100}$"  # also a valid SQS MessageGroupId
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


class QueuedMessage(BaseModel):
    """One SQS FIFO message: a normalized customer message for a session.

    Group id = `session_id` (turns of a session run in order); dedup id = `dedup_id` (a retried
    webhook is dropped by SQS too, within its 5-minute window)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    v: Literal[1] = 1
    session_id: str
    agent_id: str
    message: NormalizedMessage

    @property
    def dedup_id(self) -> str:
        return hashlib.sha256(self.message.dedup_key.encode()).hexdigest()


def session_id_for(agent_id: str, channel: str, conversation_key: str) -> str:
    """The session of a channel conversation with an agent: `{channel}-{32 hex}`.

    A digest, not the key itself: conversation keys hold phone numbers and chat ids (they stay out
    of keys and logs), can be long, and may contain characters SQS group ids refuse. The agent is
    part of it, so pointing a channel at another agent starts fresh conversations."""
    digest = hashlib.sha256(f"{agent_id}\x1f{channel}\x1f{conversation_key}".encode()).hexdigest()
    return f"{channel}-{digest[:32]}"


def check_session_id(session_id: str) -> str:
    """`session_id` if usable as a key and an SQS group id, else `ValueError`."""
    if not _SESSION_ID.match(session_id):
        raise ValueError("a session id is 1-100 characters of A-Z a-z 0-9 _ . : -")
    return session_id
