"""How a validation problem points the author at a fix: the names that do exist, and the one
they probably meant. Shared by the checks of each kind of element (`engine.validation.agent`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def known_hint(kind: str, names: Iterable[str]) -> str:
    """The hint "(known tools: a, b)", or "(no tools are defined)" when there are none."""
    listed = ", ".join(sorted(set(names)))
    return f"(known {kind}: {listed})" if listed else f"(no {kind} are defined)"


def did_you_mean(wanted: str, names: Iterable[str]) -> str:
    """The hint "; did you mean 'x'?" for the closest of `names`; empty when none is close."""
    close = difflib.get_close_matches(wanted, sorted(set(names)), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""
