"""What a journey graph is made of once it is to be drawn: its nodes and edges, with the text each
shows and the classes a viewer styles them by (`wp-chat`, `wp-current`, `wp-kept`, …).

Both renderers (`infra.graphs.svg`, `infra.graphs.mermaid`) read a `JourneyDrawing`, so a step,
an edge or a highlight means the same thing in an SVG, in Mermaid and on the studio page.

Vocabulary
- The journey's action-less root is drawn as its entry point (`wp-start`), not as a step.
- Every transition that ends the journey, and every `on_failure: END`, leads to one end node
  (`wp-end`, `data-step="END"`).
- A *walk* (`proposed`, `kept`) is a sequence of step ids, as a turn's trace lists them; the steps
  of a walk and the edges between its consecutive steps are marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise

from engine.matching.journey_graph import NodeView, build_node_views
from engine.model import END_OF_JOURNEY, AgentSnapshot, Journey, NodeKind
from infra.graphs.errors import UnknownJourney, UnknownStep

END_STEP = END_OF_JOURNEY  # the id of the end node: the same word the agent document uses
FAILURE_LABEL = "tool failed"


class NodeRole(StrEnum):
    """What a drawn node is; its CSS class is `wp-<role>`."""

    START = "start"
    CHAT = "chat"
    TOOL = "tool"
    FORK = "fork"
    END = "end"


@dataclass(frozen=True)
class DrawnNode:
    """One node: its step id, what it is, and the lines of text it shows."""

    step: str
    role: NodeRole
    heading: str  # the step id (or "start" / "end")
    lines: tuple[str, ...]  # what the step does: its instruction, tools, collected values
    marks: tuple[str, ...] = ()  # "current", "proposed", "kept"

    @property
    def classes(self) -> tuple[str, ...]:
        return ("wp-node", f"wp-{self.role.value}", *(f"wp-{m}" for m in self.marks))


@dataclass(frozen=True)
class DrawnEdge:
    """One transition; `failure` marks where a tool step goes when its tool failed."""

    source: str
    target: str
    label: str | None
    failure: bool = False
    marks: tuple[str, ...] = ()  # "proposed", "kept"

    @property
    def classes(self) -> tuple[str, ...]:
        failure = ("wp-failure",) if self.failure else ()
        return ("wp-edge", *failure, *(f"wp-{m}" for m in self.marks))


@dataclass(frozen=True)
class Highlight:
    """What a turn did on this journey: where it stands and the walks proposed and kept."""

    current: str | None = None
    proposed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


@dataclass(frozen=True)
class JourneyDrawing:
    """A journey ready to draw: nodes in display order (start first, end last), then edges."""

    journey_id: str
    title: str
    requires: tuple[str, ...]  # prerequisite journey ids
    requires_titles: tuple[str, ...]  # their titles, in the same order
    nodes: tuple[DrawnNode, ...]
    edges: tuple[DrawnEdge, ...] = field(default=())


def find_journey(snapshot: AgentSnapshot, journey_id: str) -> Journey:
    """The journey, or `UnknownJourney` naming it and the journeys the agent has."""
    if not snapshot.has_journey(journey_id):
        raise UnknownJourney(snapshot.id, journey_id, [j.id for j in snapshot.journeys])
    return snapshot.journey(journey_id)


def journey_drawing(
    snapshot: AgentSnapshot, journey_id: str, highlight: Highlight | None = None
) -> JourneyDrawing:
    """The drawable form of one journey, marked with `highlight` (every step it names must
    exist, else `UnknownStep` naming it)."""
    journey = find_journey(snapshot, journey_id)
    views = build_node_views(journey)
    marks = _node_marks(journey, views, highlight or Highlight())
    nodes = [_drawn_node(journey, view, marks.get(view.id, ())) for view in views.values()]
    nodes.append(DrawnNode(END_STEP, NodeRole.END, "end", (), marks.get(END_STEP, ())))
    walks = highlight or Highlight()
    edges = [_with_marks(edge, walks) for edge in _edges(journey, views)]
    titles = tuple(
        snapshot.journey(r).title if snapshot.has_journey(r) else r for r in journey.requires
    )
    return JourneyDrawing(
        journey_id=journey.id,
        title=journey.title,
        requires=journey.requires,
        requires_titles=titles,
        nodes=tuple(nodes),
        edges=tuple(edges),
    )


def _node_marks(
    journey: Journey, views: dict[str, NodeView], highlight: Highlight
) -> dict[str, tuple[str, ...]]:
    known = (*views, END_STEP)
    marks: dict[str, list[str]] = {}
    if highlight.current is not None:
        if highlight.current not in views:
            raise UnknownStep(journey.id, highlight.current, list(views))
        marks.setdefault(highlight.current, []).append("current")
    for name, walk in (("proposed", highlight.proposed), ("kept", highlight.kept)):
        for step in walk:
            if step not in known:
                raise UnknownStep(journey.id, step, list(known))
            if name not in marks.setdefault(step, []):
                marks[step].append(name)
    return {step: tuple(m) for step, m in marks.items()}


def _drawn_node(journey: Journey, view: NodeView, marks: tuple[str, ...]) -> DrawnNode:
    if view.id == journey.root_id and view.transit and view.kind is NodeKind.CHAT:
        return DrawnNode(view.id, NodeRole.START, "start", (), marks)
    node = journey.node(view.id)
    lines: list[str] = []
    if view.kind is NodeKind.FORK:
        if node.description:
            lines.append(node.description)
        return DrawnNode(view.id, NodeRole.FORK, view.id, tuple(lines), marks)
    if view.kind is NodeKind.TOOL:
        lines.extend(f"⚙ {tool}" for tool in view.tools)
    if view.action:
        lines.append(view.action)
    if view.collects:
        lines.append("collects " + ", ".join(c.name for c in view.collects))
    role = NodeRole.TOOL if view.kind is NodeKind.TOOL else NodeRole.CHAT
    return DrawnNode(view.id, role, view.id, tuple(lines), marks)


def _edges(journey: Journey, views: dict[str, NodeView]) -> list[DrawnEdge]:
    """Declared transitions in declaration order, then failure transitions in step order."""
    edges = [
        DrawnEdge(e.source, e.target if e.target is not None else END_STEP, e.condition)
        for e in journey.edges
        if e.source in views and (e.target is None or e.target in views)
    ]
    for view in views.values():
        target = journey.node(view.id).on_failure
        if target is not None and (target == END_STEP or target in views):
            edges.append(DrawnEdge(view.id, target, FAILURE_LABEL, failure=True))
    return edges


def _with_marks(edge: DrawnEdge, highlight: Highlight) -> DrawnEdge:
    marks = tuple(
        name
        for name, walk in (("proposed", highlight.proposed), ("kept", highlight.kept))
        if _walk_takes(walk, edge)
    )
    if not marks:
        return edge
    return DrawnEdge(edge.source, edge.target, edge.label, edge.failure, marks)


def _walk_takes(walk: Sequence[str], edge: DrawnEdge) -> bool:
    return any(a == edge.source and b == edge.target for a, b in pairwise(walk))


def walk_taken(
    previous_path: Sequence[str | None], new_path: Sequence[str | None], root_id: str
) -> tuple[str, ...]:
    """The walk a turn took on a journey, from its trace's `previous_path` and `new_path`: the
    step it stood at (the root when the journey was entered) and every step entered since, with
    `END` when the journey completed — ready to pass as `kept`. A path that was rewritten rather
    than extended (a migration, a restart) gives its current run."""
    old, new = list(previous_path), list(new_path)
    if new[: len(old)] == old:
        entered = new[len(old) :]
        standing = old[-1] if old and old[-1] is not None else root_id
    else:
        run: list[str | None] = []
        for step in new:
            run = [] if step is None else [*run, step]
        entered = run + ([None] if new and new[-1] is None else [])
        standing = root_id
    walk = [standing]
    for step in entered:
        walk.append(END_STEP if step is None else step)
    return tuple(walk) if len(walk) > 1 else ()
