"""`waypoint graph AGENT` — draw an agent's journeys as Mermaid (for Markdown and pull requests)
or as a standalone SVG (for docs and pages), with the same renderer as the management API's
`GET /agents/{id}/graph` (`infra.graphs`).

    waypoint graph agent.yaml                          every journey, Mermaid, on stdout
    waypoint graph agent.yaml --journey transfer       one journey
    waypoint graph agent.yaml -o docs/img/agent.svg    SVG (chosen by the file's suffix)
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

from engine.model import AgentSnapshot
from waypoint.agent_source import AgentSource, CliProblem


class GraphFormat(StrEnum):
    MERMAID = "mermaid"
    SVG = "svg"


def chosen_format(requested: GraphFormat | None, output: Path | None) -> GraphFormat:
    """The format asked for; else SVG for an `.svg` output file, Mermaid otherwise."""
    if requested is not None:
        return requested
    if output is not None and output.suffix.lower() == ".svg":
        return GraphFormat.SVG
    return GraphFormat.MERMAID


def render_graph(agent: AgentSnapshot, journey: str | None, fmt: GraphFormat) -> str:
    """The drawing of one journey, or of all of them; a `CliProblem` naming an unknown journey."""
    from infra.graphs import (
        GraphSubjectNotFound,
        agent_mermaid,
        agent_svg,
        journey_mermaid,
        journey_svg,
    )

    try:
        if journey is None:
            return agent_svg(agent) if fmt is GraphFormat.SVG else agent_mermaid(agent)
        if fmt is GraphFormat.SVG:
            return journey_svg(agent, journey)
        return journey_mermaid(agent, journey)
    except GraphSubjectNotFound as exc:
        raise CliProblem(f"{exc}: pass one of them to --journey") from None


def run_graph(
    source: AgentSource, journey: str | None, fmt: GraphFormat | None, output: Path | None
) -> Path | None:
    """Load the agent, draw it, and write the drawing to `output` (stdout when None)."""
    agent, _ = source.load()
    drawing = render_graph(agent, journey, chosen_format(fmt, output))
    if output is None:
        sys.stdout.write(drawing)
        return None
    if output.parent and not output.parent.exists():
        raise CliProblem(f"{output}: the folder {output.parent} does not exist; create it first")
    output.write_text(drawing, encoding="utf-8")
    return output
