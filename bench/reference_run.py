"""One run of the reference engine in `python -m bench compare`, as the driver's modules share it:
what its fake LLM is told (the spec's script, our agent's conditions and journeys, the latency),
where the conversation is (the phase, the customer's message, that turn's script), and what the
run records (every LLM call; per phase, what the reference did; the journey step ids it learnt).

Standard library only, like every module `bench/reference_driver.py` loads: it runs inside the
reference's own virtual environment, with nothing of Waypoint on its path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.reference_script import TurnScript


def _at_boot() -> dict[str, Any]:
    return {"message": "", "phase": "boot", "turn": None}


@dataclass
class ReferenceRun:
    """The told, the current and the recorded of one run (see the module's docstring)."""

    script: list[TurnScript] = field(default_factory=list)  # per customer message
    known: frozenset[str] = frozenset()  # our agent's conditions (the others are decided lexically)
    spec_journeys: list[Any] = field(default_factory=list)  # our node ids, actions, tools
    latency_s: float = 0.4
    current: dict[str, Any] = field(default_factory=_at_boot)  # phase, message, turn (its script)
    calls: list[dict[str, Any]] = field(default_factory=list)
    step_ids: dict[str, str] = field(default_factory=dict)  # reference step id → action (indexing)
    # What the reference did, per phase: conditions its checks were told hold, the steps its step
    # selections chose, the tools that ran.
    did: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    def did_in_phase(self, kind: str) -> list[Any]:
        """What the reference did of `kind` ("guidelines", "steps", "tools") in this phase."""
        phase = self.did.setdefault(
            self.current["phase"], {"guidelines": [], "steps": [], "tools": []}
        )
        return phase[kind]

    def record_tool(self, name: str, arguments: dict[str, Any]) -> None:
        """The reference ran a tool (its plugin server serves them in this process)."""
        self.did_in_phase("tools").append({"name": name, "arguments": arguments})
