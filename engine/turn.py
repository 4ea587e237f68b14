"""One engine turn: the pipeline of stages, and the load/commit wrapper around it.

`TurnPipeline.run` is the pure computation: (agent, session, new messages) → new session state,
new events and a trace, as the list of stages it is (each in `engine.stages`). `TurnEngine.handle`
adds load / commit with optimistic concurrency and idempotency around it — that is what a Lambda
turn worker calls.

Critical path without tools: round 1 (all matching batches + node selection of active and
predicted journeys, concurrently) → round 2 only for journeys activated outside the prediction
(supplemental matching) → composition.

A rate-limited model (a call still refused with a 429 after its retries) either gives the
fallback reply like any other model failure, or — `defer_rate_limited`, the deployments'
default — ends the turn with `ModelRateLimited` before anything is committed: the session stays
exactly as it was and the messages are answered when the model has room again (the worker
gives them back to the queue). Checked after matching, after tools and after composition; a turn
in which a tool already ran is never deferred (what ran is recorded, with the fallback reply).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.errors import AgentNotFound, SessionConflict
from engine.language.detection import detect
from engine.language.session import in_session_words, session_language
from engine.llm import TurnLLM
from engine.model import AgentSnapshot
from engine.ports import AgentStore, SessionStore, TurnCommit, VariableStore, VectorIndex
from engine.privacy.erasure import written_before_erasure
from engine.sessions.session import (
    Event,
    EventKind,
    EventSource,
    InboundMessage,
    SessionMode,
    SessionState,
)
from engine.stages.activation import activate
from engine.stages.compose import compose_reply
from engine.stages.confirmation import carry_agreement, read_answer
from engine.stages.handoff import (
    begin_handoff,
    handoff_request,
    record_for_person,
    silent_session_state,
)
from engine.stages.interrupts import release_stale_interrupt, resume_interrupt
from engine.stages.match import match_round
from engine.stages.new_state import new_session_state
from engine.stages.rate_limit import defer_if_rate_limited
from engine.stages.recall import recall
from engine.stages.relationships import resolve_relationships, suppress_journeys
from engine.stages.retry_offers import read_retry_answer
from engine.stages.secret_echoes import with_secret_digests
from engine.stages.secret_masking import (
    earlier_trace_masking,
    mask_events,
    masked_trace,
    turns_quoting_masked_events,
)
from engine.stages.speculation import draft_outcome, settle_drafts, start_draft
from engine.stages.state import EngineDeps, TurnState
from engine.stages.tools import run_tools
from engine.trace import TurnTrace, trace_record
from engine.values import cost as values_cost
from engine.versioning.pinning import VersionChoice, choose_version, journeys_in_flight

__all__ = [
    "EngineDeps",
    "TurnEngine",
    "TurnOutput",
    "TurnPipeline",
    "dropped_turn",
    "turn_id_for",
]


@dataclass(frozen=True)
class TurnOutput:
    state: SessionState
    new_events: list[Event]
    reply: Event | None
    trace: TurnTrace
    replayed: bool = False  # the messages were already answered; nothing new was computed
    # earlier events rewritten with a secret this turn recognised masked (same offsets)
    masked_events: Sequence[Event] = ()
    # This turn's secret masking, for the stored traces of `masked_turns`: the turn of the
    # earliest event it masked and every turn since (their prompts quote what the customer
    # typed). Memory only, like the secrets it holds.
    scrub_earlier: Callable[[Any], Any] | None = None
    masked_turns: Sequence[str] = ()
    # Messages not answered because their sender was erased after writing them (`engine.privacy.erasure`)
    dropped: int = 0


def turn_id_for(session_id: str, messages: Sequence[InboundMessage]) -> str:
    """Deterministic per batch of inbound events: a redelivered batch maps to the same turn."""
    digest = hashlib.sha256(
        "\x1f".join([session_id, *(m.event_id for m in messages)]).encode()
    ).hexdigest()
    return f"turn_{digest[:24]}"


class TurnPipeline:
    """The stages of one turn, in order, over one `TurnState`. With `defer_rate_limited`, a
    turn whose model stays rate-limited raises `ModelRateLimited` instead of answering."""

    def __init__(self, deps: EngineDeps, *, defer_rate_limited: bool = False) -> None:
        self.deps = deps
        self.defer_rate_limited = defer_rate_limited

    async def run(
        self,
        agent: AgentSnapshot,
        session: SessionState,
        messages: Sequence[InboundMessage],
        *,
        turn_id: str,
        index: VectorIndex | None = None,
        version: VersionChoice | None = None,
    ) -> TurnOutput:
        trace = TurnTrace(
            turn_id=turn_id, session_id=session.id, agent_id=agent.id, agent_version=agent.version
        )
        if version is not None:  # chosen by `TurnEngine.handle` (engine.versioning.pinning)
            trace.published_version = version.published_version
            trace.version_choice = version.how
            trace.notes.extend(version.notes)
        llm = TurnLLM(
            self.deps.llm, agent.config, trace, stop_when_rate_limited=self.defer_rate_limited
        )
        state = TurnState(
            self.deps, agent, session, messages, turn_id=turn_id, trace=trace, llm=llm
        )
        t = time.perf_counter()
        state.values_clock = values_cost.start()

        # Load: this turn's customer messages; an answer to a pending interrupt resumes its step.
        # A pending confirmation is answered (or dropped) by this turn's messages.
        # Each message's language, among the agent's languages and English (engine.language).
        served = agent.config.languages
        detecting = time.perf_counter()
        detected = [
            None if m.choice and not m.text else detect(m.text or "", served) for m in messages
        ]
        detected = in_session_words(
            session.language, [m.text or "" for m in messages], detected, served
        )
        trace.language_ms = round((time.perf_counter() - detecting) * 1000, 3)
        for m, language in zip(messages, detected, strict=True):
            state.add_event(
                EventKind.MESSAGE,
                EventSource.CUSTOMER,
                m.text or m.choice or "",
                channel_event_id=m.event_id,
                **({"choice": m.choice} if m.choice else {}),
                **({"sender": m.sender_id} if m.sender_id else {}),
                **({"attachments": attachments_data(m)} if m.attachments else {}),
                **({"language": language} if language else {}),
            )
        state.language = session_language(state.session.language, detected, served)
        if state.mode is SessionMode.HUMAN:
            # A person has the session: match for the trace, answer nothing (engine.handoff).
            return await self._record_for_person(state, index)
        if all(m.is_unreadable_media for m in messages):
            # Nothing the agent can read: say so (configurable) rather than answer an empty text.
            reply = state.add_event(
                EventKind.MESSAGE,
                EventSource.AGENT,
                state.line("unsupported_media"),
                unsupported_media=True,
                language=state.language,
            )
            return TurnOutput(
                new_session_state(state, ()), state.events, reply, masked_trace(state)
            )
        read_answer(state)
        read_retry_answer(state)
        if state.interrupt is not None:
            resume_interrupt(state)
        ctx = state.context()
        t = state.timed("load", t)

        # Recall: tag filter, high-probability journeys, pruning, preselection.
        recalled = await recall(state, ctx, index)
        t = state.timed("recall", t)

        # Round 1: matching batches ∥ node selection of active and predicted journeys ∥ (with
        # speculation on) the reply drafted from predicted decisions (engine.stages.speculation).
        drafting = start_draft(state, recalled)
        step_results = await match_round(state, ctx, recalled)
        t = state.timed("match_round_1", t)

        # Activation, prerequisites, and the supplemental round for unpredicted journeys.
        await activate(state, ctx, recalled, step_results)
        await defer_if_rate_limited(state, drafting, defer=self.defer_rate_limited)
        t = state.timed("match_supplemental", t)

        # Relationships: priority, dependency, entailment.
        resolution = resolve_relationships(state)
        suppress_journeys(state, resolution)
        t = state.timed("relationships", t)

        # Handoff: a handoff step, a guideline's handoff, or the customer asking for a person.
        request = handoff_request(state, resolution)
        if request is not None:
            if drafting is not None:
                state.trace.speculation = await draft_outcome(state, drafting)
                await settle_drafts(state)
            reply = begin_handoff(state, request)
            mask_events(state)
            handing_rule = request.source_id if request.trigger == "guideline" else None
            new_state = new_session_state(state, [handing_rule] if handing_rule else [])
            state.timed("handoff", t)
            return _output(state, new_state, reply)

        # Tools: bounded iterations, journeys re-selected and guidelines re-matched after results.
        await run_tools(state, resolution)
        await defer_if_rate_limited(state, drafting, defer=self.defer_rate_limited)
        release_stale_interrupt(state)
        carry_agreement(state)
        resolution = resolve_relationships(state)
        t = state.timed("tools", t)

        # Composition, then the new session state. Secrets the turn recognised are masked in its
        # events before the reply prompt sees them, and again after it (a model may echo one).
        mask_events(state)
        if drafting is not None:
            state.trace.speculation = await draft_outcome(state, drafting)
        reply, applied = await compose_reply(state, resolution)
        await defer_if_rate_limited(state, None, defer=self.defer_rate_limited)
        await settle_drafts(state)
        mask_events(state)
        reply = next(e for e in state.events if e.id == reply.id)
        notice = version.notice(state.line) if version is not None else None
        if notice:
            reply = _announce(state.events, reply, notice)
        t = state.timed("compose", t)
        new_state = new_session_state(state, applied)
        state.timed("persist_prep", t)
        return _output(state, new_state, reply)

    async def _record_for_person(self, state: TurnState, index: VectorIndex | None) -> TurnOutput:
        """A `human`-mode turn: recall and match as usual (the trace shows what the agent would
        have done), then record the messages; no tool runs and nothing is composed."""
        t = time.perf_counter()
        ctx = state.context()
        recalled = await recall(state, ctx, index)
        step_results = await match_round(state, ctx, recalled)
        await activate(state, ctx, recalled, step_results)
        resolution = resolve_relationships(state)
        suppress_journeys(state, resolution)
        reply = record_for_person(state, resolution)
        mask_events(state)
        state.timed("human_mode", t)
        return _output(state, silent_session_state(state), reply)


def attachments_data(message: InboundMessage) -> list[dict[str, Any]]:
    """A message's attachments as stored on its event and given to tools (JSON, no empty keys)."""
    return [a.model_dump(mode="json", exclude_none=True) for a in message.attachments]


class TurnEngine:
    """Load → run the pipeline → commit, retrying on a racing turn with fresh state. With
    `defer_rate_limited`, a turn the rate-limited model could not answer raises
    `ModelRateLimited` and commits nothing (`TurnPipeline`)."""

    def __init__(
        self,
        agents: AgentStore,
        sessions: SessionStore,
        deps: EngineDeps,
        *,
        index_for: Callable[[AgentSnapshot], Awaitable[VectorIndex | None]] | None = None,
        variables: VariableStore | None = None,
        max_conflict_retries: int = 4,
        defer_rate_limited: bool = False,
    ) -> None:
        self.agents = agents
        self.sessions = sessions
        self.variables = variables
        self.pipeline = TurnPipeline(deps, defer_rate_limited=defer_rate_limited)
        self.index_for = index_for
        self.max_conflict_retries = max_conflict_retries

    async def _masked_traces(
        self, session_id: str, turn_id: str, output: TurnOutput
    ) -> dict[str, dict[str, Any]]:
        """The traces of the earlier turns that may quote an event this turn masked, masked the
        same way: a secret typed before the turn that asked for it is in the recorded prompts
        of the turn it was typed in and of every turn since."""
        if output.scrub_earlier is None:
            return {}
        masked: dict[str, dict[str, Any]] = {}
        for earlier in output.masked_turns:
            trace = await self.sessions.trace(session_id, earlier)
            if trace is not None:
                masked[earlier] = output.scrub_earlier(trace)
        return masked

    async def handle(
        self, session_id: str, messages: Sequence[InboundMessage], *, turn_id: str | None = None
    ) -> TurnOutput:
        turn_id = turn_id or turn_id_for(session_id, messages)
        for _attempt in range(self.max_conflict_retries + 1):
            session = await self.sessions.load(session_id)
            if session is None:
                raise KeyError(f"no session {session_id!r}; create it before sending messages")
            # Unanswered messages, each once (a re-sent copy can share a batch with the original).
            seen: set[str] = set()
            fresh = []
            dropped = 0
            for m in messages:
                if m.event_id not in seen and not session.has_processed(m.event_id):
                    seen.add(m.event_id)
                    # Queued when its sender was erased: never answered (`engine.privacy.erasure`).
                    if session.erased_senders and written_before_erasure(
                        m, session, self.sessions.person_digest
                    ):
                        dropped += 1
                    else:
                        fresh.append(m)
            if not fresh and dropped:
                return dropped_turn(session, turn_id, dropped)
            if not fresh or session.has_committed(turn_id):
                return _replayed(await self._with_full_window(session), turn_id)
            in_flight_before = bool(journeys_in_flight(session))
            version = await self._choose_version(session)
            agent, session = version.agent, version.session
            if self.variables is not None:
                # Per-customer values, fresh every turn (a tool or operator may have set them).
                values = await self.variables.get_variables(
                    agent.id, session.channel, session.customer_id
                )
                session = session.model_copy(update={"variables": {**session.variables, **values}})
            index = await self.index_for(agent) if self.index_for else None
            output = await self.pipeline.run(
                agent, session, fresh, turn_id=turn_id, index=index, version=version
            )
            if dropped:
                output.trace.notes.append(_dropped_note(dropped))
                output = replace(output, dropped=dropped)
            commit = TurnCommit(
                turn_id=turn_id,
                expected_version=session.version,
                state=output.state,
                new_events=output.new_events,
                trace=trace_record(output.trace),
                masked_events=output.masked_events,
                masked_traces=await self._masked_traces(session_id, turn_id, output),
                in_flight_before=in_flight_before,
            )
            try:
                written = await self.sessions.commit(commit)
            except SessionConflict:
                continue  # another turn got there first: recompute on fresh state
            if not written:
                latest = await self.sessions.load(session_id)
                return _replayed(await self._with_full_window(latest or session), turn_id)
            return output
        raise SessionConflict(
            f"session {session_id!r} kept changing under turn {turn_id}; the message stays queued "
            "and will be retried"
        )

    async def _with_full_window(self, session: SessionState) -> SessionState:
        """The session with its window events as committed, channel payload included (a
        replayed turn's reply is delivered again with its buttons): one extra read, on replays
        only (`engine.sessions.history.CHANNEL_PAYLOAD`)."""
        if not session.events:
            return session
        first = session.events[0].offset
        full = await self.sessions.events(session.id, after=first - 1, limit=len(session.events))
        if not full or [e.offset for e in full] != [e.offset for e in session.events]:
            return session
        return session.model_copy(update={"events": tuple(full)})

    async def _choose_version(self, session: SessionState) -> VersionChoice:
        """The published version, or the session's pinned one while a journey is in flight
        (`engine.versioning.pinning`). A pinned version that cannot be read is not fatal: the turn
        runs on the published one and ends what that one cannot continue."""
        published = await self.agents.get(session.agent_id)
        pinned = None
        if session.agent_version and session.agent_version != published.version:
            try:
                pinned = await self.agents.get(session.agent_id, session.agent_version)
            except AgentNotFound:
                pinned = None
        return choose_version(session, published, pinned)


def _output(state: TurnState, new_state: SessionState, reply: Event | None) -> TurnOutput:
    """The turn's result, however it ended (answered, handed off, recorded for a person): its
    rounds counted, its trace masked, and earlier events a secret was masked in rewritten along
    with the traces of their turns (which quote them in their prompts)."""
    state.trace.llm_rounds = len({c.round for c in state.trace.llm_calls})
    state.trace.values_ms = round(state.values_clock[0] * 1000, 3)
    return TurnOutput(
        with_secret_digests(state, new_state),
        state.events,
        reply,
        masked_trace(state),
        masked_events=tuple(state.masked_earlier_events.values()),
        scrub_earlier=earlier_trace_masking(state),
        masked_turns=turns_quoting_masked_events(state),
    )


def _announce(events: list[Event], reply: Event, notice: str) -> Event:
    """The reply with `notice` first: the customer is told, in the engine's own words and
    whatever the model wrote, that a journey they were in has ended."""
    announced = reply.model_copy(update={"text": f"{notice} {reply.text or ''}".strip()})
    events[events.index(reply)] = announced
    return announced


def dropped_turn(session: SessionState, turn_id: str, dropped: int) -> TurnOutput:
    """A turn whose every message was written by someone erased since: nothing is computed,
    written or answered (the queue's record is simply acknowledged)."""
    trace = TurnTrace(
        turn_id=turn_id, session_id=session.id, agent_id=session.agent_id, agent_version=""
    )
    trace.notes.append(_dropped_note(dropped))
    return TurnOutput(session, [], None, trace, dropped=dropped)


def _dropped_note(dropped: int) -> str:
    # No sender id: it is the erased person's.
    return f"dropped {dropped} message(s) written before their sender was erased"


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
