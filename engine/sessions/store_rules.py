"""Rules every store implementation shares, so the in-memory stores (`engine.memory.stores`) and the
DynamoDB adapters (`infra.aws.dynamo_*`) check and word things identically."""

from __future__ import annotations

from engine.errors import AgentNotFound, InvalidAgentDefinition, SessionConflict
from engine.model import AgentSnapshot
from engine.ports import TurnCommit


def versioned(snapshot: AgentSnapshot) -> AgentSnapshot:
    """The snapshot as it is published: with its explicit version, or its content hash."""
    return snapshot if snapshot.version else snapshot.with_content_version()


def version_conflict(agent_id: str, version: str) -> InvalidAgentDefinition:
    """Versions are immutable (warm containers cache them forever), so re-using one is an error."""
    return InvalidAgentDefinition(
        [
            f"agent {agent_id!r}: version {version!r} is already published with different "
            "content; give the changed agent a new version, or leave `version` empty so the "
            "content hash is used"
        ]
    )


def agent_not_found(agent_id: str, version: str | None) -> AgentNotFound:
    if version is None:
        return AgentNotFound(
            f"no published agent {agent_id!r}; publish it first: `waypoint publish PATH`"
        )
    return AgentNotFound(
        f"agent {agent_id!r} has no version {version!r}; publish it, or load the published "
        "version by passing version=None"
    )


def session_conflict(
    session_id: str, expected: int, stored: int | None, *, detail: str | None = None
) -> SessionConflict:
    if detail is None:
        found = "no such session" if stored is None else f"stored version is {stored}"
        detail = f"this turn expected version {expected} but {found}"
    return SessionConflict(
        f"session {session_id!r}: {detail}; another turn committed first — reload the session "
        "and re-run the turn"
    )


def validate_commit(commit: TurnCommit) -> None:
    """Reject malformed commits (programming errors, not conflicts) before touching storage."""
    state = commit.state
    if state.version != commit.expected_version + 1:
        raise ValueError(
            f"TurnCommit for session {state.id!r}: state.version must be expected_version + 1 "
            f"({commit.expected_version + 1}), got {state.version}"
        )
    offsets = [event.offset for event in commit.new_events]
    if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        raise ValueError(
            f"TurnCommit for session {state.id!r}: new event offsets must be consecutive and "
            f"increasing, got {offsets}; take the first from SessionState.next_offset()"
        )
    # Earlier events only: a rewrite never stands in for this turn's own events.
    first_new = offsets[0] if offsets else None
    late = [
        e.offset for e in commit.masked_events if first_new is not None and e.offset >= first_new
    ]
    if late:
        raise ValueError(
            f"TurnCommit for session {state.id!r}: masked events rewrite earlier events only; "
            f"offsets {late} are not earlier than this turn's first event ({first_new})"
        )
