"""Masking the turn's secrets in everything it writes (see `engine.privacy.secrets`).

Secret values are recognised while the turn runs: a collected field declared secret (node
selection), or the grounded argument of a secret tool parameter (the action gate). Until the tool
stage is over the clear text is still in the turn's memory, because grounding must find the value
in the customer's message. From composition on, the turn's events are masked — so the reply
prompt never sees the secret — and again after composition, in case the model echoed it.
The new session state (collected values, the pending confirmation) and the trace are masked
where they are built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.privacy.secrets import MASK, TurnSecrets
from engine.sessions.session import (
    CollectedValue,
    Event,
    EventKind,
    EventSource,
    PendingConfirmation,
)
from engine.stages.secret_echoes import recognise_echoes
from engine.stages.state import TurnState
from engine.trace import TurnTrace


def mask_events(state: TurnState) -> None:
    """Mask this turn's secrets in its events (the customer's message where the secret was typed,
    tool events, the reply) and in earlier events of the session: a customer may have typed the
    password before the turn that collected it. Those are rewritten at their offsets when the
    turn commits (`TurnCommit.masked_events`). Secrets of earlier turns that the turn's
    texts quote are recognised first (`engine.stages.secret_echoes`)."""
    recognise_echoes(state)
    if _answers_a_request_for_a_secret(state):
        masked = [_masked_answer(state, e) for e in state.events]
        answers = [e for e, m in zip(state.events, masked, strict=True) if m is not e]
        _remember_values_taken_from(state, answers)
        if _asked_by_an_earlier_version(state):
            # Nothing in this version could collect it (the step is gone, or no longer asks for
            # a secret): the answer is the secret, kept like one — a model that read it cannot
            # echo it later. (An answer a step of this version read and took no secret from is
            # no known secret: "what?" must not mask every later "what".)
            for answer in answers:
                state.secrets.remember(answer.text)
        state.events = masked
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
    there when the turn began): as the turn that asked recorded it (`secrets_asked`), or — for
    a session stored before it did — as this turn's version reads the step."""
    return bool(state.session.secrets_asked) or bool(
        _secrets_asked_at(state, state.session.journey_paths)
    )


def _asked_by_an_earlier_version(state: TurnState) -> bool:
    """Whether the step this turn answers asked for a secret that this turn's version does not
    ask for where the session stands: a publish ended the step or dropped the declaration."""
    return bool(state.session.secrets_asked) and not _secrets_asked_at(
        state, state.session.journey_paths
    )


def secrets_asked(state: TurnState) -> tuple[str, ...]:
    """The secret names the steps the session now stands at ask for, as the session stores them
    for the turn that reads the answer (which may run on another version)."""
    return tuple(sorted(_secrets_asked_at(state, state.paths)))


def _secrets_asked_at(state: TurnState, paths: Mapping[str, tuple[str | None, ...]]) -> set[str]:
    """Secret names asked by the current steps of `paths`: a chat step collecting a secret
    field, or a tool step whose tool takes a secret the customer is asked for while it is
    missing."""
    names: set[str] = set()
    for journey_id, path in paths.items():
        if not path or path[-1] is None or not state.agent.has_journey(journey_id):
            continue
        journey = state.agent.journey(journey_id)
        if not any(n.id == path[-1] for n in journey.nodes):
            continue
        node = journey.node(path[-1])
        names |= {field.name for field in node.collects if field.secret}
        for name in node.tools:
            if not state.agent.has_tool(name):
                continue
            spec = state.agent.tool(name)
            names |= {
                p.name for p in spec.parameters if state.secrets.is_secret_parameter(spec, p.name)
            }
    return names


def _masked_answer(state: TurnState, event: Event) -> Event:
    """The customer's answer to a request for a secret, when the turn did not find the secret
    it holds (the model extracted nothing, or something not in it): masked whole, since the
    model's reading cannot be trusted to say where the secret is."""
    text = event.text or ""
    mine = event.kind is EventKind.MESSAGE and event.source is EventSource.CUSTOMER
    if not mine or not text or state.secrets.scrub_text(text) != text:
        return event
    return event.model_copy(update={"text": MASK})


def _remember_values_taken_from(state: TurnState, answers: list[Event]) -> None:
    """A value collected this turn out of an answer masked whole may be the secret itself,
    reported under another name (a hostile model gives the password as a new username): it is
    masked like the answer — in the reply prompt, the stored values and the trace."""
    texts = [(e.text or "").casefold() for e in answers]
    for c in state.collected:
        mine = c.turn_id == state.turn_id and not c.secret and isinstance(c.value, str)
        if mine and c.value.strip() and any(c.value.strip().casefold() in t for t in texts):
            state.secrets.remember(c.value)


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
    which turn), never its value — nor does a plain field a model filled with this turn's
    secret."""
    return tuple(_stored_value(state.secrets, c) for c in state.collected)


def _stored_value(secrets: TurnSecrets, collected: CollectedValue) -> CollectedValue:
    # Where a value was read quotes the customer's words: a secret typed there is masked too.
    evidence = secrets.scrub_text(collected.evidence)
    if collected.secret:
        if collected.value == MASK and evidence == collected.evidence:
            return collected
        return collected.model_copy(update={"value": MASK, "evidence": evidence})
    value = secrets.scrub(collected.value)
    if value == collected.value and evidence == collected.evidence:
        return collected
    return collected.model_copy(update={"value": value, "evidence": evidence})


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


PROMPT_WITHHELD = "(not kept: this turn handled a secret value)"


def masked_trace(state: TurnState) -> TurnTrace:
    """The trace as persisted and returned by the API: the turn's secret values masked in every
    record (sources such as "password ← customer message #3: '…'", notes, details).

    The prompts and answers of a turn that handled a secret are not kept at all: a prompt quotes
    the customer's words, and an answer masked whole (`_masked_answer`) has no value to scrub
    by — only the absence of the text is sure to hold no secret."""
    trace = state.trace
    if state.secrets.seen or state.masked_earlier_events or _answers_a_request_for_a_secret(state):
        calls = [
            c.model_copy(update={"prompt": PROMPT_WITHHELD, "answer": PROMPT_WITHHELD})
            for c in trace.llm_calls
        ]
    else:
        # A model may name a secret field's value in any turn (a hostile one echoes what it
        # once saw): an answer keeps no value of a field declared secret.
        calls = [
            c.model_copy(update={"answer": _answer_without_secrets(state.secrets, c.answer)})
            for c in trace.llm_calls
        ]
    trace = trace.model_copy(update={"llm_calls": calls})
    if not state.secrets.seen:
        return trace
    return TurnTrace.model_validate(state.secrets.scrub(trace.model_dump()))


def _answer_without_secrets(secrets: TurnSecrets, answer: str) -> str:
    """A model's JSON answer with the value of every secret name masked, whether the name is a
    key (`{"password": …}`) or a named item (`{"name": "password", "value": …}`); an answer
    that is not whole JSON (cut to its bound) is not kept when the agent has secrets."""
    if not secrets.names or not answer:
        return answer
    try:
        parsed = json.loads(answer)
    except ValueError:
        return PROMPT_WITHHELD
    return json.dumps(_mask_named_items(secrets, secrets.scrub(parsed)), ensure_ascii=False)


def _mask_named_items(secrets: TurnSecrets, value: Any) -> Any:
    if isinstance(value, dict):
        named = isinstance(value.get("name"), str) and secrets.is_secret(value["name"])
        return {
            k: MASK if named and k == "value" else _mask_named_items(secrets, v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask_named_items(secrets, v) for v in value]
    return value
