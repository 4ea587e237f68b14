"""Journey graphs as the node selector sees them: node views with display numbers, paths, pruning.

Everything here is pure and deterministic: the shapes every other part of node selection reads
(`engine.matching.journey_walk` verifies a proposed walk over them,
`engine.matching.journey_forced_moves` makes the moves that need no LLM).

Vocabulary
- A *path* is the journey's history on the session: node ids in the order they were entered; a
  `None` closes a *run* (the journey was exited or completed). The nodes after the last `None` are
  the current run; its last node is the *current step*.
- A *transit* node has nothing for the agent to do and only routes: forks, and the action-less
  entry root. Transit nodes may appear inside a path but are never the step of a turn.
- A run the customer *left* mid-way (`exited_run`) can be *resumed*: `resume_run` appends its
  entries again after the `None` that closed it, so a path only ever grows.
- The action-less root is an entry point, not a step: it is never recorded in a path.
- A session stores a path compacted (`compact_path`): its last run, each step's last two
  entries; every reader derives the same from it as from the whole history.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from engine.model import CollectedField, Journey, NodeKind

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


def position_is_stale(path: Sequence[str | None], views: dict[str, NodeView]) -> bool:
    """The stored current step no longer exists: the journey was edited since it was entered."""
    return bool(path) and path[-1] is not None and path[-1] not in views


def _last_run(path: Sequence[str | None]) -> tuple[str, ...]:
    """The entries of the run a `None` closed last (the path must end with that `None`)."""
    run: list[str] = []
    for nid in reversed(path[:-1]):
        if nid is None:
            break
        run.append(nid)
    return tuple(reversed(run))


def exited_run(path: Sequence[str | None], views: dict[str, NodeView]) -> tuple[str, ...]:
    """The steps of the last run when it was left before it could end (the customer exited
    mid-way), so it can be resumed where it stopped; empty while a run is live, when the
    journey never ran, or when the last run ended.

    A run is left at a step (a turn never stands on a fork), so a run whose last entry is a
    transit node ended through it: a fork's END branch. A run whose last step may end the
    journey is not offered either: a run completed there and a run exited there are not told
    apart. Nor is a run whose last entry the journey no longer has (an edit removed the step it
    stood at): where it was left is gone, and an earlier step of it would be a guess."""
    if not path or path[-1] is not None:
        return ()
    run = _last_run(path)
    if not run or run[-1] not in views:
        return ()
    last = views[run[-1]]
    if last.transit or last.can_end:
        return ()
    return tuple(n for n in run if n in views and not views[n].transit)


def resume_run(path: Sequence[str | None], views: dict[str, NodeView]) -> Path:
    """The path with the run the customer left (`exited_run`) opened again: its entries, as the
    path holds them, appended after the `None` that closed it, up to the step it was left at —
    so the path only grows, and the resumed run's steps are the current run's again (visited,
    the step it was left at current). The path unchanged when there is no such run."""
    path = tuple(path)
    left = exited_run(path, views)
    if not left:
        return path
    run = [n for n in _last_run(path) if n in views]
    last = len(run) - 1 - run[::-1].index(left[-1])
    return (*path, *run[: last + 1])


def close_run(path: Sequence[str | None]) -> Path:
    """The path with its current run ended (idempotent: never two `None`s in a row)."""
    path = tuple(path)
    return path if path and path[-1] is None else (*path, None)


# A stored path keeps each step's last two entries in its last run: enough to tell a step entered
# once from one entered again (a loop back to it), which is all any reader asks of the repeats.
VISITS_KEPT = 2


def compact_path(path: Sequence[str | None]) -> Path:
    """The path as a session stores it: its last run only (closed by `None` when it ended), and
    in that run each step's last `VISITS_KEPT` entries, in the order they were entered.

    Everything the engine reads off a path is the same on the compacted one: whether a run is
    live, the current step, the steps of the current run (or of the run the customer left) and
    the last of them, whether a step was entered more than once in this run, and the order of
    each step's last entry (`latest_entries`). Appending to either and compacting again gives
    the same path, so compacting after every turn equals compacting the whole history once.
    The length is at most `path_bound`. Earlier runs are never read: a new run starts empty."""
    path = tuple(path)
    closed = bool(path) and path[-1] is None
    run = current_run(path[:-1] if closed else path)
    entries: dict[str, int] = {}
    kept: list[str] = []
    for nid in reversed(run):
        entries[nid] = entries.get(nid, 0) + 1
        if entries[nid] <= VISITS_KEPT:
            kept.append(nid)
    kept.reverse()
    return (*kept, None) if closed else tuple(kept)


def path_bound(journey: Journey) -> int:
    """The longest path `compact_path` stores for `journey`: each step at most `VISITS_KEPT`
    times, plus the `None` that closes an ended run."""
    return VISITS_KEPT * len(journey.nodes) + 1


def latest_entries(run: Sequence[str]) -> tuple[str, ...]:
    """Each step of a run once, in the order of its last entry (the current step last): the run
    as a prompt shows it, the same for a path and its compaction."""
    return tuple(reversed(dict.fromkeys(reversed(run))))


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
