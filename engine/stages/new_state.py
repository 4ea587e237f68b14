"""The last stage: the session as it stands after this turn.

Applied and pending customer-dependent guidelines are updated from what the reply applied;
journey progress, collected values (secrets masked), the pending interrupt and the idempotency
memory (processed event ids, committed turn ids) and where the customer was last answered
are carried into a new session version.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.matching.journey_graph import compact_path
from engine.model import GuidelineKind
from engine.sessions.history import fold_history
from engine.sessions.session import (
    SessionState,
    remember,
    window_event_ids,
    window_turn_ids,
)
from engine.stages.retry_offers import still_held
from engine.stages.secret_masking import (
    masked_kept_evidence,
    secrets_asked,
    stored_collected,
    stored_confirmation,
)
from engine.stages.state import TurnState


def new_session_state(state: TurnState, applied: Sequence[str]) -> SessionState:
    session = state.session
    applied_ids = list(session.applied_guideline_ids)
    pending = [
        g
        for g in session.pending_customer_guideline_ids
        if g not in state.completed_customer_dependent
    ]
    for gid in state.completed_customer_dependent:
        if gid not in applied_ids:
            applied_ids.append(gid)
    for gid in applied:
        if not state.agent.has_guideline(gid):
            continue  # projected journey steps are tracked by journey paths, not here
        g = state.agent.guideline(gid)
        if g.kind is GuidelineKind.CONTINUOUS:
            continue
        if g.kind is GuidelineKind.CUSTOMER_DEPENDENT and gid not in applied_ids:
            if gid not in pending:
                pending.append(gid)
        elif gid not in applied_ids:
            applied_ids.append(gid)
    collected = stored_collected(state)
    # The new window; events leaving it are kept only as far as later turns need them.
    # A waiting or running journey keeps its request's messages; an ended one lets them go.
    requests = {
        j: offsets
        for j, offsets in state.said_with_request.items()
        if j in state.suspended or j in state.active()
    }
    window, kept = fold_history(
        session.kept_evidence,
        session.events,
        state.events,
        collected,
        requests={o for offsets in requests.values() for o in offsets},
    )
    return session.model_copy(
        update={
            "version": session.version + 1,
            "events": window,
            "kept_evidence": tuple(masked_kept_evidence(state, e) for e in kept),
            # Stored compacted: a journey that loops keeps a bounded path (`compact_path`).
            "journey_paths": {j: compact_path(p) for j, p in state.paths.items()},
            "completed_journeys": tuple(state.completed),
            "completed_by": dict(state.completed_by),
            "suspended_journeys": tuple(state.suspended),
            "said_with_request": requests,
            "applied_guideline_ids": tuple(applied_ids),
            "pending_customer_guideline_ids": tuple(pending),
            "collected": collected,
            "secrets_asked": secrets_asked(state),
            "pending_interrupt": state.interrupt,
            "pending_confirmation": stored_confirmation(state),
            "principals": dict(state.principals),
            "failed_steps": dict(state.failed_steps),
            "retries_not_taken": still_held(state),
            # kept while the journey still stands at the step
            "language": state.language,
            "run_started": {
                j: o
                for j, o in state.run_started.items()
                if j in state.suspended or j in state.active()
            },
            "confirm_steps": {
                j: n for j, n in state.confirm_steps.items() if state.paths.get(j, (None,))[-1] == n
            },
            # Only what the new window does not show itself (`SessionState.has_processed`).
            "processed_event_ids": remember(
                session.processed_event_ids,
                *(m.event_id for m in state.messages),
                known=window_event_ids(window),
            ),
            "committed_turn_ids": remember(
                session.committed_turn_ids, state.turn_id, known=window_turn_ids(window)
            ),
            "agent_version": state.agent.version or session.agent_version,
            "mode": state.mode,
            "handoff": state.handoff,
            "last_reply_to": state.reply_address,
        }
    )
