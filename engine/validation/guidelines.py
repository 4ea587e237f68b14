"""Validation of an agent's guidelines: their condition and action, the tools they call, the
journeys they are scoped to.

Part of `engine.validation.agent`; each problem names the guideline to fix.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.model import JOURNEY_TAG_PREFIX, AgentSnapshot
from engine.validation.tools import unknown_tool_problems
from engine.validation.wording import known_hint


def guideline_problems(
    snapshot: AgentSnapshot,
    reported: frozenset[str] = frozenset(),
    incomplete: frozenset[str] = frozenset(),
) -> Iterator[str]:
    """What is wrong with each guideline; tools in `reported` are not reported again."""
    journey_ids = {j.id for j in snapshot.journeys}
    for g in snapshot.guidelines:
        owner = f"guideline '{g.id}'"
        if not g.condition.strip():
            yield f"{owner} has an empty condition; say when it applies"
        if g.action is not None and not g.action.strip():
            yield f"{owner} has an empty action; give one, or none at all for an observation"
        yield from unknown_tool_problems(owner, g.tools, snapshot, reported)
        for tag in g.tags:
            scoped = tag[len(JOURNEY_TAG_PREFIX) :] if tag.startswith(JOURNEY_TAG_PREFIX) else None
            if scoped is not None and scoped not in journey_ids:
                yield (
                    f"{owner} is scoped to journey '{scoped}', which does not exist "
                    f"{known_hint('journeys', journey_ids)}"
                )
