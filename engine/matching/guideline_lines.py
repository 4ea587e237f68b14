"""How a guideline is listed in a matching prompt, rendered once per agent version.

A turn at 5,000 guidelines lists about a hundred of them and prices each to pack its batches;
rendering each line anew every turn was a measurable share of the engine's overhead. Guidelines
are frozen and belong to an agent version, so the text after the handle is rendered once and
kept; the handle (`g1`, `g2`, … per batch) is the only part that varies.
"""

from __future__ import annotations

from engine.model import Guideline

HANDLE_PRICE = "- [g00]"  # the widest handle the budget reckons with (a batch of < 100)


def guideline_line(handle: str, g: Guideline) -> str:
    """One guideline as listed in a prompt. Multi-line texts (a numbered list in a condition)
    are laid on one line, so the list stays readable and the layout stays one line per part."""
    return f"- [{handle}]{_line_body(g)}"


def _render_body(g: Guideline) -> str:
    line = f" when: {one_line(g.condition)}"
    if g.action:
        line += f"\n    then: {one_line(g.action)}"
    cd = g.customer_dependent
    if cd:
        line += f"\n    customer must: {one_line(cd.customer_action)}"
    return line


# id(guideline) → (the guideline, its line after the handle). Guidelines are frozen and belong to
# an agent version, so a line is rendered once per version, not once per turn and batch; holding
# the guideline keeps its id from being reused while the entry lives.
_BODIES: dict[int, tuple[Guideline, str]] = {}
_BODIES_LIMIT = 50_000


def _line_body(g: Guideline) -> str:
    cached = _BODIES.get(id(g))
    if cached is not None and cached[0] is g:
        return cached[1]
    if len(_BODIES) >= _BODIES_LIMIT:
        _BODIES.pop(next(iter(_BODIES)))
    body = _render_body(g)
    _BODIES[id(g)] = (g, body)
    return body


def one_line(text: str) -> str:
    """Text laid on one line: runs of whitespace, newlines included, become one space."""
    return " ".join(text.split())


def line_cost(g: Guideline) -> int:
    """The characters a guideline's line takes in a prompt, with the widest handle."""
    return len(HANDLE_PRICE) + len(_line_body(g))


__all__ = ["guideline_line", "line_cost", "one_line"]
