"""Relatable handles: the relationship methods guideline and journey handles share, and the
guideline handle, which is nothing more than that.

`prioritize_over`, `depend_on`, `entail` and `disambiguate` are shorthands for
`Agent.create_relationship` (`engine.authoring.agent_builder`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.model import EntityKind, EntityRef, Guideline, Relationship, RelationshipKind

if TYPE_CHECKING:
    from engine.authoring.agent_builder import Agent, Related


class Relatable(ABC):
    """Relationship methods of guideline and journey handles."""

    _agent: Agent

    @property
    @abstractmethod
    def ref(self) -> EntityRef:
        """What relationships name this guideline or journey by."""

    def prioritize_over(self, other: Related) -> Relationship:
        """While this is active, `other` is suppressed."""
        return self._agent.create_relationship(RelationshipKind.PRIORITY, self.ref, other)

    def depend_on(self, other: Related) -> Relationship:
        """This is active only while `other` is active too."""
        return self._agent.create_relationship(RelationshipKind.DEPENDENCY, self.ref, other)

    def depend_on_any(self, *others: Related) -> list[Relationship]:
        """This is active only while at least one of `others` is active (an OR-dependency)."""
        return [
            self._agent.create_relationship(RelationshipKind.DEPENDENCY_ANY, self.ref, other)
            for other in others
        ]

    def entail(self, other: Related) -> Relationship:
        """Whenever this is active, `other` becomes active as well."""
        return self._agent.create_relationship(RelationshipKind.ENTAILMENT, self.ref, other)


class GuidelineBuilder(Relatable):
    """A handle on a created guideline, for relating it to other guidelines and journeys."""

    def __init__(self, agent: Agent, guideline: Guideline):
        self._agent = agent
        self.guideline = guideline

    @property
    def id(self) -> str:
        return self.guideline.id

    @property
    def ref(self) -> EntityRef:
        return EntityRef(kind=EntityKind.GUIDELINE, id=self.id)

    def disambiguate(self, targets: Sequence[Related]) -> list[Relationship]:
        """This observation groups `targets` the customer may be confusing; when it matches, the
        agent asks which one they meant."""
        return [
            self._agent.create_relationship(RelationshipKind.DISAMBIGUATION, self, t)
            for t in targets
        ]

    def __repr__(self) -> str:
        return f"GuidelineBuilder({self.id!r})"
