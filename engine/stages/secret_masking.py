"""Masking the turn's secrets in everything it writes (see `engine.secrets`).

Secret values are recognised while the turn runs: a collected field declared secret (node
selection), or the grounded argument of a secret tool parameter (the action gate). Until the tool
stage is over the clear text is still in the turn's memory, because grounding must find the value
in the customer's message. From composition on, the turn's events are masked — so the reply
prompt never sees the secret — and again after composition, in case the model echoed it.
The new session state (collected values, the pending confirmation) and the trace are masked
where they are built.
"""

from __future__ import annotations

from engine.secrets import MASK, TurnSecrets
from engine.session import CollectedValue, Event, EventKind, EventSource, PendingConfirmation
from engine.stages.state import TurnState
from engine.trace import TurnTrace


def mask_events(state: TurnState) -> None:
    """Mask this turn's secrets in its events (the customer's message where the secret was typed,
    tool events, the reply) and in earlier events of the session: a customer may have typed the
    password before the turn that collected it. Those are rewritten at their offsets when the
    turn commits (`TurnCommit.masked_events`)."""
    if _answers_a_request_for_a_secret(state):
        state.events = [_masked_answer(state, e) for e in state.events]
    if not state.secrets.seen:
        return
    state.events = [_masked_event(state.secrets, e) for e in state.events]
    earlier = [_masked_event(state.secrets, e) for e in state.session.events]
    changed = [m for m, e in zip(earlier, state.session.events, strict=True) if m is not e]
    if changed:
        state.session = state.session.model_copy(update={"events": tuple(earlier)})
        state.masked_earlier_events.update({e.offset: e for e in changed})


def _answers_a_request_for_a_secret(state: TurnState) -> bool:
    """Whether this turn's messages answer a step that asked for a secret (the journey stood
    there when the turn began): a chat step collecting a secret field, or a tool step whose
    tool takes a secret the customer is asked for while it is missing."""
    for journey_id, path in state.session.journey_paths.items():
        if not path or path[-1] is None or not state.agent.has_journey(journey_id):
            continue
        node = state.agent.journey(journey_id).node(path[-1])
        if any(field.secret for field in node.collects):
            return True
        for name in node.tools:
            if not state.agent.has_tool(name):
                continue
            spec = state.agent.tool(name)
            if any(state.secrets.is_secret_parameter(spec, p.name) for p in spec.parameters):
                return True
    return False


def _masked_answer(state: TurnState, event: Event) -> Event:
    """The customer's answer to a request for a secret, when the turn did not find the secret
    it holds (the model extracted nothing, or something not in it): masked whole, since the
    model's reading cannot be trusted to say where the secret is."""
    text = event.text or ""
    mine = event.kind is EventKind.MESSAGE and event.source is EventSource.CUSTOMER
    if not mine or not text or state.secrets.scrub_text(text) != text:
        return event
    return event.model_copy(update={"text": MASK})


def _masked_event(secrets: TurnSecrets, event: Event) -> Event:
    text = secrets.scrub_text(event.text) if event.text else event.text
    data = secrets.scrub(event.data)
    if text == event.text and data == event.data:
        return event
    return event.model_copy(update={"text": text, "data": data})


def masked_kept_evidence(state: TurnState, event: Event) -> Event:
    """An event kept out of the window as evidence, as the session stores it: with this turn's
    secrets masked (it is rewritten with the session's state every turn)."""
    return _masked_event(state.secrets, event) if state.secrets.seen else event


def stored_collected(state: TurnState) -> tuple[CollectedValue, ...]:
    """Collected values as the session stores them: a secret keeps its record (which step,
    which turn), never its value."""
    return tuple(
        c.model_copy(update={"value": MASK}) if c.secret and c.value != MASK else c
        for c in state.collected
    )


def stored_confirmation(state: TurnState) -> PendingConfirmation | None:
    """The pending confirmation as stored: secret arguments are already masked by name; the
    summary and any other text lose this turn's secret values too."""
    pending = state.pending_confirmation
    if pending is None or not state.secrets.seen:
        return pending
    return pending.model_copy(
        update={
            "arguments": state.secrets.scrub(pending.arguments),
            "summary": state.secrets.scrub_text(pending.summary),
        }
    )


def masked_trace(state: TurnState) -> TurnTrace:
    """The trace as persisted and returned by the API: the turn's secret values masked in every
    record (sources such as "password ← customer message #3: '…'", notes, details)."""
    if not state.secrets.seen:
        return state.trace
    return TurnTrace.model_validate(state.secrets.scrub(state.trace.model_dump()))
