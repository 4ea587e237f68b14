"""A case as the turn that decides it: the session before the turn, this turn's messages and
tool results, in the engine's own `TurnState` — so every decision is asked through the stage
functions a real turn calls (recall and the packed matching batches, node selection, tool
planning, the action gate), with the prompts a real turn sends.

Where the turn's pipeline would have done more first, the case states its outcome instead:
`applied` (guidelines the agent followed earlier), `pending` (customer-dependent guidelines
waiting for the customer), `path` and `known` (the journey's run so far), `ran` (tools that ran
earlier in this turn, whose results are in view). Recall runs without an embedder: every
journey active in the session is high-probability, the others' scoped guidelines are dropped as
a turn with no vector prediction drops them, and agents this small are never preselected.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bench.eval.cases import T0, EvalCase, agent, history, ran_results, session_before
from engine.clock import FixedClock, SequentialIds
from engine.language.detection import detect
from engine.language.session import session_language
from engine.llm import TurnLLM
from engine.sessions.session import EventKind, EventSource, InboundMessage
from engine.stages.state import EngineDeps, TurnState
from engine.trace import TurnTrace


class _NoModel:
    """The deps' model: never called — the stages ask through the state's `TurnLLM`."""

    async def generate(self, *_args: object, **_kwargs: object) -> object:
        raise AssertionError("the evaluation asks through TurnState.llm")


def turn_state(
    case: EvalCase,
    llm: TurnLLM,
    *,
    pending: tuple[str, ...] = (),
    with_results: bool = True,
) -> TurnState:
    """The state of the case's turn after its load stage: the customer's last messages are this
    turn's (added as the load stage adds them, language detected), everything before them is
    the session's. `with_results`: the tools of `ran` have run this turn (their results and
    events are in the state) — False for the moment before the turn's tools run."""
    snapshot = agent(case.agent)
    session = session_before(case, pending=pending)
    events = history(case)
    this_turn = events[len(session.events) :]
    messages = [InboundMessage(event_id=e.id, text=e.text or "") for e in this_turn]
    start = this_turn[0].created_at if this_turn else T0 + timedelta(seconds=30 * len(events))
    trace = TurnTrace(
        turn_id=f"eval-{case.id}", session_id=session.id, agent_id=snapshot.id,
        agent_version="eval",
    )  # fmt: skip
    deps = EngineDeps(
        llm=_NoModel(),  # type: ignore[arg-type]
        clock=FixedClock(start, step=timedelta(seconds=30)),
        ids=SequentialIds(),
    )
    state = TurnState(
        deps, snapshot, session, messages, turn_id=f"eval-{case.id}", trace=trace, llm=llm
    )
    detected = []
    for message in messages:
        language = detect(message.text)
        detected.append(language)
        state.add_event(
            EventKind.MESSAGE,
            EventSource.CUSTOMER,
            message.text,
            channel_event_id=message.event_id,
            **({"language": language} if language else {}),
        )
    state.language = session_language(session.language, detected, snapshot.config.languages)
    if with_results:
        add_results(state, case)
    return state


def add_results(state: TurnState, case: EvalCase) -> None:
    """The tools of the case's `ran` ran in this turn: their results and events, as the tool
    stage records a successful call."""
    for i, ran in enumerate(ran_results(case)):
        call_id = f"{state.turn_id}:{i}"
        state.tool_results.append(replace(ran, call_id=call_id))
        state.executed_tools.add(ran.tool)
        state.succeeded_tools.add(ran.tool)
        state.add_event(
            EventKind.TOOL,
            EventSource.SYSTEM,
            None,
            tool=ran.tool,
            call_id=call_id,
            arguments=dict(ran.arguments),
            llm_view=ran.data,
            view=None,
            error=None,
            sender=state.sender,
        )
