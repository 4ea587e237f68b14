"""Handoff sweep Lambda: a scheduled check (every 5 minutes, template.yaml) for handed-off
sessions no person picked up in time.

A handoff's pickup timeout must fire even if the customer never writes again, and nothing in a
serverless deployment runs in between. Two checks cover it: the customer's next message (the
turn in `human` mode, `engine.stages.handoff`) and this sweep, which reads the open handoffs from
their index (`infra.aws.handoff_index`: one Query, never a scan) and, for each one waiting longer
than its agent's `handoff.pickup_timeout_seconds`, records a ticket with the "no one is available"
notice to the customer (`engine.handoff.record_ticket`) and queues that notice for the turn
worker, which delivers it through the outbox. Both checks write the ticket under the session's
version, so a ticket is recorded once whichever comes first; a sweep that dies half-way is
completed by the next one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from engine.agent_config import HANDOFF_UNAVAILABLE_TAG
from engine.errors import AgentNotFound
from engine.handoff import (
    HandoffStateError,
    approved_notice,
    pickup_overdue,
    record_ticket,
)
from engine.model import AgentSnapshot
from engine.sessions.session import EventSource, SessionState
from infra.handoff_changes import apply_change, change_id_for, person_message_job
from infra.runtime import Runtime, current_runtime

logger = Logger(service="waypoint-handoff-sweep")


class NotDue(HandoffStateError):
    """Taken, ticketed or handed back since the index was read: nothing to do."""


async def sweep(runtime: Runtime, now: datetime | None = None) -> dict[str, int]:
    """Record a ticket for every overdue handoff; returns what was looked at and done."""
    now = now or runtime.clock.now()
    agents: dict[str, AgentSnapshot | None] = {}
    report = {"open": 0, "ticketed": 0, "notices_queued": 0}
    for waiting in await runtime.sessions.waiting_for_person():
        report["open"] += 1
        if waiting.status != "waiting":
            continue
        if waiting.agent_id not in agents:
            try:
                agents[waiting.agent_id] = await runtime.agents.get(waiting.agent_id)
            except AgentNotFound:
                agents[waiting.agent_id] = None
        agent = agents[waiting.agent_id]
        if agent is None:
            continue
        config = agent.config.handoff
        if (
            now - datetime.fromisoformat(waiting.since)
        ).total_seconds() < config.pickup_timeout_seconds:
            continue
        queued = await _ticket(runtime, waiting.session_id, waiting.since, agent, now)
        if queued is None:
            continue
        report["ticketed"] += 1
        report["notices_queued"] += int(queued)
    return report


async def _ticket(
    runtime: Runtime, session_id: str, since: str, agent: AgentSnapshot, now: datetime
) -> bool | None:
    """Record the ticket of one overdue handoff; whether its notice was queued (None: the
    session no longer needed one)."""
    config = agent.config.handoff
    why = f"no one picked it up within {config.pickup_timeout_seconds} s"
    # One id per handoff (its start): concurrent sweeps record one ticket.
    change_id = change_id_for("ticket", session_id, since)

    def make(session: SessionState) -> Any:
        if not pickup_overdue(session, config, now):
            raise NotDue(session.id)
        # In the customer's language (the session's; the agent's default before they wrote).
        language = session.language or agent.config.languages[0]
        notice = approved_notice(agent, HANDOFF_UNAVAILABLE_TAG, language)
        return record_ticket(session, change_id, now, why=why, notice=notice, language=language)

    try:
        applied = await apply_change(runtime.sessions, session_id, change_id, make)
    except HandoffStateError:
        return None
    logger.info("handoff ticket recorded", extra={"session_id": session_id})
    told = next((e for e in applied.events if e.source is EventSource.AGENT and e.text), None)
    job = person_message_job(applied.state, told) if told is not None else None
    if job is None:
        return False
    runtime.enqueue(job)  # type: ignore[arg-type]  # same queue contract
    return True


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    """EventBridge schedule → the sweep's report."""
    runtime = current_runtime()
    return runtime.run(sweep(runtime))
