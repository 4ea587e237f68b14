"""Journey graphs as the node selector sees them: views, pruning, path verification, auto-advance.

Everything here is pure and deterministic. The LLM only *proposes* a walk through the graph; the
functions below decide what actually happens, so every rule that can be checked without reading the
conversation (edges exist, tool steps are not skipped, a fork is never where a turn stops, a
backtrack goes to a step that was really visited) is enforced here and never left to a prompt.

Vocabulary
- A *path* is the journey's history on the session: node ids in the order they were entered; a
  `None` closes a *run* (the journey was exited or completed). The nodes after the last `None` are
  the current run; its last node is the *current step*.
- A *transit* node has nothing for the agent to do and only routes: forks, and the action-less
  entry root. Transit nodes may appear inside a path but are never the step of a turn.
- The action-less root is an entry point, not a step: it is never recorded in a path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from engine.model import CollectedField, Journey, NodeKind

Outcome = Literal["stay", "advance", "backtrack", "exit", "completed"]
Path = tuple[str | None, ...]


# --------------------------------------------------------------------------------------------------
# Views


@dataclass(frozen=True)
class EdgeView:
    """A transition; `target=None` ends the journey."""

    source: str
    target: str | None
    condition: str | None


@dataclass(frozen=True)
class NodeView:
    """One journey node with its display number and both edge directions at hand."""

    id: str
    index: int  # 1-based display number, BFS order from the root
    kind: NodeKind
    action: str | None
    tools: tuple[str, ...]
    customer_dependent: bool
    customer_action: str | None
    collects: tuple[CollectedField, ...]
    outgoing: tuple[EdgeView, ...]
    incoming: tuple[EdgeView, ...]

    @property
    def transit(self) -> bool:
        """Nothing to perform here, only a choice of transition: never the step of a turn."""
        if self.kind is NodeKind.FORK:
            return True
        return self.kind is NodeKind.CHAT and self.action is None and not self.customer_dependent

    @property
    def successors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.target for e in self.outgoing if e.target is not None))

    @property
    def predecessors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.source for e in self.incoming))

    @property
    def exits(self) -> tuple[str | None, ...]:
        """Distinct places this node leads to (`None` = the end). Two edges with different
        conditions to the same target are still one way out."""
        return tuple(dict.fromkeys(e.target for e in self.outgoing))

    @property
    def can_end(self) -> bool:
        """The journey may end right after this node: it has an END edge, or nowhere to go."""
        return not self.outgoing or any(e.target is None for e in self.outgoing)

    def tools_ran(self, executed_tools: Collection[str]) -> bool:
        """Whether this tool step's work is done this turn (any of its tools ran). A tool node
        with no tools has nothing to wait for — definition validation should reject it anyway."""
        return not self.tools or any(t in executed_tools for t in self.tools)

    @property
    def label(self) -> str:
        return f"step {self.index}"


def build_node_views(journey: Journey) -> dict[str, NodeView]:
    """Views of every node, in display order. Edges that point at unknown nodes are ignored here
    (definition validation reports them); they must not crash a live conversation."""
    nodes = {n.id: n for n in journey.nodes}
    edges = [
        EdgeView(e.source, e.target, e.condition)
        for e in journey.edges
        if e.source in nodes and (e.target is None or e.target in nodes)
    ]
    outgoing: dict[str, list[EdgeView]] = {nid: [] for nid in nodes}
    incoming: dict[str, list[EdgeView]] = {nid: [] for nid in nodes}
    for e in edges:
        outgoing[e.source].append(e)
        if e.target is not None:
            incoming[e.target].append(e)

    order = _bfs_order(journey.root_id, list(nodes), outgoing)
    views: dict[str, NodeView] = {}
    for index, nid in enumerate(order, start=1):
        node = nodes[nid]
        dependent = node.customer_dependent
        views[nid] = NodeView(
            id=nid,
            index=index,
            kind=node.kind,
            action=node.action,
            tools=node.tools,
            customer_dependent=dependent is not None and dependent.is_customer_dependent,
            customer_action=dependent.customer_action if dependent else None,
            collects=node.collects,
            outgoing=tuple(outgoing[nid]),
            incoming=tuple(incoming[nid]),
        )
    return views


def _bfs_order(
    root_id: str, nodes: Collection[str], outgoing: dict[str, list[EdgeView]]
) -> list[str]:
    """Root first, then breadth-first along edges in declaration order; unreachable nodes last,
    in declaration order, so every node still gets a stable number."""
    order: list[str] = []
    seen: set[str] = set()
    queue = deque([root_id] if root_id in nodes else [])
    seen.update(queue)
    while queue:
        nid = queue.popleft()
        order.append(nid)
        for e in outgoing[nid]:
            if e.target is not None and e.target not in seen:
                seen.add(e.target)
                queue.append(e.target)
    order.extend(nid for nid in nodes if nid not in seen)
    return order


def index_map(views: dict[str, NodeView]) -> dict[str, str]:
    """Display number (as text) → node id."""
    return {str(v.index): v.id for v in views.values()}


# --------------------------------------------------------------------------------------------------
# Paths


def current_run(path: Sequence[str | None]) -> tuple[str, ...]:
    """The nodes entered since the journey last ended (empty when it never started or ended)."""
    run: list[str] = []
    for nid in path:
        if nid is None:
            run.clear()
        else:
            run.append(nid)
    return tuple(run)


def current_step(path: Sequence[str | None], views: dict[str, NodeView]) -> str | None:
    """The last executed step of a live run, or None when there is no live run (or the stored
    position no longer exists because the journey was edited since)."""
    if not path or path[-1] is None:
        return None
    return path[-1] if path[-1] in views else None


def _stale(path: Sequence[str | None], views: dict[str, NodeView]) -> bool:
    return bool(path) and path[-1] is not None and path[-1] not in views


def _closed(path: Sequence[str | None]) -> Path:
    """The path with its current run ended (idempotent: never two `None`s in a row)."""
    path = tuple(path)
    return path if path and path[-1] is None else (*path, None)


# --------------------------------------------------------------------------------------------------
# Pruning


def prune_nodes(
    journey: Journey,
    views: dict[str, NodeView],
    path: Sequence[str | None],
    max_depth: int,
) -> dict[str, NodeView]:
    """The part of the graph worth showing the LLM this turn.

    Breadth-first from every node of the current run (from the root when there is none), up to
    `max_depth` transitions. A tool step that was not entered in this run is shown but not
    expanded: nothing beyond it can be reached before its tools run. Display order is kept.
    """
    run = [nid for nid in current_run(path) if nid in views]
    starts = list(dict.fromkeys(run)) or ([journey.root_id] if journey.root_id in views else [])
    entered = set(run)
    keep: set[str] = set()
    for start in starts:
        seen = {start}
        queue = deque([(start, 0)])
        while queue:
            nid, depth = queue.popleft()
            keep.add(nid)
            view = views[nid]
            if depth >= max_depth or (view.kind is NodeKind.TOOL and nid not in entered):
                continue
            for nxt in view.successors:
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, depth + 1))
    return {nid: v for nid, v in views.items() if nid in keep}


# --------------------------------------------------------------------------------------------------
# Verification


@dataclass(frozen=True)
class VerifiedStep:
    """Where a journey stands after this turn: exactly one step (or none when it ended)."""

    path: Path  # the new full journey path
    node_id: str | None  # the step for this turn; None when exited or completed
    outcome: Outcome
    repairs: tuple[str, ...] = ()  # what verification fixed, for the trace


@dataclass(frozen=True)
class ProposedWalk:
    """An LLM's proposal, already translated from display numbers to node ids."""

    steps: tuple[str, ...] = ()  # the walk; may or may not start with the current step
    backtrack_to: str | None = None  # set only when the LLM asked to backtrack
    finish: bool = False  # the LLM said the journey is over after the walk


def exit_step(previous_path: Sequence[str | None], note: str = "") -> VerifiedStep:
    """The journey no longer applies: close the run."""
    return VerifiedStep(_closed(previous_path), None, "exit", (note,) if note else ())


@dataclass
class _Walk:
    """Mutable scratch state of one verification; never escapes `verify_walk`."""

    views: dict[str, NodeView]
    executed_tools: Collection[str]
    hold_at: Collection[str]
    nodes: list[str]
    repairs: list[str] = field(default_factory=list)

    def label(self, nid: str) -> str:
        return self.views[nid].label

    def blocker(self, nid: str) -> str | None:
        """Why the walk may not pass `nid` (None when it may)."""
        view = self.views[nid]
        if view.kind is NodeKind.TOOL and not view.tools_ran(self.executed_tools):
            return f"{view.label} is a tool step whose tools have not run"
        if nid in self.hold_at:
            return f"{view.label} got a value that failed validation and must be asked again"
        return None

    def can_finish_at(self, nid: str) -> bool:
        return self.views[nid].can_end and self.blocker(nid) is None

    def extend(self, proposed: Iterable[str]) -> None:
        """Follow the proposal along real edges, repairing a missing connector, stopping at the
        first step that cannot be passed or that does not connect."""
        for nxt in proposed:
            here = self.nodes[-1]
            if nxt not in self.views:
                self.repairs.append(f"dropped unknown step {nxt!r}")
                continue
            if nxt == here and nxt not in self.views[here].successors:
                continue  # a repeated step, not a self-loop: nothing to walk
            reason = self.blocker(here)
            if reason:
                self.repairs.append(f"stopped at {self.label(here)}: {reason}")
                return
            if nxt in self.views[here].successors:
                self.nodes.append(nxt)
                continue
            link = _connector(self.views, here, nxt)
            if link is None:
                self.repairs.append(
                    f"{self.label(nxt)} does not follow {self.label(here)}: "
                    f"stopped at {self.label(here)}"
                )
                return
            self.repairs.append(
                f"inserted {self.label(link)} between {self.label(here)} and {self.label(nxt)}"
            )
            self.nodes.append(link)
            reason = self.blocker(link)
            if reason:
                self.repairs.append(f"stopped at {self.label(link)}: {reason}")
                return
            self.nodes.append(nxt)

    def leave_forks(self) -> bool:
        """A turn never stops on a fork. Walk through forks that have a single way out; if a
        fork needs a choice nobody made, step back to the last real step. Returns True when a
        fork's only way out is the end of the journey."""
        seen: set[str] = set()
        while self.nodes and self.views[self.nodes[-1]].transit and self.nodes[-1] not in seen:
            fork = self.nodes[-1]
            seen.add(fork)
            exits = self.views[fork].exits
            if len(exits) != 1:
                break
            if exits[0] is None:
                return True
            self.nodes.append(exits[0])
            self.repairs.append(
                f"continued through the fork at {self.label(fork)} to {self.label(exits[0])}"
            )
        while self.nodes and self.views[self.nodes[-1]].transit:
            fork = self.nodes.pop()
            self.repairs.append(f"{self.label(fork)} is a fork and cannot be where a turn stops")
        return False


def _connector(views: dict[str, NodeView], a: str, b: str) -> str | None:
    """The single step that links a → c → b, if there is exactly one."""
    if b not in views:
        return None
    links = [c for c in views[a].successors if c in views[b].predecessors]
    return links[0] if len(links) == 1 else None


def verify_walk(
    journey: Journey,
    views: dict[str, NodeView],
    previous_path: Sequence[str | None],
    proposal: ProposedWalk,
    *,
    executed_tools: Collection[str],
    hold_at: Collection[str] = (),
) -> VerifiedStep:
    """Turn a proposed walk into the one legal step for this turn.

    Rules (they hold for any proposal): the walk starts at the current step, at a visited step
    when backtracking, or at the root when no run is live; consecutive steps must be joined by an
    edge (a unique missing connector is inserted, otherwise the walk stops); it never passes a
    tool step whose tools did not run this turn, nor a step in `hold_at`; it never stops on a
    fork; it ends the journey only through an END edge (or at a step with no way out).
    """
    previous = tuple(previous_path)
    here = current_step(previous, views)
    repairs: list[str] = []
    if _stale(previous, views):
        repairs.append(f"stored position {previous[-1]!r} no longer exists; restarted the journey")
        previous = _closed(previous)
    start, backtracking = _start_of_walk(journey, views, previous, here, proposal, repairs)
    if start is None:
        return exit_step(previous, "the journey has no entry step")

    walk = _Walk(views, executed_tools, hold_at, [start], repairs)
    steps = list(proposal.steps)
    if steps and steps[0] == start:
        steps.pop(0)
    walk.extend(steps)

    finished = proposal.finish and walk.can_finish_at(walk.nodes[-1])
    if not finished:
        finished = walk.leave_forks()
    if proposal.finish and not finished:
        if walk.nodes and walk.can_finish_at(walk.nodes[-1]):
            finished = True
        else:
            where = walk.label(walk.nodes[-1]) if walk.nodes else "the start"
            repairs.append(f"ignored the end of the journey: it cannot end after {where}")

    if not walk.nodes:
        if here is None:
            return exit_step(previous, "; ".join([*repairs, "no first step could be chosen"]))
        # only a corrupt stored path ends on a fork; stay rather than invent a branch
        repairs.append(f"no step could be chosen; stayed at {views[here].label}")
        return VerifiedStep(previous, here, "stay", tuple(repairs))

    if backtracking:
        recorded = walk.nodes
    elif here is None and views[start].transit:
        recorded = walk.nodes[1:]  # the action-less root is an entry point, not a step
    elif here is None:
        recorded = walk.nodes
    else:
        recorded = walk.nodes[1:]

    path: Path = (*previous, *recorded)
    if finished:
        return VerifiedStep((*path, None), None, "completed", tuple(repairs))
    outcome: Outcome = "backtrack" if backtracking else ("advance" if recorded else "stay")
    return VerifiedStep(path, walk.nodes[-1], outcome, tuple(repairs))


def _start_of_walk(
    journey: Journey,
    views: dict[str, NodeView],
    previous: Path,
    here: str | None,
    proposal: ProposedWalk,
    repairs: list[str],
) -> tuple[str | None, bool]:
    """Where the walk begins, and whether that is a (legal) backtrack."""
    target = proposal.backtrack_to
    if here is None:
        if target is not None:
            repairs.append("ignored backtracking: the journey has no live run to go back in")
        return (journey.root_id if journey.root_id in views else None), False
    if target is None:
        return here, False
    if target == here:
        repairs.append("backtracking target is the current step: treated as staying there")
        return here, False
    visited = set(current_run(previous))
    if target in visited and target in views and not views[target].transit:
        return target, True
    shown = views[target].label if target in views else repr(target)
    repairs.append(f"refused to backtrack to {shown}: it was not visited in this run")
    return here, False


# --------------------------------------------------------------------------------------------------
# Deterministic moves (no LLM)


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
      it, so the pipeline can run its tools.
    Returns None whenever a judgement is needed.
    """
    previous = tuple(previous_path)
    here = current_step(previous, views)
    if here is None:
        if _stale(previous, views) or journey.root_id not in views:
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
    return _closed(path) if _stale(path, views) else tuple(path)
