"""Running turns through the real `TurnEngine` and measuring each one.

`TurnRunner` wires a `TurnEngine` over given ports (in-memory or DynamoDB/S3 on moto) and the
fake LLM, wraps the stores and the pipeline with timers, and returns one `TurnSample` per turn:
wall time, LLM rounds / calls / tokens from the trace, the engine's stage timings with the fake
LLM's own CPU time taken out, store load / commit time, and the engine overhead
(wall − LLM time: exact when the latency model is zero).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.fake_llm import BenchLLM
from engine.model import AgentSnapshot
from engine.ports import AgentStore, SessionStore, ToolDispatcher, TurnCommit, VectorIndex
from engine.sessions.session import InboundMessage, SessionState
from engine.turn import EngineDeps, TurnEngine, TurnOutput
from infra.embeddings import HashingEmbedder

# Engine stages as `engine.turn` names them, in pipeline order.
ENGINE_STAGES = (
    "load",
    "recall",
    "match_round_1",
    "match_supplemental",
    "relationships",
    "tools",
    "compose",
    "persist_prep",
)
# Everything a turn's wall time is split into (the engine stages plus what surrounds them).
BREAKDOWN = (
    "store_load",
    *ENGINE_STAGES,
    "pipeline_setup",
    "trace_dump",
    "store_commit",
)


@dataclass
class TurnSample:
    """One measured turn."""

    agent: str
    ports: str
    conversation: int
    turn: int
    message: str
    reply: str
    wall_ms: float
    llm_rounds: int
    llm_calls: int
    prompt_tokens: int  # the benchmark's tokenizer
    completion_tokens: int
    critical_completion_tokens: int  # the largest completion of each round, summed
    prompt_tokens_est: int  # chars/4, the unit of the reference figures
    calls_by_schema: dict[str, int]
    tool_calls: int  # tools that ran
    tool_plans: int  # ToolCallPlan LLM calls
    guidelines_evaluated: int
    budget_skips: int
    speculative_discarded: int  # node selections of predicted journeys that did not activate
    llm_self_ms: float  # the fake LLM's own CPU time (not the simulated latency)
    # wall − LLM time: exact with a zero-latency LLM (minus the fake's CPU); with latency, minus
    # the slowest call of each round (an estimate: calls of a round overlap)
    overhead_ms: float
    breakdown_ms: dict[str, float] = field(default_factory=dict)
    # tokens of this turn's calls by schema (the benchmark's tokenizer), and its largest answer
    prompt_by_schema: dict[str, int] = field(default_factory=dict)
    completion_by_schema: dict[str, int] = field(default_factory=dict)
    completion_max_call: int = 0
    rounds_detail: list[str] = field(default_factory=list)  # "2: JourneyNodeSelection(auth)"
    # Journeys recall ranked but left unpredicted (below journey_min_similarity): `saved` did not
    # activate this turn (a node-selection call not made), `late` did (entered in a later round).
    speculation_saved: int = 0
    speculation_late: int = 0
    values_ms: float = 0.0  # of the overhead: reading and grounding values (trace.values_ms)
    language_ms: float = (
        0.0  # of the overhead: detecting the messages' language (trace.language_ms)
    )

    @property
    def used_tools(self) -> bool:
        return self.tool_calls > 0 or self.tool_plans > 0


class _TimedSessions:
    """`SessionStore` wrapper that times load and commit."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.load_ms = 0.0
        self.commit_ms = 0.0

    async def load(self, session_id: str) -> SessionState | None:
        started = time.perf_counter()
        try:
            return await self.inner.load(session_id)
        finally:
            self.load_ms += (time.perf_counter() - started) * 1000

    async def create(self, state: SessionState) -> SessionState:
        return await self.inner.create(state)

    async def commit(self, commit: TurnCommit) -> bool:
        started = time.perf_counter()
        try:
            return await self.inner.commit(commit)
        finally:
            self.commit_ms += (time.perf_counter() - started) * 1000

    async def trace(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        return await self.inner.trace(session_id, turn_id)

    async def events(self, session_id: str, *, after: int = -1, limit: int = 100) -> Any:
        # A replayed turn reads its window as committed (`TurnEngine._with_full_window`).
        return await self.inner.events(session_id, after=after, limit=limit)

    async def erased_at(self, channel: str, customer_id: str) -> datetime | None:
        return await self.inner.erased_at(channel, customer_id)

    def person_digest(self, channel: str, person: str) -> str:
        return self.inner.person_digest(channel, person)


class _TimedAgents:
    def __init__(self, inner: AgentStore) -> None:
        self.inner = inner
        self.get_ms = 0.0

    async def get(self, agent_id: str, version: str | None = None) -> AgentSnapshot:
        started = time.perf_counter()
        try:
            return await self.inner.get(agent_id, version)
        finally:
            self.get_ms += (time.perf_counter() - started) * 1000

    async def publish(self, snapshot: AgentSnapshot) -> str:
        return await self.inner.publish(snapshot)


class _TimedPipeline:
    """Wraps `TurnPipeline`: remembers when `run` started and how long it took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = 0.0
        self.ms = 0.0

    async def run(self, *args: Any, **kwargs: Any) -> TurnOutput:
        self.started = time.perf_counter()
        try:
            output: TurnOutput = await self.inner.run(*args, **kwargs)
            return output
        finally:
            self.ms = (time.perf_counter() - self.started) * 1000


IndexFor = Callable[[AgentSnapshot], Awaitable[VectorIndex | None]]


@dataclass
class Ports:
    """The stores a runner uses, and how it gets an agent version's vector index."""

    name: str
    agents: AgentStore
    sessions: SessionStore
    index_for: IndexFor


class TurnRunner:
    """A `TurnEngine` over `ports` and `llm`, measuring every turn it runs."""

    def __init__(
        self,
        ports: Ports,
        llm: BenchLLM,
        *,
        tools: ToolDispatcher | None = None,
        embedder: HashingEmbedder | None = None,
    ) -> None:
        self.ports = ports
        self.llm = llm
        self.sessions = _TimedSessions(ports.sessions)
        self.agents = _TimedAgents(ports.agents)
        self._index_ms = 0.0
        self.deps = EngineDeps(llm=llm, embedder=embedder or HashingEmbedder(), tools=tools)
        self.engine = TurnEngine(self.agents, self.sessions, self.deps, index_for=self._index_for)
        self.pipeline = _TimedPipeline(self.engine.pipeline)
        self.engine.pipeline = self.pipeline  # type: ignore[assignment]
        self._paths: dict[str, set[str]] = {}

    async def _index_for(self, agent: AgentSnapshot) -> VectorIndex | None:
        started = time.perf_counter()
        try:
            return await self.ports.index_for(agent)
        finally:
            self._index_ms += (time.perf_counter() - started) * 1000

    async def publish(self, snapshot: AgentSnapshot) -> None:
        await self.ports.agents.publish(snapshot)

    def use_tools(self, tools: ToolDispatcher | None) -> None:
        """The dispatcher for the next turns (each workload brings its own tools)."""
        self.deps.tools = tools

    async def open_session(self, state: SessionState) -> None:
        stored = await self.ports.sessions.create(state)
        self._paths[state.id] = set(stored.active_journey_ids)

    async def turn(
        self, session_id: str, text: str, *, agent: str, conversation: int = 0, turn: int = 0
    ) -> TurnSample:
        """Run one customer message through the engine and measure it."""
        self.sessions.load_ms = self.sessions.commit_ms = self.agents.get_ms = 0.0
        self._index_ms = 0.0
        first_call = len(self.llm.calls)
        message = InboundMessage(event_id=f"in-{uuid.uuid4().hex}", text=text)
        started = time.perf_counter()
        output = await self.engine.handle(session_id, [message])
        self.last_output: TurnOutput | None = output
        wall_ms = (time.perf_counter() - started) * 1000
        calls = self.llm.calls[first_call:]
        active_before = self._paths.get(session_id, set())
        self._paths[session_id] = set(output.state.active_journey_ids)
        return self._sample(agent, conversation, turn, text, output, wall_ms, calls, active_before)

    def _sample(
        self,
        agent: str,
        conversation: int,
        turn: int,
        text: str,
        output: TurnOutput,
        wall_ms: float,
        calls: Sequence[Any],
        active_before: set[str],
    ) -> TurnSample:
        trace = output.trace
        llm_self = sum(c.self_ms for c in calls)
        if self.llm.latency.seconds(1_000) == 0:
            llm_time = llm_self  # exact: the fake's CPU is the only LLM time
        else:
            llm_time = _critical_path_ms(trace.llm_calls)  # calls of a round overlap
        ended = self.pipeline.started + self.pipeline.ms / 1000
        stages = _stages_without_llm(trace.stages, ended, calls)
        breakdown = {"store_load": self.sessions.load_ms + self.agents.get_ms + self._index_ms}
        breakdown.update({name: stages.get(name, 0.0) for name in ENGINE_STAGES})
        # `TurnState.__init__` (node views of every journey, the turn's LLM facade) is not a stage
        breakdown["pipeline_setup"] = max(0.0, self.pipeline.ms - sum(s.ms for s in trace.stages))
        breakdown["store_commit"] = self.sessions.commit_ms
        overhead = max(0.0, wall_ms - llm_time)
        breakdown["trace_dump"] = max(0.0, overhead - sum(breakdown.values()))
        by_schema: dict[str, int] = {}
        prompt_by_schema: dict[str, int] = {}
        completion_by_schema: dict[str, int] = {}
        for c in trace.llm_calls:
            by_schema[c.schema_name] = by_schema.get(c.schema_name, 0) + 1
            prompt_by_schema[c.schema_name] = prompt_by_schema.get(c.schema_name, 0) + (
                c.prompt_tokens
            )
            completion_by_schema[c.schema_name] = (
                completion_by_schema.get(c.schema_name, 0) + c.completion_tokens
            )
        activated = set(trace.activated_journeys)
        discarded = sum(
            1
            for c in trace.llm_calls
            if c.purpose == "select_journey_node"
            and c.round == 1
            and c.label not in activated
            and c.label not in active_before
        )
        return TurnSample(
            rounds_detail=_rounds_detail(trace.llm_calls),
            agent=agent,
            ports=self.ports.name,
            conversation=conversation,
            turn=turn,
            message=text,
            reply=output.reply.text or "" if output.reply else "",
            wall_ms=wall_ms,
            llm_rounds=trace.llm_rounds,
            llm_calls=len(trace.llm_calls),
            prompt_tokens=trace.prompt_tokens,
            completion_tokens=trace.completion_tokens,
            prompt_tokens_est=sum(c.prompt_chars // 4 for c in trace.llm_calls),
            critical_completion_tokens=_critical_completion(trace.llm_calls),
            calls_by_schema=by_schema,
            prompt_by_schema=prompt_by_schema,
            completion_by_schema=completion_by_schema,
            completion_max_call=max((c.completion_tokens for c in trace.llm_calls), default=0),
            tool_calls=sum(
                1 for t in trace.tool_calls if t.status in ("ok", "error", "interrupted")
            ),
            tool_plans=by_schema.get("ToolCallPlan", 0),
            guidelines_evaluated=len(trace.matches),
            budget_skips=sum(1 for n in trace.notes if n.startswith("budget:")),
            speculative_discarded=discarded,
            speculation_saved=sum(1 for j in trace.unpredicted_journeys if j not in activated),
            speculation_late=sum(1 for j in trace.unpredicted_journeys if j in activated),
            llm_self_ms=llm_self,
            overhead_ms=overhead,
            breakdown_ms={k: round(v, 3) for k, v in breakdown.items()},
            values_ms=trace.values_ms,
            language_ms=trace.language_ms,
        )


def _critical_path_ms(calls: Sequence[Any]) -> float:
    """LLM time on the critical path: the slowest call of each sequential round."""
    slowest: dict[int, float] = {}
    for c in calls:
        slowest[c.round] = max(slowest.get(c.round, 0.0), c.latency_ms)
    return sum(slowest.values())


def _critical_completion(calls: Sequence[Any]) -> int:
    """Completion tokens on the critical path: what a per-token latency would wait for."""
    largest: dict[int, int] = {}
    for c in calls:
        largest[c.round] = max(largest.get(c.round, 0), c.completion_tokens)
    return sum(largest.values())


def _rounds_detail(calls: Sequence[Any]) -> list[str]:
    """What each sequential round asked, e.g. "1: 3×GuidelineMatchBatch, JourneyNodeSelection(x)"."""
    rounds: dict[int, list[str]] = {}
    for c in calls:
        named = c.schema_name in ("JourneyNodeSelection", "ToolCallPlan")
        rounds.setdefault(c.round, []).append(
            f"{c.schema_name}({c.label})" if named else c.schema_name
        )
    out = []
    for number in sorted(rounds):
        counts: dict[str, int] = {}
        for name in rounds[number]:
            counts[name] = counts.get(name, 0) + 1
        parts = [f"{n}×{name}" if n > 1 else name for name, n in counts.items()]
        out.append(f"{number}: {', '.join(parts)}")
    return out


def _stages_without_llm(
    stages: Sequence[Any], ended: float, calls: Sequence[Any]
) -> dict[str, float]:
    """Stage ms with the fake LLM's own CPU time taken out of the stage each call started in.

    Stage timings are consecutive and end when the pipeline returns, so they are anchored at
    the pipeline's end (`ended`, perf_counter time)."""
    cursor = ended - sum(s.ms for s in stages) / 1000
    bounds = []
    for s in stages:
        bounds.append((s.stage, cursor, cursor + s.ms / 1000))
        cursor += s.ms / 1000
    result = {s.stage: 0.0 for s in stages}
    for s in stages:
        result[s.stage] += s.ms
    for c in calls:
        for name, begin, end in bounds:
            if begin <= c.started < end:
                result[name] -= c.self_ms
                break
    return {k: max(0.0, v) for k, v in result.items()}
