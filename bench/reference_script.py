"""What our engine decided on each turn, as the reference engine's fake LLM reads it: the spec's
`script` (one `TurnScript` per customer message), and what the fake knows of our agent (its
conditions, its journey steps by action).

Standard library only, and no other module of ours: `bench/reference_driver.py` loads it by name in
the reference's own virtual environment (see `bench/reference_fake.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def normalized(text: str | None) -> str:
    """Case, spacing and closing punctuation do not make two texts different."""
    return " ".join((text or "").lower().split()).strip(" .\"'")


@dataclass(frozen=True)
class Step:
    """A journey step as our engine names it: its action, or the tools a tool step runs."""

    action: str | None
    tools: tuple[str, ...] = ()

    def is_named_by(self, reference_action: str) -> bool:
        """The reference's step text names this step: the same action, or (a tool step) one of
        its tools by name."""
        if self.action:
            return normalized(self.action) == normalized(reference_action)
        named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", reference_action))
        return any(tool in named for tool in self.tools)

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Step | None:
        if data is None:
            return None
        return cls(data.get("action"), tuple(data.get("tools", ())))


@dataclass(frozen=True)
class JourneyScript:
    """Where one of our journeys went this turn."""

    title: str
    steps: tuple[Step, ...]  # the steps it passed this turn, in order (the last is where it is)
    completed: bool  # it reached its end this turn
    exited: bool  # it was left (not completed) this turn


@dataclass(frozen=True)
class TurnScript:
    """What our engine decided on one turn, as the fake reads it."""

    message: str
    conditions: frozenset[str]  # normalized conditions of the guidelines that matched
    applied_actions: frozenset[str]  # normalized actions of the guidelines it applied
    journeys: tuple[JourneyScript, ...]
    tools: tuple[tuple[str, dict[str, Any]], ...]
    reply: str

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> TurnScript:
        journeys = []
        for j in data.get("journeys", ()):
            steps = tuple(s for s in (Step.of(x) for x in j.get("steps", ())) if s is not None)
            journeys.append(
                JourneyScript(
                    title=j["title"],
                    steps=steps,
                    completed=j.get("how") == "completed",
                    exited=j.get("how") == "exit",
                )
            )
        return cls(
            message=data.get("message", ""),
            conditions=frozenset(normalized(g["condition"]) for g in data.get("guidelines", ())),
            applied_actions=frozenset(normalized(a) for a in data.get("applied_actions", ())),
            journeys=tuple(journeys),
            tools=tuple((t["name"], dict(t["arguments"])) for t in data.get("tools", ())),
            reply=data.get("reply", ""),
        )

    def journey(self, title: str) -> JourneyScript | None:
        return next((j for j in self.journeys if normalized(j.title) == normalized(title)), None)


def known_conditions(spec: Mapping[str, Any]) -> frozenset[str]:
    """Every condition our agent has (guidelines and journey triggers), normalized."""
    conditions = [g["condition"] for g in spec.get("guidelines", ())]
    conditions += [c for j in spec.get("journeys", ()) for c in j.get("conditions", ())]
    return frozenset(normalized(c) for c in conditions)


def scripts(spec: Mapping[str, Any]) -> Sequence[TurnScript]:
    return [TurnScript.of(t) for t in spec.get("script", ())]


def our_step_id(journeys: Sequence[Mapping[str, Any]], reference_action: str) -> str | None:
    """Our node id for a step the reference names by its action text (None: no such step)."""
    for journey in journeys:
        for node in journey.get("nodes", ()):
            step = Step(node.get("action"), tuple(node.get("tools", ())))
            if (step.action or step.tools) and step.is_named_by(reference_action):
                return str(node["id"])
    return None
