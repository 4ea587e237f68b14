"""Secrets of earlier turns: recognised by their keyed digests, remembered for later ones.

A turn masks the secret values it handled and forgets them (`engine.stages.secret_masking`). The
session keeps a keyed digest of each (`engine.privacy.digests`), so that a later turn recognises
one a model echoes — or the customer types again — in anything it is about to store: its events
(the reply included), the values it collected, the pending confirmation, the trace. A value
recognised so is this turn's secret from then on, masked by value like one typed now.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.privacy.digests import echoes_in, remembered, session_key
from engine.privacy.secrets import texts_in
from engine.sessions.session import SecretDigests, SessionState
from engine.stages.state import TurnState


def recognise_echoes(state: TurnState) -> None:
    """Remember, as this turn's secrets, the earlier secrets that what the turn stores quotes."""
    kept = state.session.secret_digests
    key = state.deps.secret_key
    if kept is None or not kept.digests or key is None:
        return
    digests = frozenset(kept.digests)
    salted = session_key(key, kept.salt)
    for text in _texts_to_store(state):
        if text in state.read_for_echoes:
            continue  # read before composition already
        state.read_for_echoes.add(text)
        for echo in echoes_in(salted, digests, text):
            state.secrets.remember(echo)  # as written there, the punctuation touching it too
            state.secrets.remember(_bare(echo))  # and wherever else it stands


def _texts_to_store(state: TurnState) -> Iterator[str]:
    for event in state.events:
        if event.text:
            yield event.text
        yield from texts_in(event.data)
    for collected in state.collected:
        if collected.turn_id == state.turn_id and isinstance(collected.value, str):
            yield collected.value
    pending = state.pending_confirmation
    if pending is not None:
        yield pending.summary
        yield from texts_in(pending.arguments)
    # The trace but its prompts: a prompt quotes only what is above, and a turn that handled a
    # secret keeps none (`masked_trace`).
    yield from texts_in(
        state.trace.model_dump(mode="json", exclude={"llm_calls": {"__all__": {"prompt"}}})
    )


def _bare(echo: str) -> str:
    start, end = 0, len(echo)
    while start < end and not echo[start].isalnum():
        start += 1
    while end > start and not echo[end - 1].isalnum():
        end -= 1
    return echo[start:end]


def with_secret_digests(state: TurnState, session: SessionState) -> SessionState:
    """The session as it is stored after this turn, keeping the digests of the turn's secret
    values too (none without a key: a deployment without one keeps nothing to guess against)."""
    key = state.deps.secret_key
    if key is None or not state.secrets.seen:
        return session
    kept = session.secret_digests or SecretDigests(salt=state.deps.ids.new_id("salt_"))
    # Sorted: the same turn keeps the same digests in the same order on every container.
    digests = remembered(kept.digests, session_key(key, kept.salt), sorted(state.secrets.values))
    if digests == kept.digests:
        return session  # nothing new (or nothing a later turn could recognise)
    return session.model_copy(
        update={"secret_digests": kept.model_copy(update={"digests": digests})}
    )
