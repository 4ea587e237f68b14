"""Validation of an agent's canned responses: each tag names a guideline, a journey or a step that
exists.

Part of `engine.validation.agent`; each problem names the canned response and the tag to fix.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.model import JOURNEY_TAG_PREFIX, AgentSnapshot, Journey
from engine.validation.wording import did_you_mean, known_hint


def canned_response_problems(snapshot: AgentSnapshot) -> Iterator[str]:
    """A tag scopes a template to a guideline, a journey or one step: one naming nothing would
    keep the template from ever being used."""
    guidelines = [g.id for g in snapshot.guidelines]
    # A journey's condition guidelines are internal: a hint lists only what an author wrote.
    written = [g for g in guidelines if not g.startswith(JOURNEY_TAG_PREFIX)]
    journeys = {j.id: j for j in snapshot.journeys}
    for response in snapshot.canned_responses:
        owner = f"canned response '{response.id}'"
        for tag in response.tags:
            kind, _, rest = tag.partition(":")
            if kind == "guideline" and rest not in guidelines:
                yield (
                    f"{owner}: tag '{tag}' names guideline '{rest}', which does not exist"
                    f"{did_you_mean(rest, written)} {known_hint('guidelines', written)}"
                )
            elif kind == "journey" and rest not in journeys:
                yield (
                    f"{owner}: tag '{tag}' names journey '{rest}', which does not exist"
                    f"{did_you_mean(rest, journeys)} {known_hint('journeys', journeys)}"
                )
            elif kind == "node":
                yield from _step_tag_problems(owner, tag, rest, journeys)


def _step_tag_problems(
    owner: str, tag: str, rest: str, journeys: dict[str, Journey]
) -> Iterator[str]:
    journey_id, _, step_id = rest.partition(":")
    journey = journeys.get(journey_id)
    if not step_id:
        yield f"{owner}: tag '{tag}' must name a journey and a step: 'node:<journey id>:<step id>'"
    elif journey is None:
        yield (
            f"{owner}: tag '{tag}' names journey '{journey_id}', which does not exist"
            f"{did_you_mean(journey_id, journeys)} {known_hint('journeys', journeys)}"
        )
    elif not any(n.id == step_id for n in journey.nodes):
        steps = [n.id for n in journey.nodes if n.id != journey.root_id]
        yield (
            f"{owner}: tag '{tag}' names step '{step_id}' of journey '{journey_id}', which "
            f"does not exist{did_you_mean(step_id, steps)} {known_hint('steps', steps)}"
        )
