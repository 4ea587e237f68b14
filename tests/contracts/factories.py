"""Small builders for the store contracts: agents, sessions, events and turn commits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from engine.model import AgentSnapshot, Journey, JourneyEdge, JourneyNode, NodeKind, Term
from engine.ports import TurnCommit
from engine.sessions.session import Event, EventKind, EventSource, SessionState, remember

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_journey(
    journey_id: str, title: str, *, description: str = "", steps: tuple[str, ...] = ()
) -> Journey:
    """A linear journey: root → one chat node per step → end."""
    nodes = [JourneyNode(id="root", kind=NodeKind.FORK)]
    edges = []
    previous = "root"
    for i, action in enumerate(steps):
        nodes.append(JourneyNode(id=f"s{i}", kind=NodeKind.CHAT, action=action))
        edges.append(JourneyEdge(id=f"e{i}", source=previous, target=f"s{i}"))
        previous = f"s{i}"
    edges.append(
        JourneyEdge(id="end", source=previous, target=None, condition="the customer is done")
    )
    return Journey(
        id=journey_id,
        title=title,
        description=description,
        conditions=(f"the customer wants to {title.lower()}",),
        root_id="root",
        nodes=tuple(nodes),
        edges=tuple(edges),
    )


def make_agent(agent_id: str = "bank", *, version: str = "", name: str = "Bank") -> AgentSnapshot:
    """The banking concierge, small: transfer, balance and stock journeys plus one term."""
    return AgentSnapshot(
        id=agent_id,
        name=name,
        version=version,
        journeys=(
            make_journey(
                "transfer",
                "Money transfer",
                description="Transfer funds between accounts",
                steps=("Ask for the destination account", "Ask for the amount"),
            ),
            make_journey("balance", "Check balance", steps=("Tell the customer their balance",)),
            make_journey("stock", "Stock price lookup", steps=("Look up the stock price",)),
        ),
        terms=(Term(name="IBAN", description="International bank account number"),),
    )


def new_session(session_id: str = "s1", **fields: Any) -> SessionState:
    return SessionState(id=session_id, agent_id="bank", customer_id="c1", **fields)


def message(
    offset: int,
    text: str,
    *,
    turn_id: str | None = None,
    source: EventSource = EventSource.CUSTOMER,
) -> Event:
    return Event(
        id=f"ev{offset}",
        offset=offset,
        kind=EventKind.MESSAGE,
        source=source,
        created_at=T0 + timedelta(seconds=offset),
        turn_id=turn_id,
        text=text,
    )


def turn_commit(
    state: SessionState, turn_id: str, *texts: str, trace: dict[str, Any] | None = None
) -> TurnCommit:
    """The commit a turn on `state` would make: one agent message per text, version + 1."""
    start = state.next_offset()
    events = tuple(
        message(start + i, text, turn_id=turn_id, source=EventSource.AGENT)
        for i, text in enumerate(texts)
    )
    new_state = state.model_copy(
        update={
            "version": state.version + 1,
            "events": (*state.events, *events),
            "committed_turn_ids": remember(state.committed_turn_ids, turn_id),
        }
    )
    return TurnCommit(
        turn_id=turn_id,
        expected_version=state.version,
        state=new_state,
        new_events=events,
        trace=trace if trace is not None else {"turn": turn_id},
    )
