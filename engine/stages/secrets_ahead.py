"""Secrets typed ahead of their step, read in the match round (`engine.matching.secret_reading`).

"My password is monkey" as a first message: no step asks for it, no journey that collects it is
running, so no node selection reads it — and the turn stored it in clear, its prompts quoted it
in the traces of every turn after, and nothing later masked it unless a step collected the very
same value. So in every turn with the customer's words, an agent that declares a secret asks the
model, beside matching, which values those words give for its secret names. A value the
customer's words hold is this turn's secret (masked in the events, the trace and every stored
text, its digest kept for later echoes), like one a step collected — unless it is a value given
for a plain field: the username the customer is answering the username step with, or the one
the session already holds, is never taken for a password (the customer would be locked out).
"""

from __future__ import annotations

from engine.agent_config import LLMPurpose
from engine.context import TurnContext
from engine.errors import LLMError
from engine.matching.secret_reading import (
    SecretsSaid,
    build_secret_reading_prompt,
    secret_fields,
    typed_secrets,
)
from engine.sessions.session import EventKind, EventSource
from engine.stages.state import TurnState
from engine.values.grounding import CustomerMessage


async def read_secrets_ahead(state: TurnState, ctx: TurnContext) -> None:
    """Read this turn's messages for values typed for a declared secret name; those the
    customer's words hold wait in `state.secrets_typed_ahead` for the masking
    (`remember_secrets_typed_ahead`). No call when the agent declares no secret or the customer
    wrote no words (a button press)."""
    names = state.secrets.names
    texts = _typed_this_turn(state)
    if not names or not texts:
        return
    prompt = build_secret_reading_prompt(ctx, secret_fields(state.agent, names))
    try:
        generation = await state.llm.generate(
            LLMPurpose.READ_SECRETS, prompt, SecretsSaid, label="secrets"
        )
    except LLMError as exc:
        # The turn keeps no prompt (`masked_trace`): one may quote a secret nobody recognised.
        # Never the error's text in the note: it may quote the model's answer, and so the value.
        state.secrets_unread = True
        state.trace.notes.append(f"secrets typed ahead not read: {type(exc).__name__}")
        return
    state.secrets_typed_ahead = typed_secrets(generation.value, names, texts)


def remember_secrets_typed_ahead(state: TurnState) -> None:
    """The values typed ahead for a secret name, as this turn's secrets — but not a value the
    session holds in clear for a plain field, nor one this turn collected as the answer to the
    plain step the journey stood at: that step asked for it, the reading is wrong. (A value a
    model reads for a plain field with the request, or ahead of its step, answers no question:
    it is masked there too, like a secret a model also reports under a plain name.)"""
    if not state.secrets_typed_ahead:
        return
    # Where each journey stood when the customer wrote: the step they were answering.
    stood = {j: path[-1] for j, path in state.session.journey_paths.items() if path}
    plain = {
        str(c.value).strip().casefold()
        for c in state.collected
        if not c.secret
        and (c.turn_id != state.turn_id or (not c.ahead and stood.get(c.journey_id) == c.node_id))
    }
    for name, value in state.secrets_typed_ahead:
        if value.casefold() in plain:
            state.trace.notes.append(f"a value typed for {name} is a plain field's: not masked")
            continue
        state.secrets.remember(value)
        state.trace.notes.append(f"a value typed for {name} is masked (a secret typed ahead)")
    state.secrets_typed_ahead = []


def _typed_this_turn(state: TurnState) -> list[str]:
    """The texts of this turn's customer messages, as stored (masking reads the same)."""
    return [
        e.text or ""
        for e in state.events
        if e.kind is EventKind.MESSAGE
        and e.source is EventSource.CUSTOMER
        and CustomerMessage.of(e).text  # a button press is no words
    ]
