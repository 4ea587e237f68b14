"""Journey graphs, drawn: Mermaid for Markdown and pull requests, SVG for pages and docs.

    journey_mermaid(snapshot, "transfer")                        one journey as a flowchart
    journey_svg(snapshot, "transfer", current="ask_amount",      one journey as an SVG document,
                proposed=("check", "enough"), kept=("check",))   a turn's walk marked on it
    agent_mermaid(snapshot) / agent_svg(snapshot)                every journey, with `requires`
    walk_taken(record.previous_path, record.new_path, root_id)   a traced turn's walk, as `kept`

Pure and deterministic (the same agent gives the same bytes): `elements` says what is drawn,
`layout` places it, `svg` / `agent_svg` / `mermaid` write it. A journey or step that does not
exist raises `UnknownJourney` / `UnknownStep` (both `GraphSubjectNotFound`), naming it.

SVG classes a page can rely on: `wp-node` with one of `wp-start`, `wp-chat`, `wp-tool`,
`wp-fork`, `wp-end` and `data-step="<step id>"` (the end node's step is `END`, the start's the
journey's root id); `wp-edge` (`wp-failure` for a tool's failure transition) with
`data-source` / `data-target` (its condition in a `wp-edge-label` group naming the same
ends, drawn above all lines); `wp-current`, `wp-proposed`, `wp-kept` on the marked nodes and
edges; `wp-journey` with `data-journey` and `data-requires` around each journey.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.model import AgentSnapshot
from infra.graphs.agent_svg import agent_svg_document
from infra.graphs.elements import END_STEP, Highlight, JourneyDrawing, journey_drawing, walk_taken
from infra.graphs.errors import GraphSubjectNotFound, UnknownJourney, UnknownStep
from infra.graphs.mermaid import agent_flowchart, journey_flowchart
from infra.graphs.svg import journey_svg_document

__all__ = [
    "END_STEP",
    "GraphSubjectNotFound",
    "UnknownJourney",
    "UnknownStep",
    "agent_mermaid",
    "agent_svg",
    "journey_mermaid",
    "journey_svg",
    "walk_taken",
]


def journey_mermaid(
    snapshot: AgentSnapshot,
    journey_id: str,
    *,
    current: str | None = None,
    proposed: Sequence[str] = (),
    kept: Sequence[str] = (),
) -> str:
    """One journey as a Mermaid flowchart; `current`, `proposed` and `kept` mark a turn's
    position and walks (step ids)."""
    highlight = Highlight(current, tuple(proposed), tuple(kept))
    return journey_flowchart(journey_drawing(snapshot, journey_id, highlight))


def journey_svg(
    snapshot: AgentSnapshot,
    journey_id: str,
    *,
    current: str | None = None,
    proposed: Sequence[str] = (),
    kept: Sequence[str] = (),
) -> str:
    """One journey as a standalone SVG document, marked like `journey_mermaid`."""
    highlight = Highlight(current, tuple(proposed), tuple(kept))
    return journey_svg_document(journey_drawing(snapshot, journey_id, highlight))


def agent_mermaid(snapshot: AgentSnapshot) -> str:
    """Every journey of the agent as a subgraph, with `requires` arrows between them."""
    return agent_flowchart(f"{snapshot.name} ({snapshot.id}): journeys", _drawings(snapshot))


def agent_svg(snapshot: AgentSnapshot) -> str:
    """Every journey of the agent in one SVG: the `requires` overview, then each graph."""
    return agent_svg_document(snapshot.id, snapshot.name, _drawings(snapshot))


def _drawings(snapshot: AgentSnapshot) -> list[JourneyDrawing]:
    return [journey_drawing(snapshot, j.id) for j in snapshot.journeys]
