"""Turn trace: what matched and why, each journey's transition, tool calls and every LLM call.

The trace is plain data (pydantic), persisted with the turn and returned by the management API.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class LLMCallRecord(BaseModel):
    purpose: str
    schema_name: str
    model: str
    label: str = ""  # e.g. the batch kind or journey id
    prompt_chars: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    attempts: int = 1
    round: int = 0  # sequential LLM round on the critical path this call belongs to
    error: str | None = None


class MatchRecord(BaseModel):
    guideline_id: str
    batch: str  # observational | actionable | previously_applied | customer_dependent | ...
    matched: bool
    score: int
    rationale: str = ""


class JourneyTransitionRecord(BaseModel):
    journey_id: str
    previous_path: list[str | None]
    new_path: list[str | None]
    node_id: str | None  # the step projected for this turn (None = journey exited / completed)
    how: str  # "llm" | "auto_return" | "entry" | "exit" | "completed" | "suspended"
    repairs: list[str] = Field(default_factory=list)  # what path verification fixed
    rationale: str = ""


class RelationRecord(BaseModel):
    kind: str
    source: str
    target: str
    effect: str  # "suppressed" | "added" | "dropped (dependency unmet)" | ...


class ToolCallRecord(BaseModel):
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # "ok" | "error" | "refused" | "missing_arguments" | "invalid_arguments" | "ungrounded" |
    # "awaiting_confirmation" | "declined" | "interrupted"
    status: str
    detail: str = ""
    duration_ms: float = 0.0
    sources: list[str] = Field(default_factory=list)  # "amount ← customer message #7: '$40'"


class StageTiming(BaseModel):
    stage: str
    ms: float


class TurnTrace(BaseModel):
    turn_id: str
    session_id: str
    agent_id: str
    agent_version: str
    # The published version when this turn started, and why it ran on `agent_version`:
    # "published", "pinned" (a journey in flight on an earlier version) or "migrated".
    published_version: str = ""
    version_choice: str = ""
    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    matches: list[MatchRecord] = Field(default_factory=list)
    high_probability_journeys: list[str] = Field(default_factory=list)
    held_back_guideline_ids: list[str] = Field(default_factory=list)  # left out by recall (top-k)
    activated_journeys: list[str] = Field(default_factory=list)
    supplemental_journeys: list[str] = Field(default_factory=list)
    journeys: list[JourneyTransitionRecord] = Field(default_factory=list)
    relations: list[RelationRecord] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    collected: dict[str, str] = Field(default_factory=dict)  # "journey.field" → value this turn
    matched_guideline_ids: list[str] = Field(default_factory=list)
    applied_guideline_ids: list[str] = Field(default_factory=list)
    stages: list[StageTiming] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # budget cuts, fallbacks, repairs worth noting
    composition_mode: str = ""
    llm_rounds: int = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.llm_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.llm_calls)


def summarize(trace: TurnTrace) -> list[str]:
    """A compact, human-readable account of one turn: what matched, where each journey went,
    which tools ran, and what the LLM calls cost. Used by `waypoint demo` and `chat --trace`."""
    lines: list[str] = []
    if trace.version_choice in ("pinned", "migrated"):
        lines.append(
            f"agent version: {trace.agent_version} ({trace.version_choice}; published: "
            f"{trace.published_version})"
        )
    matched = [m.guideline_id for m in trace.matches if m.matched]
    if matched:
        lines.append("matched: " + ", ".join(matched))
    if trace.held_back_guideline_ids:
        lines.append(f"recall: {len(trace.held_back_guideline_ids)} guidelines not matched (top-k)")
    for t in trace.journeys:
        step = t.node_id or "—"
        repaired = f" (repaired: {'; '.join(t.repairs)})" if t.repairs else ""
        lines.append(f"journey {t.journey_id}: {t.how} → {step}{repaired}")
    if trace.collected:
        lines.append("collected: " + ", ".join(f"{k}={v}" for k, v in trace.collected.items()))
    for r in trace.relations:
        lines.append(f"{r.kind}: {r.source} → {r.target} ({r.effect})")
    for c in trace.tool_calls:
        args = ", ".join(f"{k}={v}" for k, v in c.arguments.items())
        detail = f" — {c.detail}" if c.detail else ""
        lines.append(f"tool {c.tool}({args}): {c.status}{detail}")
    if trace.llm_calls:
        total_ms = sum(c.latency_ms for c in trace.llm_calls)
        lines.append(
            f"llm: {len(trace.llm_calls)} calls in {trace.llm_rounds} rounds, "
            f"{trace.prompt_tokens} prompt + {trace.completion_tokens} completion tokens, "
            f"{total_ms:.0f} ms"
        )
    lines.extend(f"note: {n}" for n in trace.notes)
    return lines
