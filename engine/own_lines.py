"""The lines the engine writes itself, never the model: what happened to an action the reply
may not claim, and the reply sent when composition failed.

They are kept here, and only here, so that moving them into per-language message catalogs is a
change of this module alone. `action` is a tool's description, an imperative ("Transfer money
to another account"); each line places it where an imperative reads ("before I …", "to …").
"""

from __future__ import annotations

from collections.abc import Sequence

FALLBACK_REPLY = (
    "Sorry — I couldn't finish that just now. Your message is saved; please try again in a moment."
)


def failed(action: str, error: str, *, offer_retry: bool) -> str:
    """A tool ran and failed (or its step still sits on a failure from an earlier turn)."""
    again = " Would you like me to try again?" if offer_retry else ""
    return f"Sorry — {_verb(action)} did not happen ({error}).{again}"


def awaiting_confirmation(action: str) -> str:
    """The call waits for the customer's yes (the confirmation line follows it)."""
    return f"Nothing has been done yet — I need your confirmation before I {_verb(action)}."


def still_needed(action: str, names: Sequence[str]) -> str:
    """The call cannot run until the customer gives these values."""
    return f"Nothing has been done yet — to {_verb(action)}, I still need {_listed(names)}."


def needs_first(action: str, titles: Sequence[str]) -> str:
    """The call's journey waits for journeys this customer has not completed."""
    return (
        f"Nothing has been done yet — before I can {_verb(action)}, we need to do this first: "
        f"{_joined(titles)}."
    )


def not_yet(action: str) -> str:
    """The call is due but was not made (nothing more specific is known)."""
    return f"Nothing has been done yet — {_verb(action)} has not happened."


def declined(action: str) -> str:
    """The customer said no to the call."""
    return f"Nothing was done — as you asked, I did not {_verb(action)}."


def not_done(action: str, why: str = "") -> str:
    """The call was refused: not offered, not valid, not allowed for this sender, not agreed."""
    reason = f" ({why})" if why else ""
    return f"Nothing was done — {_verb(action)} did not happen{reason}."


# Reasons `not_done` gives.
NOT_VALID = "the details given were not valid"
NOT_CONFIRMED = "it was not confirmed"


def needs_first_reason(titles: Sequence[str]) -> str:
    return f"it needs {_joined(titles)} first"


def _verb(action: str) -> str:
    """ "Transfer money to another account." → "transfer money to another account"."""
    action = action.strip().rstrip(".")
    return f"{action[:1].lower()}{action[1:]}"


def _listed(names: Sequence[str]) -> str:
    """Parameter names as things to give: "to_account_id", "amount" → "the to account id and
    the amount"."""
    return _joined([f"the {n.replace('_', ' ').strip()}" for n in names])


def _joined(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"
