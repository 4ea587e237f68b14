"""Turn trace: what matched and why, each journey's transition, tool calls and every LLM call.

The trace is plain data (pydantic), persisted with the turn and returned by the management API.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from engine.pricing import format_dollars

if TYPE_CHECKING:
    from engine.model import AgentSnapshot


class LLMCallRecord(BaseModel):
    purpose: str
    schema_name: str
    model: str
    label: str = ""  # e.g. the batch kind or journey id
    prompt_chars: int = 0
    prompt_tokens: int = 0
    # of the prompt tokens, those the provider's prompt cache served (priced as cached)
    cached_prompt_tokens: int = 0
    # of the prompt tokens, those written to the provider's prompt cache (Bedrock's cache points)
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    # dollars, from the price table (`engine.pricing`); None: no price for this model
    cost_usd: float | None = None
    latency_ms: float = 0.0
    attempts: int = 1
    round: int = 0  # sequential LLM round on the critical path this call belongs to
    error: str | None = None
    # A reply drafted before its decisions were verified (`engine.stages.speculation`): "used"
    # when the verified prompt was the same, so this call is the reply's; "discarded" otherwise.
    draft: str = ""
    # What was asked and answered, for the studio's inspector: bounded (`bounded_text`), and
    # masked with the rest of the trace when the turn handled a secret (`masked_trace`).
    prompt: str = ""
    answer: str = ""


# Enough to read a prompt whole in all but the largest agents, small enough that a turn's trace
# (a handful of calls) stays well inside an item body (`infra.aws.dynamo_table.ItemBodies`).
MAX_RECORDED_PROMPT_CHARS = 24_000
MAX_RECORDED_ANSWER_CHARS = 8_000


def bounded_text(text: str, limit: int) -> str:
    """`text`, or its head and tail around a note of how much was left out."""
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n… [{left_out} characters left out] …\n{text[-tail:]}"


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
    # "llm" | "auto_return" | "entry" | "exit" | "completed" | "suspended" | "resumed"
    how: str
    repairs: list[str] = Field(default_factory=list)  # what path verification fixed
    rationale: str = ""
    # The walk the model proposed this turn (node ids), before path verification kept what
    # `new_path` says; empty when no model chose the step (entry, auto-return, forced moves).
    proposed: list[str] = Field(default_factory=list)


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
    # Journeys vector recall ranked within journey_top_k but below journey_min_similarity: not
    # predicted, so no speculative node selection was made for them.
    unpredicted_journeys: list[str] = Field(default_factory=list)
    held_back_guideline_ids: list[str] = Field(default_factory=list)  # left out by recall (top-k)
    activated_journeys: list[str] = Field(default_factory=list)
    supplemental_journeys: list[str] = Field(default_factory=list)
    journeys: list[JourneyTransitionRecord] = Field(default_factory=list)
    relations: list[RelationRecord] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    # Calls of speculative tools run ahead on predicted decisions (`engine.stages.tools_ahead`),
    # with their own ids: "used" (a verified call above took the outcome), "discarded" (none
    # did) or "failed" (not reused: the verified turn ran the call itself).
    tools_ahead: list[ToolCallRecord] = Field(default_factory=list)
    collected: dict[str, str] = Field(default_factory=dict)  # "journey.field" → value this turn
    matched_guideline_ids: list[str] = Field(default_factory=list)
    applied_guideline_ids: list[str] = Field(default_factory=list)
    stages: list[StageTiming] = Field(default_factory=list)
    # of the stages' time: reading the customer's values and grounding arguments (ms)
    values_ms: float = 0.0
    # of the load stage's time: detecting the language of the turn's messages (ms)
    language_ms: float = 0.0
    notes: list[str] = Field(default_factory=list)  # budget cuts, fallbacks, repairs worth noting
    composition_mode: str = ""
    llm_rounds: int = 0
    # The reply drafted beside round 1 (`engine.stages.speculation`): "" (speculation off),
    # "used", "discarded" (the verified reply prompt differed) or "skipped: <why>".
    speculation: str = ""
    # "human": a person had the session; the matches above are what the agent would have done,
    # and nothing was composed or run (`engine.stages.handoff`).
    mode: str = "auto"
    # This turn handed the session to a person: trigger, reason, source (guideline or step).
    handoff: dict[str, Any] | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.llm_calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.llm_calls)

    @property
    def cached_prompt_tokens(self) -> int:
        return sum(c.cached_prompt_tokens for c in self.llm_calls)

    @property
    def cost_usd(self) -> float | None:
        """The turn's LLM calls in dollars; None when a call's model has no price (unknown is
        not free)."""
        costs = [c.cost_usd for c in self.llm_calls]
        if any(cost is None for cost in costs):
            return None
        return sum(cost for cost in costs if cost is not None)


# From this many held-back ids on, `trace_record` copies the list instead of serializing it.
_LONG_ID_LIST = 1_000
_HELD_BACK = {"held_back_guideline_ids"}


def trace_record(trace: TurnTrace) -> dict[str, Any]:
    """`trace.model_dump(mode="json")`, what a turn commits. With 5,000 agent-wide guidelines
    recall holds back ≈ 5,000 ids a turn, and serializing them one by one cost more than the
    rest of the trace: they are strs already, so a long list is copied as it is, in its place."""
    held = trace.held_back_guideline_ids
    if len(held) < _LONG_ID_LIST:
        return trace.model_dump(mode="json")
    dumped = trace.model_dump(mode="json", exclude=_HELD_BACK)
    return {
        name: list(held) if name in _HELD_BACK else dumped[name] for name in TurnTrace.model_fields
    }


class TraceTitles:
    """Names a person reads for what a trace records by id: a journey by its title, a journey's
    start and steps by the journey's title and the step, a guideline by its author's id (or its
    condition, when the id was derived from it). Without the agent (or for an id the agent no
    longer has), ids are only made readable."""

    def __init__(self, agent: AgentSnapshot | None = None) -> None:
        self.agent = agent

    def journey(self, journey_id: str) -> str:
        if self.agent is not None and self.agent.has_journey(journey_id):
            return self.agent.journey(journey_id).title
        return journey_id

    def step(self, journey_id: str, node_id: str | None) -> str:
        if node_id is None:
            return "—"
        if not _GENERATED_STATE_ID.fullmatch(node_id):
            return node_id
        if self.agent is not None and self.agent.has_journey(journey_id):
            node = next((n for n in self.agent.journey(journey_id).nodes if n.id == node_id), None)
            text = (node.action or node.description or "") if node else ""
            if text:
                return f'"{_shorten(text)}"'
        return node_id

    def guideline(self, guideline_id: str) -> str:
        projected = _PROJECTED.fullmatch(guideline_id)
        if projected:
            journey_id, kind, rest = projected.groups()
            if kind == "condition":
                return f"start of {self.journey(journey_id)}"
            return f"{self.journey(journey_id)} › {self.step(journey_id, rest)}"
        if self.agent is not None and self.agent.has_guideline(guideline_id):
            from engine.authoring.ids import default_guideline_id

            g = self.agent.guideline(guideline_id)
            if guideline_id == default_guideline_id(g.condition, g.action):
                return f'"{_shorten(g.condition)}"'
        return guideline_id

    def relation(self, r: RelationRecord) -> str:
        """`priority: "…" → "…" (suppressed)`, by the guidelines' readable names."""
        return f"{r.kind}: {self.guideline(r.source)} → {self.guideline(r.target)} ({r.effect})"

    def collected(self, key: str) -> str:
        """`order.size` (journey id, field) as `Pizza order.size`."""
        journey_id, dot, name = key.partition(".")
        return f"{self.journey(journey_id)}.{name}" if dot else key

    def condition(self, guideline_id: str) -> str:
        """The condition a guideline (or a journey's start) holds on, when the agent says."""
        if self.agent is not None and self.agent.has_guideline(guideline_id):
            return self.agent.guideline(guideline_id).condition
        projected = _PROJECTED.fullmatch(guideline_id)
        if projected and self.agent is not None and self.agent.has_journey(projected[1]):
            conditions = self.agent.journey(projected[1]).conditions
            index = int(projected[3]) if projected[3].isdigit() else -1
            if projected[2] == "condition" and 0 <= index < len(conditions):
                return conditions[index]
        return ""


# engine.matching.projection's ids: journey:{journey}:condition:{i} and journey:{journey}:node:{node}
_PROJECTED = re.compile(r"journey:(.+):(condition|node):([^:]+)")
_GENERATED_STATE_ID = re.compile(r"s\d+")  # the builder's default state ids say nothing

HOW = {
    "llm": "moved",
    "auto_return": "moved after its tool",
    "entry": "entered",
    "exit": "left",
    "completed": "completed",
    "suspended": "paused for a prerequisite",
    "resumed": "resumed where the customer left it",
}


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summarize(trace: TurnTrace, agent: AgentSnapshot | None = None) -> list[str]:
    """A compact, human-readable account of one turn: what matched, where each journey went,
    which tools ran, and what the LLM calls cost — by titles when `agent` is given. Used by
    `waypoint demo` and `chat --trace`; `explain` is the full account."""
    names = TraceTitles(agent)
    lines: list[str] = []
    if trace.version_choice in ("pinned", "migrated"):
        lines.append(
            f"agent version: {trace.agent_version} ({trace.version_choice}; published: "
            f"{trace.published_version})"
        )
    matched = [names.guideline(m.guideline_id) for m in trace.matches if m.matched]
    if matched:
        lines.append("matched: " + ", ".join(matched))
    if trace.held_back_guideline_ids:
        lines.append(f"recall: {len(trace.held_back_guideline_ids)} guidelines not matched (top-k)")
    for t in trace.journeys:
        repaired = f" (repaired: {'; '.join(t.repairs)})" if t.repairs else ""
        journey = names.journey(t.journey_id)
        step = names.step(t.journey_id, t.node_id)
        lines.append(f"journey {journey}: {HOW.get(t.how, t.how)} → {step}{repaired}")
    if trace.collected:
        values = ", ".join(f"{names.collected(k)}={v}" for k, v in trace.collected.items())
        lines.append(f"collected: {values}")
    lines.extend(names.relation(r) for r in trace.relations)
    for c in trace.tool_calls:
        args = ", ".join(f"{k}={v}" for k, v in c.arguments.items())
        detail = f" — {c.detail}" if c.detail else ""
        lines.append(f"tool {c.tool}({args}): {c.status}{detail}")
    if trace.llm_calls:
        total_ms = sum(c.latency_ms for c in trace.llm_calls)
        lines.append(
            f"llm: {len(trace.llm_calls)} calls in {trace.llm_rounds} rounds, "
            f"{trace.prompt_tokens} prompt ({trace.cached_prompt_tokens} cached) + "
            f"{trace.completion_tokens} completion tokens, {total_ms:.0f} ms, "
            f"{cost_text(trace)}"
        )
    lines.extend(f"note: {n}" for n in trace.notes)
    return lines


def explain(trace: TurnTrace, agent: AgentSnapshot | None = None) -> list[str]:
    """The whole trace of one turn, by titles: every guideline judged (matched or not, with the
    model's reason), recall, each journey's transition with the step's instruction, relations,
    tool calls with arguments, grounding and results, every LLM call, stage timings and notes.
    Used by `waypoint demo --verbose` and `chat`'s /trace."""
    names = TraceTitles(agent)
    lines = [f"turn {trace.turn_id} · agent {trace.agent_id} version {trace.agent_version}"]
    if trace.high_probability_journeys:
        journeys = ", ".join(names.journey(j) for j in trace.high_probability_journeys)
        lines.append(f"recall: likely journeys {journeys}")
    if trace.held_back_guideline_ids:
        lines.append(f"recall: {len(trace.held_back_guideline_ids)} guidelines left out (top-k)")
    for m in trace.matches:
        verdict = "✓ matched" if m.matched else "✗ not matched"
        condition = names.condition(m.guideline_id)
        when = f' — when "{_shorten(condition, 80)}"' if condition else ""
        lines.append(f"{verdict} {names.guideline(m.guideline_id)} [{m.batch}, {m.score}]{when}")
        if m.rationale:
            lines.append(f"    reason: {m.rationale}")
    for journey_id in trace.activated_journeys:
        lines.append(f"journey {names.journey(journey_id)} activated")
    for t in trace.journeys:
        path = " → ".join(names.step(t.journey_id, n) for n in t.new_path if n is not None)
        lines.append(
            f"journey {names.journey(t.journey_id)}: {HOW.get(t.how, t.how)} → "
            f"{names.step(t.journey_id, t.node_id)} (path: {path or '—'})"
        )
        instruction = _step_instruction(agent, t.journey_id, t.node_id)
        if instruction:
            lines.append(f"    step: {instruction}")
        lines.extend(f"    repaired: {r}" for r in t.repairs)
        if t.rationale:
            lines.append(f"    reason: {t.rationale}")
    for name, value in trace.collected.items():
        lines.append(f"collected {names.collected(name)} = {value}")
    lines.extend(names.relation(r) for r in trace.relations)
    for c in trace.tool_calls:
        args = ", ".join(f"{k}={v}" for k, v in c.arguments.items())
        lines.append(f"tool {c.tool}({args}) → {c.status} in {c.duration_ms:.0f} ms")
        if c.detail:
            lines.append(f"    result: {c.detail}")
        lines.extend(f"    grounded: {s}" for s in c.sources)
    for call in trace.llm_calls:
        label = f" {call.label}" if call.label else ""
        retried = f", {call.attempts} attempts" if call.attempts > 1 else ""
        error = f", error: {call.error}" if call.error else ""
        cache = [
            f"{n} {what}"
            for n, what in (
                (call.cached_prompt_tokens, "cached"),
                (call.cache_write_tokens, "written to cache"),
            )
            if n
        ]
        cached = f" ({', '.join(cache)})" if cache else ""
        lines.append(
            f"llm round {call.round}: {call.purpose}{label} → {call.schema_name} on {call.model}, "
            f"{call.prompt_tokens}{cached}+{call.completion_tokens} tokens, "
            f"{call.latency_ms:.0f} ms, {format_dollars(call.cost_usd)}{retried}{error}"
        )
    if trace.llm_calls:
        lines.append(f"llm cost: {cost_text(trace)}")
    if trace.composition_mode:
        lines.append(f"composed: {trace.composition_mode}")
    if trace.stages:
        lines.append("stages: " + ", ".join(f"{s.stage} {s.ms:.0f} ms" for s in trace.stages))
    lines.extend(f"note: {n}" for n in trace.notes)
    return lines


def cost_text(trace: TurnTrace) -> str:
    """The turn's cost, or which models have no price."""
    if trace.cost_usd is not None:
        return format_dollars(trace.cost_usd)
    unpriced = sorted({c.model for c in trace.llm_calls if c.cost_usd is None})
    return f"cost unknown (no price for {', '.join(unpriced)})"


def _step_instruction(agent: AgentSnapshot | None, journey_id: str, node_id: str | None) -> str:
    if agent is None or node_id is None or not agent.has_journey(journey_id):
        return ""
    node = next((n for n in agent.journey(journey_id).nodes if n.id == node_id), None)
    if node is None:
        return ""
    return _shorten(node.action or node.description or "", 100)
