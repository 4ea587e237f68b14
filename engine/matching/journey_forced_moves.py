"""Forced moves: where a journey goes when the graph leaves no choice, without an LLM call.

`auto_return` takes the single way out of a tool step whose tools ran (or enters a journey whose
root leads straight into a tool step); `entry_step` enters a journey whose first step is
unambiguous. Both answer None whenever a judgement about the conversation is needed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from engine.matching.journey_graph import (
    NodeView,
    Path,
    close_run,
    current_step,
    exited_run,
    position_is_stale,
)
from engine.matching.journey_walk import VerifiedStep
from engine.model import Journey, NodeKind


def _single_exit_chain(views: dict[str, NodeView], start: str) -> tuple[list[str], bool] | None:
    """From `start` (just entered), walk through transit nodes that have exactly one way out.

    Returns (entered nodes, ended) — `ended` when a single way out was the END — or None when a
    transit node needs a real choice (the LLM's job)."""
    chain = [start]
    seen: set[str] = set()
    while views[chain[-1]].transit:
        nid = chain[-1]
        exits = views[nid].exits
        if nid in seen or len(exits) != 1:
            return None
        seen.add(nid)
        if exits[0] is None:
            return chain, True
        chain.append(exits[0])
    return chain, False


def auto_return(
    journey: Journey,
    views: dict[str, NodeView],
    previous_path: Sequence[str | None],
    executed_tools: Collection[str],
) -> VerifiedStep | None:
    """Advance without asking the LLM when the graph leaves no choice.

    - The current step is a tool step whose tools ran this turn and it has one way out: take it,
      walking through single-exit forks (completed when that way is the END).
    - No live run and the root leads (through single-exit forks) straight into a tool step: enter
      it, so the pipeline can run its tools — unless the customer left a run mid-way: whether
      they resume it or start afresh is a judgement.
    Returns None whenever a judgement is needed.
    """
    previous = tuple(previous_path)
    here = current_step(previous, views)
    if here is None:
        if position_is_stale(previous, views) or journey.root_id not in views:
            return None
        if exited_run(previous, views):
            return None
        root = views[journey.root_id]
        if root.kind is NodeKind.TOOL:
            return VerifiedStep((*previous, root.id), root.id, "advance")
        found = _single_exit_chain(views, root.id)
        if found is None or found[1] or views[found[0][-1]].kind is not NodeKind.TOOL:
            return None
        entered = found[0][1:] if root.transit else found[0]
        return VerifiedStep((*previous, *entered), entered[-1], "advance")

    node = views[here]
    if node.kind is not NodeKind.TOOL or not node.tools_ran(executed_tools):
        return None
    if len(node.exits) != 1:
        return None
    target = node.exits[0]
    if target is None:
        return VerifiedStep((*previous, None), None, "completed")
    found = _single_exit_chain(views, target)
    if found is None:
        return None
    chain, ended = found
    if ended:
        return VerifiedStep((*previous, *chain, None), None, "completed")
    return VerifiedStep((*previous, *chain), chain[-1], "advance")


def entry_step(
    journey: Journey,
    views: dict[str, NodeView],
    *,
    previous_path: Sequence[str | None] = (),
    known_fields: Collection[str] = (),
) -> VerifiedStep | None:
    """Enter a journey without an LLM call, when its first step is unambiguous.

    The root leads — through unconditional, single-exit forks — to exactly one chat step, and
    nothing suggests the customer may be past it: when every field that step collects is already
    known, the customer might have answered it, so the LLM should decide. `previous_path` is
    only needed when re-entering a journey that ended before.
    """
    if journey.root_id not in views or current_step(previous_path, views) is not None:
        return None
    root = views[journey.root_id]
    if not root.transit:
        first = root.id
        entered = [root.id]
    else:
        found = _single_exit_chain(views, root.id)
        if found is None or found[1]:
            return None
        entered = found[0][1:]
        if any(e.condition for nid in found[0][:-1] for e in views[nid].outgoing):
            return None  # a conditioned entry is a judgement about the conversation
        first = entered[-1]
    view = views[first]
    if view.kind is not NodeKind.CHAT or view.transit:
        return None
    if view.collects and all(f.name in known_fields for f in view.collects):
        return None
    return VerifiedStep((*_closed_if_stale(previous_path, views), *entered), first, "advance")


def _closed_if_stale(path: Sequence[str | None], views: dict[str, NodeView]) -> Path:
    return close_run(path) if position_is_stale(path, views) else tuple(path)
