"""A failed step's retry is offered, not pressed: whether the customer took the offer up.

When a journey's tool step fails, the reply says so and offers to try again; retrying a step
whose tool asks before it runs (a confirmation policy other than `never`) waits for the
customer's yes (`engine.stages.confirmation`). The offer is open for the customer's next message,
read in code: it takes the offer up with a clear yes (or the confirm button) or by asking to try
again ("try again", "retry", "try the order once more"); anything else — another question, a
no — leaves it. An offer not taken up is *held*: the journey stays at the step, but the step
neither runs nor asks for confirmation again on the following turns, until the customer asks to
try again, or the step gets new inputs (the journey moved, or a value it collected changed — a
new attempt, confirmed like any retry). Whatever the model selects or claims, nothing else
releases it. A held step is still a failed step: no reply may claim it
(`engine.stages.reply_claims`).
"""

from __future__ import annotations

import re

from engine.language.requests import asks_to_try_again_in_other_languages
from engine.sessions.session import InboundMessage, latest_values
from engine.stages.confirmation import agreement
from engine.stages.state import TurnState

_TRY_AGAIN = re.compile(
    r"\b(re-?try|re-?do|try\b.{0,40}?\b(again|once more)|do it again|one more (try|time)"
    r"|give it another (try|go|shot))\b"
)


def asks_to_try_again(message: InboundMessage) -> bool:
    """Whether a message asks for the failed action again ("please try again", "retry"); a no
    ("don't try again") never does."""
    text = re.sub(r"\s+", " ", (message.text or "").strip().casefold())
    asked = _TRY_AGAIN.search(text) is not None or asks_to_try_again_in_other_languages(text)
    return agreement(message) is not False and asked


def asks_before_retry(state: TurnState, journey_id: str, node_id: str) -> bool:
    """Whether retrying this failed step waits for the customer's yes (then an offer to retry
    is the customer's to take up; a step that retries without asking simply runs again)."""
    if not state.agent.has_journey(journey_id):
        return False
    journey = state.agent.journey(journey_id)
    if not any(n.id == node_id for n in journey.nodes):
        return False
    return any(
        state.agent.has_tool(t) and state.agent.tool(t).confirmation != "never"
        for t in journey.node(node_id).tools
    )


def read_retry_answer(state: TurnState) -> None:
    """Load stage, after the answer to a pending confirmation is read: does this sender's
    message take up the offer to retry each failed step, or leave it (then the step is held)?"""
    own = state.messages_from(state.sender)
    if not own:
        return
    message = own[-1]
    for jid, node_id in state.failed_steps.items():
        path = state.paths.get(jid, ())
        if not path or path[-1] != node_id or not asks_before_retry(state, jid, node_id):
            continue  # the journey left the step (a return to it is a new attempt)
        held = jid in state.retries_not_taken
        confirmed = state.confirmed
        takes_up = (
            (confirmed is not None and (confirmed.journey_id, confirmed.node_id) == (jid, node_id))
            or asks_to_try_again(message)
            or (agreement(message) is True and not held)
        )
        if takes_up and held:
            state.retries_not_taken.remove(jid)
            state.trace.notes.append(f"the customer asked to try {jid}.{node_id} again")
        elif not takes_up and not held:
            state.retries_not_taken.append(jid)
            state.trace.notes.append(
                f"the customer did not take up the retry of {jid}.{node_id}: held until they ask"
            )


def retry_held(state: TurnState, journey_id: str, node_id: str) -> bool:
    """Tool stage: whether this failed step waits for the customer to ask for it again. A step
    with new inputs this turn (the journey moved, or a value it collected changed) is a new
    attempt: it is released and runs through the gate (a retry still asks first)."""
    if journey_id not in state.retries_not_taken or state.failed_steps.get(journey_id) != node_id:
        return False
    moved = state.paths.get(journey_id) != state.session.journey_paths.get(journey_id)
    before = state.session.collected_values(journey_id)
    if moved or latest_values(state.collected, journey_id) != before:
        state.retries_not_taken.remove(journey_id)
        state.trace.notes.append(f"{journey_id}.{node_id} has new inputs: a new attempt")
        return False
    return True


def held_note(action: str) -> str:
    """What the reply is told while a step is held."""
    return (
        f"Earlier, {action[:1].lower()}{action[1:]} failed and the customer did not take up the "
        "offer to try again: it has NOT happened and is not being retried. Do not offer it again "
        "and never say it is done."
    )


def still_held(state: TurnState) -> tuple[str, ...]:
    """The held retries the session keeps: journeys still at the step that failed."""
    return tuple(
        j
        for j in dict.fromkeys(state.retries_not_taken)
        if j in state.failed_steps and state.paths.get(j, (None,))[-1:] == (state.failed_steps[j],)
    )
