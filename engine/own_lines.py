"""The statements the engine writes itself, never the model: what happened to an action the reply
may not claim, and the reply sent when composition failed.

Their words live in the message catalogs (`engine.language.lines`); each function here picks the
line and gives it its values, in the language of `say` (the turn's: `TurnState.line`). `action`
is a tool's description, an imperative ("Transfer money to another account"); the catalog places
it (English: mid-sentence, "before I transfer money …"; others quote it as written).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.language.lines import Say, line


def __getattr__(name: str) -> str:
    # FALLBACK_REPLY: the fallback reply in English (what the offline model recognises as one),
    # read from its catalog when asked for, not when a turn imports this module.
    if name == "FALLBACK_REPLY":
        return line("fallback_reply", "en")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def failed(say: Say, action: str, error: str | None, *, offer_retry: bool) -> str:
    """A tool ran and failed (or its step still sits on a failure from an earlier turn: no
    `error`)."""
    return say(
        "failed_retry" if offer_retry else "failed",
        action=_action(action),
        error=error or say("failure_unknown"),
    )


def awaiting_confirmation(say: Say, action: str) -> str:
    """The call waits for the customer's yes (the confirmation line follows it)."""
    return say("awaiting_confirmation", action=_action(action))


def still_needed(say: Say, action: str, names: Sequence[str]) -> str:
    """The call cannot run until the customer gives these values (parameter names)."""
    values = [say("value_name", name=n.replace("_", " ").strip()) for n in names]
    return say("still_needed", action=_action(action), values=values)


def needs_first(say: Say, action: str, titles: Sequence[str]) -> str:
    """The call's journey waits for journeys this customer has not completed."""
    return say("needs_first", action=_action(action), journeys=list(titles))


def not_yet(say: Say, action: str) -> str:
    """The call is due but was not made (nothing more specific is known)."""
    return say("not_yet", action=_action(action))


def declined(say: Say, action: str) -> str:
    """The customer said no to the call."""
    return say("declined", action=_action(action))


def not_done(say: Say, action: str, why: str = "") -> str:
    """The call was refused: not offered, not valid, not allowed for this sender, not agreed."""
    if not why:
        return say("not_done", action=_action(action))
    return say("not_done_because", action=_action(action), reason=why)


# Reasons `not_done` gives (catalog keys: `not_done(say, action, say(NOT_VALID))`).
NOT_VALID = "reason_not_valid"
NOT_CONFIRMED = "reason_not_confirmed"


def needs_first_reason(say: Say, titles: Sequence[str]) -> str:
    return say("reason_needs_first", journeys=list(titles))


def _action(action: str) -> str:
    """ "Transfer money to another account." → "Transfer money to another account"."""
    return action.strip().rstrip(".").strip()
