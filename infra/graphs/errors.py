"""What a graph request can name wrongly: a journey the agent lacks, a step its journey lacks."""

from __future__ import annotations

from collections.abc import Sequence


class GraphSubjectNotFound(LookupError):
    """The graph asked for names something the agent does not have (the API answers 404)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnknownJourney(GraphSubjectNotFound):
    def __init__(self, agent_id: str, journey_id: str, known: Sequence[str]) -> None:
        have = ", ".join(known) or "none"
        super().__init__(
            f"agent {agent_id!r} has no journey {journey_id[:100]!r}; its journeys: {have}"
        )
        self.journey_id = journey_id


class UnknownStep(GraphSubjectNotFound):
    def __init__(self, journey_id: str, step: str, known: Sequence[str]) -> None:
        super().__init__(
            f"journey {journey_id!r} has no step {step[:100]!r}; its steps: {', '.join(known)}"
        )
        self.step = step
