"""Confirmation before consequential actions, and the customer's answer to it.

When a call needs the customer's agreement (its tool's `confirm` policy, an inferred value, or a
retry of a step that failed), the call does not run: the agent states the exact action and
values — an engine-written line, so the values shown are the values that will be used — and
offers yes / no. The next message from the same sender decides, read deterministically (a
button, or a plain yes); anything else drops the request. The agreed call runs only with exactly
the agreed values: a changed value needs a new confirmation.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from engine.language.lines import Say
from engine.privacy.secrets import MASK
from engine.sessions.session import InboundMessage, PendingConfirmation
from engine.stages.state import TurnState
from engine.tools.spec import ToolSpec
from engine.values.grounding import CallGrounding
from engine.values.types import canonical, coerce, show
from engine.values.yes_no import read_yes_no

CONFIRM_CHOICE = "confirm"
CANCEL_CHOICE = "cancel"


def confirm_options(say: Say) -> list[dict[str, str]]:
    """The two buttons of a confirmation, labelled in the turn's language (their ids, which the
    answer is read by, are the same in every language)."""
    return [
        {"id": CONFIRM_CHOICE, "label": say("confirm_yes"), "value": CONFIRM_CHOICE},
        {"id": CANCEL_CHOICE, "label": say("confirm_no"), "value": CANCEL_CHOICE},
    ]


def agreement(message: InboundMessage) -> bool | None:
    """True for a clear yes, False for a clear no, None for anything else."""
    if message.choice == CONFIRM_CHOICE:
        return True
    if message.choice == CANCEL_CHOICE:
        return False
    return read_yes_no(message.text)


def read_answer(state: TurnState) -> None:
    """Load stage: does this turn answer the pending confirmation? Sets `state.confirmed` or
    tells composition the customer declined; the request itself never outlives this turn."""
    pending = state.session.pending_confirmation
    if pending is None:
        return
    own = state.messages_from(pending.sender)
    if pending.agreed:
        if own:  # the agreeing sender answered: the call may run once its secret is given again
            state.confirmed = pending
        return
    verdict = agreement(own[-1]) if own else None
    if verdict is True:
        state.confirmed = pending
        state.trace.notes.append(f"the customer confirmed {pending.summary}")
    elif verdict is False:
        state.notes_for_reply.append(
            f"The customer declined: {pending.summary}. Nothing was done; say so briefly."
        )
        state.trace.notes.append(f"the customer declined {pending.summary}")
        state.declined_tools.add(pending.tool)


def carry_agreement(state: TurnState) -> None:
    """After the tool stage: a call the customer agreed to this turn that could not run because
    its secret is not kept (a yes is never typed together with a password) keeps the agreement
    for the next turn, so the secret typed again runs it without another confirmation."""
    agreed = state.confirmed
    if (
        agreed is None
        or agreed.agreed  # carried once already: one turn to type the secret, not forever
        or state.pending_confirmation is not None
        or agreed.tool in state.executed_tools
        or MASK not in (str(v) for v in agreed.arguments.values())
    ):
        return
    state.pending_confirmation = agreed.model_copy(update={"agreed": True})


def needs_confirmation(
    spec: ToolSpec, grounding: CallGrounding, *, retry: bool
) -> tuple[bool, str]:
    """Whether this call waits for the customer's yes, and why."""
    policy = spec.confirmation
    if policy == "never":
        return False, ""
    if policy == "always":
        return True, "always confirmed"
    if retry:
        return True, "a retry of a step that failed"
    if grounding.inferred:
        whys = [g.describe() for g in grounding.groundings if not g.direct]
        return True, "inferred: " + "; ".join(whys)
    return False, ""


def is_confirmed(state: TurnState, spec: ToolSpec, arguments: dict[str, Any]) -> bool:
    """Whether this turn's yes agreed to exactly this call: the same tool, the same values (as
    typed values: 40 is 40.00), from the same sender."""
    agreed = state.confirmed
    return (
        agreed is not None
        and agreed.tool == spec.name
        and _digest(spec, agreed.arguments) == _digest(spec, _shown(state, spec, arguments))
        and agreed.sender == state.sender
    )


def request_confirmation(
    state: TurnState,
    spec: ToolSpec,
    arguments: dict[str, Any],
    *,
    journey_id: str | None,
    node_id: str | None,
    retry: bool,
) -> PendingConfirmation:
    """Hold the call and ask: the reply states the exact action and offers yes / no."""
    shown = _shown(state, spec, arguments)
    summary = describe_call(state.line, spec, shown)
    pending = PendingConfirmation(
        tool=spec.name,
        arguments=shown,
        summary=summary,
        sender=state.sender,
        journey_id=journey_id,
        node_id=node_id,
        retry=retry,
    )
    state.pending_confirmation = pending
    state.reply_options = confirm_options(state.line)
    state.questions.append(
        "Before anything is done, the customer must confirm an action. Tell them briefly you "
        "need their confirmation; the exact action and a yes/no question are added after your "
        "message automatically, so do not repeat the details and never say it is done."
    )
    return pending


def confirmation_line(say: Say, pending: PendingConfirmation) -> str:
    """The engine's own words for the request: exact values, independent of the model."""
    return say("confirmation_retry" if pending.retry else "confirmation", summary=pending.summary)


def describe_call(say: Say, spec: ToolSpec, arguments: dict[str, Any]) -> str:
    """The action and its exact values, each written one way only ("amount 1000.00 USD", never
    "$1.000"), framed in the language of `say` (the values as `show` writes them)."""
    values = [
        say("call_value", name=p.name, value=show(arguments[p.name]))
        for p in spec.parameters
        if p.name in arguments
    ]
    action = (spec.description or spec.name).rstrip(".")
    if not values:
        return action
    return say("call_summary", action=action, values=say("call_value_separator").join(values))


def _shown(state: TurnState, spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the customer sees and agrees to them, and as the pending confirmation
    stores them: a secret is masked (the customer agrees to the other values; the secret itself
    is never kept, so after the yes it is asked again if this turn does not have it)."""
    return {
        k: MASK if state.secrets.is_secret_parameter(spec, k) else v for k, v in arguments.items()
    }


def _digest(spec: ToolSpec, arguments: dict[str, Any]) -> str:
    """One digest per call's values, read as their parameters' types (a stored confirmation
    holds them as JSON: "40.00" and Decimal("40") are the same amount)."""
    shapes = {p.name: p.shape for p in spec.parameters}
    typed = {}
    for name, value in arguments.items():
        try:
            typed[name] = canonical(coerce(shapes[name], value)) if name in shapes else str(value)
        except ValueError:
            typed[name] = canonical(value)
    blob = json.dumps(typed, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
