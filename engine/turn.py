"""One engine turn, every stage of the pipeline, over the ports.

`TurnPipeline.run` is the pure computation: (agent, session, new messages) → new session state,
new events and a trace. `TurnEngine.handle` adds load / commit with optimistic concurrency and
idempotency around it — that is what a Lambda turn worker calls.

Critical path without tools: round 1 (all matching batches + node selection of active and
predicted journeys, concurrently) → round 2 only for journeys activated outside the prediction
(supplemental matching) → composition.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from engine.clock import SystemClock, UuidIds
from engine.compose import (
    FALLBACK_REPLY,
    CannedChoice,
    ComposedReply,
    CompositionInput,
    Instruction,
    Template,
    applied_sources,
    build_canned_prompt,
    build_compose_prompt,
    effective_composition_mode,
    field_values,
    fillable,
    merge_fragments,
    render_template,
)
from engine.context import TurnContext, llm_view_of
from engine.errors import LLMBudgetExceeded, LLMError, SessionConflict, ToolArgumentError
from engine.llm import TurnLLM
from engine.matching import guidelines as gm
from engine.matching.journeys import (
    JourneyStepResult,
    NodeView,
    VerifiedStep,
    auto_return,
    build_node_views,
    entry_step,
    select_journey_step,
)
from engine.model import (
    AgentSnapshot,
    CompositionMode,
    Guideline,
    GuidelineKind,
    Journey,
    JourneyNode,
    LLMPurpose,
    NodeKind,
    ToolKind,
    ToolSpec,
    journey_tag,
)
from engine.ports import (
    AgentStore,
    Clock,
    Embedder,
    IdGenerator,
    SchematicLLM,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolDispatcher,
    ToolOutcome,
    TurnCommit,
    VariableStore,
    VectorIndex,
)
from engine.projection import journey_node_guideline_id, node_action_text
from engine.recall import (
    RecallQuery,
    high_probability_journeys,
    preselect,
    prune_low_probability,
    tag_filter,
)
from engine.relations import resolve
from engine.session import (
    CollectedValue,
    Event,
    EventKind,
    EventSource,
    InboundMessage,
    PendingInterrupt,
    SessionState,
    remember,
)
from engine.tools import (
    ToolCallPlan,
    build_tool_call_prompt,
    fill_arguments,
    known_values,
    missing_argument_question,
    resolve_pick,
    selector_options,
    validate_arguments,
)
from engine.trace import (
    JourneyTransitionRecord,
    MatchRecord,
    StageTiming,
    ToolCallRecord,
    TurnTrace,
    redact,
)


@dataclass(frozen=True)
class TurnOutput:
    state: SessionState
    new_events: list[Event]
    reply: Event | None
    trace: TurnTrace
    replayed: bool = False  # the messages were already answered; nothing new was computed


@dataclass
class EngineDeps:
    llm: SchematicLLM
    embedder: Embedder | None = None
    tools: ToolDispatcher | None = None
    clock: Clock = field(default_factory=SystemClock)
    ids: IdGenerator = field(default_factory=UuidIds)


def turn_id_for(session_id: str, messages: Sequence[InboundMessage]) -> str:
    """Deterministic per batch of inbound events: a redelivered batch maps to the same turn."""
    digest = hashlib.sha256(
        "\x1f".join([session_id, *(m.event_id for m in messages)]).encode()
    ).hexdigest()
    return f"turn_{digest[:24]}"


_PER_VERSION: dict[tuple[str, str, str], Any] = {}


def _per_version(agent: AgentSnapshot, what: str, build: Callable[[], Any]) -> Any:
    """Derived data of an agent version, computed once per warm container."""
    key = (agent.id, agent.version or agent.content_hash(), what)
    value = _PER_VERSION.get(key)
    if value is None:
        if len(_PER_VERSION) > 256:
            _PER_VERSION.clear()
        value = _PER_VERSION[key] = build()
    return value


def node_views_of(agent: AgentSnapshot) -> dict[str, dict[str, NodeView]]:
    return cast(
        dict[str, dict[str, NodeView]],
        _per_version(agent, "views", lambda: {j.id: build_node_views(j) for j in agent.journeys}),
    )


def guideline_ids_of(agent: AgentSnapshot) -> frozenset[str]:
    return cast(
        frozenset[str],
        _per_version(agent, "ids", lambda: frozenset(g.id for g in agent.guidelines)),
    )


class TurnPipeline:
    def __init__(self, deps: EngineDeps) -> None:
        self.deps = deps

    async def run(
        self,
        agent: AgentSnapshot,
        session: SessionState,
        messages: Sequence[InboundMessage],
        *,
        turn_id: str,
        index: VectorIndex | None = None,
    ) -> TurnOutput:
        return await _Turn(self.deps, agent, session, messages, turn_id, index).run()


class TurnEngine:
    """Load → run the pipeline → commit, retrying on a racing turn with fresh state."""

    def __init__(
        self,
        agents: AgentStore,
        sessions: SessionStore,
        deps: EngineDeps,
        *,
        index_for: Callable[[AgentSnapshot], Awaitable[VectorIndex | None]] | None = None,
        variables: VariableStore | None = None,
        max_conflict_retries: int = 4,
    ) -> None:
        self.agents = agents
        self.sessions = sessions
        self.variables = variables
        self.pipeline = TurnPipeline(deps)
        self.index_for = index_for
        self.max_conflict_retries = max_conflict_retries

    async def handle(
        self, session_id: str, messages: Sequence[InboundMessage], *, turn_id: str | None = None
    ) -> TurnOutput:
        turn_id = turn_id or turn_id_for(session_id, messages)
        for _attempt in range(self.max_conflict_retries + 1):
            session = await self.sessions.load(session_id)
            if session is None:
                raise KeyError(f"no session {session_id!r}; create it before sending messages")
            # Unanswered messages, each once (a re-sent copy can share a batch with the original).
            seen = set(session.processed_event_ids)
            fresh = []
            for m in messages:
                if m.event_id not in seen:
                    seen.add(m.event_id)
                    fresh.append(m)
            if not fresh or turn_id in session.committed_turn_ids:
                return _replayed(session, turn_id)
            agent = await self.agents.get(session.agent_id)
            if self.variables is not None:
                # Per-customer values, fresh every turn (a tool or operator may have set them).
                values = await self.variables.get_variables(agent.id, session.customer_id)
                session = session.model_copy(update={"variables": {**session.variables, **values}})
            index = await self.index_for(agent) if self.index_for else None
            output = await self.pipeline.run(agent, session, fresh, turn_id=turn_id, index=index)
            commit = TurnCommit(
                turn_id=turn_id,
                expected_version=session.version,
                state=output.state,
                new_events=output.new_events,
                trace=output.trace.model_dump(mode="json"),
            )
            try:
                written = await self.sessions.commit(commit)
            except SessionConflict:
                continue  # another turn got there first: recompute on fresh state
            if not written:
                latest = await self.sessions.load(session_id)
                return _replayed(latest or session, turn_id)
            return output
        raise SessionConflict(
            f"session {session_id!r} kept changing under turn {turn_id}; the message stays queued "
            "and will be retried"
        )


def _replayed(session: SessionState, turn_id: str) -> TurnOutput:
    events = [e for e in session.events if e.turn_id == turn_id]
    reply = next(
        (
            e
            for e in reversed(events)
            if e.kind is EventKind.MESSAGE and e.source is EventSource.AGENT
        ),
        None,
    )
    trace = TurnTrace(
        turn_id=turn_id, session_id=session.id, agent_id=session.agent_id, agent_version=""
    )
    trace.notes.append("replay: these messages were already answered")
    return TurnOutput(session, [], reply, trace, replayed=True)


# --------------------------------------------------------------------------------------------------


class _Turn:
    """The working state of one turn. Created, run once, discarded."""

    def __init__(
        self,
        deps: EngineDeps,
        agent: AgentSnapshot,
        session: SessionState,
        messages: Sequence[InboundMessage],
        turn_id: str,
        index: VectorIndex | None,
    ) -> None:
        self.deps = deps
        self.agent = agent
        self.session = session
        self.messages = messages
        self.turn_id = turn_id
        self.index = index
        self.trace = TurnTrace(
            turn_id=turn_id, session_id=session.id, agent_id=agent.id, agent_version=agent.version
        )
        self.llm = TurnLLM(deps.llm, agent.config, self.trace)
        self.events: list[Event] = []
        self.paths: dict[str, tuple[str | None, ...]] = dict(session.journey_paths)
        self.steps: dict[str, str] = {}  # journey id → node id shown this turn
        self.completed: list[str] = list(session.completed_journeys)
        self.suspended: list[str] = list(session.suspended_journeys)
        self.collected: list[CollectedValue] = list(session.collected)
        self.tool_results: list[ToolOutcome] = []
        self.executed_tools: set[str] = set()
        self.interrupt: PendingInterrupt | None = session.pending_interrupt
        self.reply_options: list[dict[str, Any]] = []
        self.reply_view: dict[str, Any] | None = None
        self.performed_tool_steps: list[tuple[str, str]] = []  # (journey, node) run this turn
        self.questions: list[str] = []
        self.notes: list[str] = []
        self.matches: dict[str, gm.GuidelineMatch] = {}
        self.clarifications: list[Guideline] = []
        self.completed_customer_dependent: list[str] = []
        self.candidates: list[Guideline] = []
        self.views = node_views_of(agent)
        self._offset = session.next_offset()
        self._clock_started = time.perf_counter()

    # -- helpers -----------------------------------------------------------------------------------

    def _event(
        self, kind: EventKind, source: EventSource, text: str | None = None, **data: Any
    ) -> Event:
        event = Event(
            id=self.deps.ids.new_id("ev_"),
            offset=self._offset,
            kind=kind,
            source=source,
            created_at=self.deps.clock.now(),
            turn_id=self.turn_id,
            text=text,
            data=data,
        )
        self._offset += 1
        self.events.append(event)
        return event

    def _stage(self, name: str, started: float) -> float:
        now = time.perf_counter()
        self.trace.stages.append(StageTiming(stage=name, ms=round((now - started) * 1000, 3)))
        return now

    def _context(self) -> TurnContext:
        variables = {v.name: v.default for v in self.agent.variables if v.default is not None}
        variables.update(self.session.variables)
        return TurnContext(
            agent=self.agent,
            session=self.session,
            history=(*self.session.events, *self.events),
            variables=variables,
            terms=self.agent.terms,
            tool_results=tuple(self.tool_results),
        )

    def _collected_for(self, journey_id: str | None = None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for c in self.collected:
            if journey_id is None or c.journey_id == journey_id:
                values[c.name] = c.value
        return values

    def _active(self) -> list[str]:
        return [
            j
            for j, p in self.paths.items()
            if p and p[-1] is not None and self.agent.has_journey(j)
        ]

    def _prerequisites_met(self, journey: Journey) -> bool:
        return all(r in self.completed for r in journey.requires)

    # -- the pipeline ------------------------------------------------------------------------------

    async def run(self) -> TurnOutput:
        t = time.perf_counter()
        for m in self.messages:
            self._event(
                EventKind.MESSAGE,
                EventSource.CUSTOMER,
                m.text or m.choice or "",
                channel_event_id=m.event_id,
                **({"choice": m.choice} if m.choice else {}),
            )
        if self.interrupt is not None:
            self._resume_interrupt()
        ctx = self._context()
        t = self._stage("load", t)

        # Stages 1–3: tag filter, high-probability journeys, pruning.
        candidates = tag_filter(self.agent, self.session)
        query = RecallQuery(ctx, self.deps.embedder)
        high = await high_probability_journeys(
            ctx,
            k=self.agent.config.journey_top_k,
            embedder=self.deps.embedder,
            index=self.index,
            query=query,
        )
        self.trace.high_probability_journeys = list(high)
        recall = prune_low_probability(candidates, high)
        preselection = await preselect(
            ctx, recall.candidates, high=high, index=self.index, query=query
        )
        self.trace.held_back_guideline_ids = preselection.held_back
        self.candidates = preselection.kept
        active_before = set(self._active())
        to_match = [g for g in self.candidates if g.condition_of_journey not in active_before]
        t = self._stage("recall", t)

        # Round 1: matching batches ∥ node selection of active journeys ∥ speculative entry of
        # predicted journeys (used only if their condition matches).
        self.llm.round = 1
        predicted = [
            j
            for j in high
            if j not in active_before and self._prerequisites_met(self.agent.journey(j))
        ]
        selecting = (*active_before, *predicted)
        outcome, selections = await asyncio.gather(
            self._match(ctx, to_match),
            asyncio.gather(*[self._select(ctx, self.agent.journey(j)) for j in selecting]),
        )
        self._absorb_matches(outcome)
        step_results: dict[str, JourneyStepResult | None] = dict(
            zip(selecting, selections, strict=True)
        )
        t = self._stage("match_round_1", t)

        # Stage 5: activation. Every journey whose condition matched activates.
        newly = self._newly_activated(active_before)
        self.trace.activated_journeys = list(newly)
        to_enter = self._apply_prerequisites(newly)

        # Stage 6: supplemental matching for journeys activated outside the prediction.
        supplemental = [j for j in to_enter if j not in step_results]
        # A prerequisite the customer did not ask for starts at its first question: no LLM round
        # (the customer's message was about the suspended journey, not this one).
        for jid in [j for j in supplemental if j not in newly]:
            entry = entry_step(self.agent.journey(jid), self.views[jid])
            if entry is not None and not recall.dropped.get(jid):
                self._apply_verified(jid, entry, "entry")
                supplemental.remove(jid)
                to_enter.remove(jid)
        if supplemental:
            self.llm.round = 2
            self.trace.supplemental_journeys = list(supplemental)
            extra_guidelines = [g for j in supplemental for g in recall.dropped.get(j, [])]
            extra, entries = await asyncio.gather(
                self._match(ctx, extra_guidelines),
                asyncio.gather(*[self._select(ctx, self.agent.journey(j)) for j in supplemental]),
            )
            self._absorb_matches(extra)
            step_results.update(zip(supplemental, entries, strict=True))
        for jid in list(active_before) + to_enter:
            self._apply_step(jid, step_results.get(jid))
        await self._resume_suspended(ctx)
        t = self._stage("match_supplemental", t)

        # Stage 7: relationships. A journey whose step is suppressed by priority keeps its previous
        # position, so the suppressed step is not taken as performed.
        resolution = self._resolve()
        for jid in resolution.suppressed_journeys:
            self.paths[jid] = self.session.journey_paths.get(jid, ())
            self.steps.pop(jid, None)
        t = self._stage("relationships", t)

        # Stage 8: tools (bounded iterations, re-selecting journey steps after results).
        await self._tool_stage(resolution)
        resolution = self._resolve()
        t = self._stage("tools", t)

        # Stage 9: composition.
        reply, applied = await self._compose(resolution)
        t = self._stage("compose", t)
        state = self._new_state(applied)
        self.trace.llm_rounds = len({c.round for c in self.trace.llm_calls})
        self._stage("persist_prep", t)
        return TurnOutput(state, self.events, reply, self.trace)

    # -- matching ------------------------------------------------------------------------------------

    async def _match(self, ctx: TurnContext, guidelines: Sequence[Guideline]) -> gm.MatchingOutcome:
        batches = gm.plan_batches(
            guidelines,
            self.session,
            self.agent.relationships,
            self.agent.config.batch_prompt_budget_chars,
        )
        results = await asyncio.gather(*[self._run_batch(ctx, b) for b in batches])
        merged = gm.MatchingOutcome()
        for r in results:
            merged.merge(r)
        return merged

    async def _run_batch(self, ctx: TurnContext, batch: gm.Batch) -> gm.MatchingOutcome:
        prompt = gm.build_match_prompt(ctx, batch, explain=self.agent.config.explain)
        try:
            gen = await self.llm.generate(
                gm.purpose_for(batch.kind), prompt, gm.schema_for(batch.kind), label=batch.label
            )
        except LLMError as exc:
            skipped = gm.MatchingOutcome(skipped=[g.id for g in batch.guidelines])
            if not isinstance(exc, LLMBudgetExceeded):
                self.trace.notes.append(f"matching batch {batch.label} failed: {exc}")
            return skipped
        return gm.interpret(batch, gen.value)

    def _absorb_matches(self, outcome: gm.MatchingOutcome) -> None:
        for gid, batch, matched, score, rationale in outcome.verdicts:
            self.trace.matches.append(
                MatchRecord(
                    guideline_id=gid,
                    batch=batch.value,
                    matched=matched,
                    score=score,
                    rationale=rationale,
                )
            )
        for m in outcome.matches:
            self.matches[m.guideline.id] = m
        self.clarifications.extend(outcome.clarifications)
        self.completed_customer_dependent.extend(outcome.completed_customer_dependent)

    def _newly_activated(self, active_before: set[str]) -> list[str]:
        matched = set(self.matches)
        newly = []
        for j in self.agent.journeys:
            if j.id in active_before:
                continue
            if matched.intersection(j.condition_guideline_ids):
                newly.append(j.id)
        return newly

    def _apply_prerequisites(self, newly: Sequence[str]) -> list[str]:
        """Journeys to enter now. A journey whose prerequisites have not completed is suspended
        and its first unmet prerequisite is entered instead (recursively); when that completes,
        the suspended journey resumes by itself — the customer is not asked again."""
        to_enter: list[str] = []
        for jid in newly:
            journey = self.agent.journey(jid)
            target = self._first_runnable(journey, set())
            if target is None:
                continue
            if target != jid and jid not in self.suspended:
                self.suspended.append(jid)
                self.trace.journeys.append(
                    JourneyTransitionRecord(
                        journey_id=jid,
                        previous_path=list(self.paths.get(jid, ())),
                        new_path=list(self.paths.get(jid, ())),
                        node_id=None,
                        how="suspended",
                        rationale=f"waiting for prerequisite journey {target!r}",
                    )
                )
            if target not in to_enter and target not in self._active():
                to_enter.append(target)
        return to_enter

    def _first_runnable(self, journey: Journey, seen: set[str]) -> str | None:
        if journey.id in seen:
            return None
        seen.add(journey.id)
        for req in journey.requires:
            if req not in self.completed:
                return self._first_runnable(self.agent.journey(req), seen)
        return journey.id

    async def _select(self, ctx: TurnContext, journey: Journey) -> JourneyStepResult | None:
        try:
            return await select_journey_step(
                self.llm,
                ctx,
                journey,
                self.paths.get(journey.id, ()) if journey.id in self._active() else (),
                executed_tools=self.executed_tools,
                max_depth=self.agent.config.max_journey_depth,
                explain=self.agent.config.explain,
            )
        except LLMError as exc:
            if not isinstance(exc, LLMBudgetExceeded):
                self.trace.notes.append(f"node selection for {journey.id!r} failed: {exc}")
            return None

    def _apply_step(self, journey_id: str, result: JourneyStepResult | None) -> None:
        """Record a journey's transition and collected values; exits and completions end it."""
        previous = self.paths.get(journey_id, ())
        if result is None:
            if previous and previous[-1] is not None:
                self.steps[journey_id] = previous[-1]  # keep the step we were at
            return
        fresh_run = not previous or previous[-1] is None
        if fresh_run and result.step.outcome != "exit":
            # A new run of a journey collects its own values again: a second transfer must never
            # reuse the first one's amount or destination.
            self.collected = [c for c in self.collected if c.journey_id != journey_id]
        self._record_collected(journey_id, result.collected)
        self.trace.notes.extend(result.notes)
        self._apply_verified(
            journey_id, result.step, "llm" if result.used_llm else "auto_return", result.rationale
        )

    def _apply_verified(
        self, journey_id: str, step: VerifiedStep, how: str, rationale: str = ""
    ) -> None:
        previous = self.paths.get(journey_id, ())
        self.paths[journey_id] = tuple(step.path)
        self.steps.pop(journey_id, None)
        if step.outcome == "completed":
            if journey_id not in self.completed:
                self.completed.append(journey_id)
            how = "completed"
        elif step.outcome == "exit":
            how = "exit"
            if journey_id in self.suspended:
                self.suspended.remove(journey_id)
        elif step.node_id is not None:
            self.steps[journey_id] = step.node_id
        self.trace.journeys.append(
            JourneyTransitionRecord(
                journey_id=journey_id,
                previous_path=list(previous),
                new_path=list(step.path),
                node_id=step.node_id,
                how=how,
                repairs=list(step.repairs),
                rationale=rationale,
            )
        )

    def _record_collected(self, journey_id: str, values: dict[str, Any]) -> None:
        for name, value in values.items():
            self.trace.collected[f"{journey_id}.{name}"] = redact(name, value)
            node_id = self.paths.get(journey_id, (None,))[-1] or ""
            self.collected.append(
                CollectedValue(
                    journey_id=journey_id,
                    node_id=node_id,
                    name=name,
                    value=value,
                    turn_id=self.turn_id,
                )
            )

    async def _resume_suspended(self, ctx: TurnContext) -> None:
        """After a prerequisite completes, resume (or advance the chain of) suspended journeys."""
        for _ in range(len(self.suspended) + 1):
            waiting = [j for j in self.suspended if j not in self._active()]
            if not waiting or self._active():
                return
            jid = waiting[-1]
            target = self._first_runnable(self.agent.journey(jid), set())
            if target is None:
                return
            if target == jid:
                self.suspended.remove(jid)
            journey = self.agent.journey(target)
            previous = self.paths.get(target, ())
            entry = entry_step(journey, self.views[target], previous_path=previous)
            if entry is not None:
                # The usual case (a first question): no LLM round. Values the customer gave
                # earlier are still picked up by the journey's next node selection.
                self.collected = [c for c in self.collected if c.journey_id != target]
                self._apply_verified(target, entry, "entry")
                continue
            self.llm.round += 1
            result = await self._select(self._context(), journey)
            self._apply_step(target, result)
            if result is None:
                return

    def _resolve(self) -> Any:
        active_journeys = [j for j in self.steps if j in self._active()]
        matched = set(self.matches)
        # Journey-scoped guidelines depend on their journey being active — or having been active
        # when the turn began, so "confirm nothing was transferred" still applies in the turn the
        # customer cancels.
        in_scope = set(active_journeys) | set(self.session.active_journey_ids)
        for gid in list(matched):
            scoped = self.matches[gid].guideline.scoped_journey_id
            if scoped is not None and scoped not in in_scope:
                matched.discard(gid)
        # Journeys in scope satisfy dependencies; only those with a step this turn are shown
        # (consumers read steps from `self.steps`).
        resolution = resolve(
            self.agent.relationships,
            matched,
            in_scope,
            known_guidelines=guideline_ids_of(self.agent),
        )
        for record in resolution.records:
            if record not in self.trace.relations:
                self.trace.relations.append(record)
        return resolution

    # -- tools ------------------------------------------------------------------------------------

    def _journey_tool_steps(self, resolution: Any) -> list[tuple[Journey, JourneyNode]]:
        steps = []
        for jid, node_id in self.steps.items():
            if jid not in resolution.journey_ids:
                continue
            journey = self.agent.journey(jid)
            node = journey.node(node_id)
            if node.kind is NodeKind.TOOL and not set(node.tools) & self.executed_tools:
                steps.append((journey, node))
        return steps

    def _guideline_tools(self, resolution: Any) -> dict[str, str]:
        offered: dict[str, str] = {}
        for gid in resolution.guideline_ids:
            g = self.agent.guideline(gid)
            for tool in g.tools:
                if tool not in self.executed_tools and self.agent.has_tool(tool):
                    offered.setdefault(tool, g.action or g.condition)
        return offered

    async def _tool_stage(self, resolution: Any) -> None:
        dispatcher = self.deps.tools
        for _iteration in range(self.agent.config.max_tool_iterations):
            calls: list[tuple[ToolSpec, dict[str, Any], str | None]] = []
            known = known_values(
                self._collected_for(),
                self.session.variables,
                [*self._earlier_tool_results(), *self.tool_results],
            )
            # A journey tool step whose arguments are all known runs without any LLM call; one
            # with gaps gets a single extraction attempt together with the guidelines' tools.
            step_of_tool: dict[str, str] = {}
            offered: dict[str, str] = {}
            for journey, node in self._journey_tool_steps(resolution):
                for name in node.tools:
                    spec = self.agent.tool(name)
                    args, missing = fill_arguments(spec, known)
                    if missing:
                        offered[name] = node.action or f"the '{journey.title}' journey runs it now"
                        step_of_tool[name] = journey.id
                        continue
                    calls.append((spec, args, journey.id))
            offered.update(self._guideline_tools(resolution))
            if offered:
                planned = await self._plan_guideline_calls(offered, known)
                calls.extend((spec, args, step_of_tool.get(spec.name)) for spec, args, _ in planned)
                asked = {c.tool for c in self.trace.tool_calls if c.status == "missing_arguments"}
                for name in set(step_of_tool) - {spec.name for spec, _, _ in planned} - asked:
                    # A journey's tool step is not optional: what is missing must be asked for.
                    spec = self.agent.tool(name)
                    _, missing = fill_arguments(spec, known)
                    self.questions.append(missing_argument_question(spec, missing))
                    self._trace_tool(name, {}, "missing_arguments", ", ".join(missing))
            if not calls:
                return
            if dispatcher is None:
                self.trace.notes.append("tools were due but no tool dispatcher is configured")
                return
            await self._run_calls(dispatcher, calls)
            if self.interrupt is not None and self.interrupt.call_id.startswith(self.turn_id):
                return  # an interrupting tool waits for the customer; the journey stays put
            await self._after_tools()
            await self._rematch_after_tools()
            resolution = self._resolve()

    async def _plan_guideline_calls(
        self, offered: dict[str, str], known: dict[str, Any]
    ) -> list[tuple[ToolSpec, dict[str, Any], str | None]]:
        # A tool whose arguments are all known runs without an LLM call — unless it is
        # consequential (moving money, cancelling orders): then the model confirms it is due.
        # An identical call already made in this session is not repeated: its result is in view.
        ready: list[tuple[ToolSpec, dict[str, Any], str | None]] = []
        to_ask = dict(offered)
        for name in offered:
            spec = self.agent.tool(name)
            args, missing = fill_arguments(spec, known)
            if missing or spec.consequential:
                continue
            del to_ask[name]
            if not self._already_called(name, args):
                ready.append((spec, args, None))
        if not to_ask:
            return ready
        specs = [self.agent.tool(n) for n in to_ask]
        prompt = build_tool_call_prompt(self._context(), specs, to_ask, known)
        self.llm.round += 1
        try:
            gen = await self.llm.generate(
                LLMPurpose.CALL_TOOLS, prompt, ToolCallPlan, label=",".join(offered)
            )
        except LLMError as exc:
            self.trace.notes.append(f"tool planning failed: {exc}")
            return ready
        planned = ready
        for call in gen.value.calls:
            if call.tool not in offered:
                self._trace_tool(
                    call.tool, {}, "refused", "not offered by any matched guideline or step"
                )
                continue
            spec = self.agent.tool(call.tool)
            args = {a.name: a.value for a in call.arguments}
            for p in spec.parameters:
                if p.name not in args and known.get(p.name) not in (None, ""):
                    args[p.name] = known[p.name]
            _, missing = fill_arguments(spec, args)
            if missing:
                self.questions.append(missing_argument_question(spec, missing))
                self._trace_tool(spec.name, args, "missing_arguments", ", ".join(missing))
                continue
            planned.append((spec, args, None))
        return planned

    async def _run_calls(
        self,
        dispatcher: ToolDispatcher,
        planned: Sequence[tuple[ToolSpec, dict[str, Any], str | None]],
    ) -> None:
        calls: list[ToolCall] = []
        for spec, raw_args, journey_id in planned:
            node_id = self.steps.get(journey_id) if journey_id else None
            if journey_id and node_id and (journey_id, node_id) not in self.performed_tool_steps:
                self.performed_tool_steps.append((journey_id, node_id))
            try:
                args = validate_arguments(spec, raw_args)
            except ToolArgumentError as exc:
                self.questions.append(
                    f"The details for {spec.name} were not valid ({exc}); ask again."
                )
                self._trace_tool(spec.name, raw_args, "invalid_arguments", str(exc))
                continue
            index = len(self.tool_results) + len(calls)
            calls.append(
                ToolCall(
                    id=f"{self.turn_id}:{index}",
                    tool=spec.name,
                    arguments=args,
                    idempotency_key=f"{self.session.id}:{self.turn_id}:{index}",
                )
            )
        if not calls:
            return
        context = ToolContext(
            agent_id=self.agent.id,
            session_id=self.session.id,
            customer_id=self.session.customer_id,
            turn_id=self.turn_id,
            variables=dict(self.session.variables),
        )
        try:
            outcomes = await dispatcher.dispatch(calls, context)
        except Exception as exc:  # a broken dispatcher must not drop the customer's message
            outcomes = [
                ToolOutcome(call_id=c.id, tool=c.tool, error=f"dispatch failed: {exc}")
                for c in calls
            ]
        by_id = {o.call_id: o for o in outcomes}
        for call in calls:
            outcome = by_id.get(call.id) or ToolOutcome(
                call_id=call.id, tool=call.tool, error="no result"
            )
            self.tool_results.append(outcome)
            self.executed_tools.add(call.tool)
            self._event(
                EventKind.TOOL,
                EventSource.SYSTEM,
                None,
                tool=call.tool,
                call_id=call.id,
                arguments={k: redact(k, v) for k, v in call.arguments.items()},
                llm_view=llm_view_of(outcome),
                view=outcome.view,
                error=outcome.error,
            )
            self._maybe_interrupt(call, outcome)
            if outcome.error and outcome.view is not None and self.reply_view is None:
                self.reply_view = outcome.view  # e.g. {"scene": "showError", "tip": "…"}
            self._trace_tool(
                call.tool,
                call.arguments,
                "interrupted" if self._interrupted_by(call) else "error" if outcome.error else "ok",
                outcome.error or "",
                outcome.duration_ms,
            )

    def _earlier_tool_results(self) -> list[ToolOutcome]:
        """Successful tool results of earlier turns, as the LLM saw them: a value looked up
        before (an account id) can fill an argument now without asking again."""
        return [
            ToolOutcome(
                call_id=e.data.get("call_id", ""),
                tool=e.data.get("tool", ""),
                data=e.data["llm_view"],
            )
            for e in self.session.events
            if e.kind is EventKind.TOOL
            and not e.data.get("error")
            and e.data.get("llm_view") is not None
        ]

    def _already_called(self, tool: str, args: dict[str, Any]) -> bool:
        """Whether this session already has a successful call of `tool` with these arguments."""
        wanted = {k: redact(k, v) for k, v in args.items()}
        return any(
            e.kind is EventKind.TOOL
            and e.data.get("tool") == tool
            and not e.data.get("error")
            and e.data.get("arguments") == wanted
            for e in (*self.session.events, *self.events)
        )

    def _interrupted_by(self, call: ToolCall) -> bool:
        return self.interrupt is not None and self.interrupt.call_id == call.id

    def _maybe_interrupt(self, call: ToolCall, outcome: ToolOutcome) -> None:
        """A selector or interrupter tool that succeeded pauses the journey until the customer
        answers: its options (or action) go out with the reply."""
        spec = self.agent.tool(call.tool)
        if spec.kind is ToolKind.GENERAL or outcome.error:
            return
        location = next(
            (
                (j, n)
                for j, n in self.steps.items()
                if call.tool in self.agent.journey(j).node(n).tools
            ),
            (None, None),
        )
        options = selector_options(outcome) if spec.kind is ToolKind.SELECTOR else []
        if spec.kind is ToolKind.SELECTOR and not options:
            return  # nothing to choose from: the LLM sees the (empty) data and explains
        self.interrupt = PendingInterrupt(
            tool=call.tool,
            call_id=call.id,
            kind=spec.kind.value,
            options=tuple(options),
            journey_id=location[0],
            node_id=location[1],
            prompt=str(outcome.control.get("prompt") or ""),
        )
        self.reply_options = options
        self.reply_view = outcome.view
        if spec.kind is ToolKind.SELECTOR:
            labels = "; ".join(str(o["label"]) for o in options)
            self.questions.append(f"Ask the customer to pick one of these options: {labels}")
        else:
            self.questions.append(
                str(outcome.control.get("prompt") or "Ask the customer to complete the step shown")
            )

    def _resume_interrupt(self) -> None:
        """The customer answered an interrupt: a selector's pick (button, list reply, number or
        text) or an interrupter's completion. The pick is stored like a collected value and the
        journey moves on from the tool step without running the tool again."""
        pending = self.interrupt
        assert pending is not None
        message = self.messages[-1]
        picked: Any = None
        if pending.kind == ToolKind.SELECTOR.value:
            picked = resolve_pick(pending.options, message.choice, message.text)
            if picked is None:
                labels = "; ".join(str(o["label"]) for o in pending.options)
                self.questions.append(f"The customer still has to pick one of: {labels}")
                return
        else:
            picked = message.metadata.get("resume") or message.choice or message.text
        name = f"{pending.tool}_selection"
        if pending.journey_id:
            self.collected.append(
                CollectedValue(
                    journey_id=pending.journey_id,
                    node_id=pending.node_id or "",
                    name=name,
                    value=picked,
                    turn_id=self.turn_id,
                )
            )
        self.tool_results.append(
            ToolOutcome(call_id=pending.call_id, tool=pending.tool, data={"selected": picked})
        )
        self.executed_tools.add(pending.tool)
        self.trace.notes.append(f"interrupt of {pending.tool} resumed with {picked!r}")
        self.interrupt = None
        if pending.journey_id and pending.node_id and pending.journey_id in self._active():
            self.steps[pending.journey_id] = pending.node_id
            journey = self.agent.journey(pending.journey_id)
            step = auto_return(
                journey, self.views[journey.id], self.paths[journey.id], self.executed_tools
            )
            if step is not None:
                self._apply_verified(journey.id, step, "auto_return")

    async def _rematch_after_tools(self) -> None:
        """Guidelines that opt in (`metadata.reevaluate_after_tools`) are matched again with this
        turn's tool results in view — "the balance is negative → warn the customer". Opt-in keeps
        the common turn at one matching round."""
        pending = [
            g
            for g in self.candidates
            if g.metadata.get("reevaluate_after_tools") and g.id not in self.matches
        ]
        if pending:
            self.llm.round += 1
            self._absorb_matches(await self._match(self._context(), pending))

    async def _after_tools(self) -> None:
        """Re-select journey steps after tool results: deterministic auto-return where possible."""
        for jid in list(self.steps):
            journey = self.agent.journey(jid)
            node = journey.node(self.steps[jid])
            if node.kind is not NodeKind.TOOL or not set(node.tools) & self.executed_tools:
                continue
            step = auto_return(journey, self.views[jid], self.paths[jid], self.executed_tools)
            if step is not None:
                self._apply_verified(jid, step, "auto_return")
            else:
                self.llm.round += 1
                result = await self._select(self._context(), journey)
                self._apply_step(jid, result)
        await self._resume_suspended(self._context())

    def _trace_tool(
        self, tool: str, args: dict[str, Any], status: str, detail: str = "", ms: float = 0.0
    ) -> None:
        self.trace.tool_calls.append(
            ToolCallRecord(
                call_id=f"{self.turn_id}:{len(self.trace.tool_calls)}",
                tool=tool,
                arguments={k: redact(k, v) for k, v in args.items()},
                status=status,
                detail=detail,
                duration_ms=ms,
            )
        )

    # -- composition ------------------------------------------------------------------------------

    def _composition_input(
        self, resolution: Any
    ) -> tuple[CompositionInput, list[Guideline], list[tuple[Journey, JourneyNode]]]:
        data = CompositionInput(questions=list(self.questions), collected=self._collected_for())
        guidelines: list[Guideline] = []
        steps: list[tuple[Journey, JourneyNode]] = []
        n = 0
        for g in self.agent.guidelines:
            if g.id not in resolution.guideline_ids:
                continue
            if g.kind is GuidelineKind.OBSERVATIONAL:
                data.observations.append(g.condition)
                continue
            if any(g.id in c.metadata.get("disambiguates", []) for c in self.clarifications):
                continue  # the clarification question replaces the ambiguous options
            n += 1
            guidelines.append(g)
            data.instructions.append(Instruction(f"i{n}", g.action or "", g.id))
        for c in self.clarifications:
            n += 1
            data.instructions.append(Instruction(f"i{n}", c.action or "", c.id))
        for jid, node_id in self.performed_tool_steps:
            node = self.agent.journey(jid).node(node_id)
            shown = self.steps.get(jid) == node_id and jid in resolution.journey_ids
            if node.action and not shown:  # the journey moved on, but the step's words are due
                steps.append((self.agent.journey(jid), node))
                n += 1
                source = journey_node_guideline_id(jid, node_id)
                data.instructions.append(Instruction(f"i{n}", node.action, source, jid))
        for jid, node_id in self.steps.items():
            if jid not in resolution.journey_ids:
                continue
            journey = self.agent.journey(jid)
            node = journey.node(node_id)
            text = node_action_text(journey, node)
            if not text:
                continue
            n += 1
            steps.append((journey, node))
            data.instructions.append(
                Instruction(
                    f"i{n}",
                    f"({journey.title}) {text}",
                    journey_node_guideline_id(jid, node_id),
                    jid,
                )
            )
        for jid in self.suspended:
            if jid not in self.session.suspended_journeys:
                waiting_for = self._first_runnable(self.agent.journey(jid), set())
                if waiting_for and waiting_for != jid:
                    data.notes.append(
                        f"Before '{self.agent.journey(jid).title}' the customer must complete "
                        f"'{self.agent.journey(waiting_for).title}'; say so briefly."
                    )
        for r in self.tool_results:
            if r.error:
                data.notes.append(f"tool {r.tool} failed: {r.error}")
        return data, guidelines, steps

    async def _compose(self, resolution: Any) -> tuple[Event, list[str]]:
        data, guidelines, steps = self._composition_input(resolution)
        mode = effective_composition_mode(self.agent, guidelines, steps)
        self.trace.composition_mode = mode.value
        self.trace.matched_guideline_ids = sorted(resolution.guideline_ids)
        self.llm.round += 1
        try:
            if mode is CompositionMode.FLUID:
                text, applied = await self._compose_fluid(data)
            else:
                text, applied = await self._compose_canned(data, resolution, mode)
        except LLMError as exc:
            self.trace.notes.append(f"composition failed, fallback reply sent: {exc}")
            return self._event(
                EventKind.MESSAGE, EventSource.AGENT, FALLBACK_REPLY, fallback=True
            ), []
        self.trace.applied_guideline_ids = applied
        extras: dict[str, Any] = {"composition_mode": mode.value}
        if self.reply_options:
            extras["options"] = self.reply_options
        if self.reply_view is not None:
            extras["view"] = self.reply_view
        event = self._event(EventKind.MESSAGE, EventSource.AGENT, text, **extras)
        return event, applied

    async def _compose_fluid(self, data: CompositionInput) -> tuple[str, list[str]]:
        prompt = build_compose_prompt(self._context(), data, explain=self.agent.config.explain)
        gen = await self.llm.generate(LLMPurpose.COMPOSE, prompt, ComposedReply, label="fluid")
        return gen.value.message, applied_sources(data, gen.value)

    def _canned_templates(self, resolution: Any) -> list[Template]:
        scope = {f"guideline:{g}" for g in resolution.guideline_ids}
        scope |= {journey_tag(j) for j in resolution.journey_ids}
        scope |= {f"node:{j}:{n}" for j, n in self.steps.items() if j in resolution.journey_ids}
        scope |= {f"node:{j}:{n}" for j, n in self.performed_tool_steps}
        approved = [
            Template("", c.id, c.template)
            for c in self.agent.canned_responses
            if not c.tags or scope.intersection(c.tags)
        ]
        fragments = merge_fragments(
            [(r.tool, r.fragments) for r in self.tool_results if r.fragments]
        )
        return fragments + approved  # fragments first: they are specific to this turn

    async def _compose_canned(
        self, data: CompositionInput, resolution: Any, mode: CompositionMode
    ) -> tuple[str, list[str]]:
        strict = mode is CompositionMode.CANNED_STRICT
        values = field_values(
            [r.data for r in self.tool_results if r.error is None],
            [f for r in self.tool_results for f in r.fragments],
            self._collected_for(),
            self._context().variables,
        )
        candidates = fillable(self._canned_templates(resolution), values)
        candidates = candidates[: self.agent.config.max_canned_candidates]
        candidates = [
            Template(f"t{i}", t.source_id, t.text, t.transient) for i, t in enumerate(candidates, 1)
        ]
        if not candidates:
            if strict:
                self.trace.notes.append(
                    "canned_strict: no fillable template; sent the no-match reply"
                )
                return self.agent.config.no_match_response, []
            return await self._compose_fluid(data)
        prompt = build_canned_prompt(self._context(), data, candidates, values, strict=strict)
        gen = await self.llm.generate(LLMPurpose.COMPOSE, prompt, CannedChoice, label=mode.value)
        choice = gen.value
        applied = applied_sources(data, ComposedReply(message="", applied=choice.applied))
        chosen = next((t for t in candidates if t.handle == choice.template), None)
        if chosen is not None:
            self.trace.notes.append(f"canned: sent template {chosen.source_id}")
            return render_template(chosen, values), applied
        if strict or not choice.message.strip():
            self.trace.notes.append("canned: no template chosen; sent the no-match reply")
            return self.agent.config.no_match_response, applied
        return choice.message, applied

    # -- new state --------------------------------------------------------------------------------

    def _new_state(self, applied: Sequence[str]) -> SessionState:
        applied_ids = list(self.session.applied_guideline_ids)
        pending = [
            g
            for g in self.session.pending_customer_guideline_ids
            if g not in self.completed_customer_dependent
        ]
        for gid in self.completed_customer_dependent:
            if gid not in applied_ids:
                applied_ids.append(gid)
        for gid in applied:
            if not self.agent.has_guideline(gid):
                continue  # projected journey steps are tracked by journey paths, not here
            g = self.agent.guideline(gid)
            if g.kind is GuidelineKind.CONTINUOUS:
                continue
            if g.kind is GuidelineKind.CUSTOMER_DEPENDENT and gid not in applied_ids:
                if gid not in pending:
                    pending.append(gid)
            elif gid not in applied_ids:
                applied_ids.append(gid)
        return self.session.model_copy(
            update={
                "version": self.session.version + 1,
                "events": (*self.session.events, *self.events),
                "journey_paths": dict(self.paths),
                "completed_journeys": tuple(self.completed),
                "suspended_journeys": tuple(self.suspended),
                "applied_guideline_ids": tuple(applied_ids),
                "pending_customer_guideline_ids": tuple(pending),
                "collected": tuple(self.collected),
                "pending_interrupt": self.interrupt,
                "processed_event_ids": remember(
                    self.session.processed_event_ids, *(m.event_id for m in self.messages)
                ),
                "committed_turn_ids": remember(self.session.committed_turn_ids, self.turn_id),
            }
        )
