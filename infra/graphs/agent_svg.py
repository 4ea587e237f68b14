"""All journeys of an agent in one SVG: an overview of which journey requires which, then every
journey's own graph, stacked, each framed as a cluster."""

from __future__ import annotations

from infra.graphs.elements import JourneyDrawing
from infra.graphs.layout import Box, LayoutEdge, layered_layout
from infra.graphs.svg import TITLE_SIZE, journey_fragment, route_svg, svg_document
from infra.graphs.svg_text import FONT_SIZE, LINE_HEIGHT, attr, number, text, text_width

REQUIRES = "requires"
CLUSTER_GAP = 28.0
OVERVIEW_TOP = 48.0


def agent_svg_document(agent_id: str, agent_name: str, drawings: list[JourneyDrawing]) -> str:
    """The overview and every journey, top to bottom."""
    body: list[str] = [
        f'<text class="wp-title" x="16" y="30">{text(f"{agent_name} — journeys")}</text>',
        f'<text class="wp-subtitle" x="16" y="48">{text(f"agent {agent_id}")}</text>',
    ]
    overview, width, height = _overview(drawings, top=OVERVIEW_TOP + 8)
    body.extend(overview)
    y = OVERVIEW_TOP + 8 + height + CLUSTER_GAP
    if not drawings:
        body.append(f'<text class="wp-subtitle" x="16" y="{number(y)}">no journeys</text>')
        y += LINE_HEIGHT
    for drawing in drawings:
        fragment, w, h = journey_fragment(drawing, y=y)
        body.append(
            f'<rect class="wp-cluster" x="6" y="{number(y + 4)}" width="{number(w - 12)}" '
            f'height="{number(h - 8)}" rx="8"/>'
        )
        body.extend(fragment)
        width = max(width, w)
        y += h + CLUSTER_GAP
    width = max(
        width, text_width(f"{agent_name} — journeys", bold=True) * TITLE_SIZE / FONT_SIZE + 32
    )
    return svg_document(body, width, y, f"Journeys of {agent_name}")


def _overview(drawings: list[JourneyDrawing], *, top: float) -> tuple[list[str], float, float]:
    """A box per journey and a dashed `requires` arrow to each journey it requires."""
    if not drawings:
        return [], 0.0, 0.0
    known = {d.journey_id for d in drawings}
    boxes = {
        d.journey_id: Box(
            max(text_width(d.title, bold=True), text_width(d.journey_id)) + 28, 2 * LINE_HEIGHT + 14
        )
        for d in drawings
    }
    label = Box(text_width(REQUIRES) * 11 / 12 + 10, 19.0)
    edges = [
        LayoutEdge(d.journey_id, required, label)
        for d in drawings
        for required in d.requires
        if required in known
    ]
    layout = layered_layout([(d.journey_id, boxes[d.journey_id]) for d in drawings], edges)
    out = [f'<g class="wp-overview" transform="translate(0,{number(top)})">']
    tags: list[str] = []  # drawn after every line, as in a journey's graph
    for edge, route in zip(edges, layout.edges, strict=True):
        ends = f'data-source="{attr(edge.source)}" data-target="{attr(edge.target)}"'
        out.append(f'<g class="wp-requires-edge" {ends}>')
        out.append(f"<title>{text(f'{edge.source} requires {edge.target}')}</title>")
        out.extend(route_svg(route))
        out.append("</g>")
        if route.label_at is not None:
            x, y = route.label_at
            tags.append(
                f'<g class="wp-edge-label" {ends}><rect x="{number(x - label.width / 2)}" '
                f'y="{number(y - label.height / 2)}" width="{number(label.width)}" '
                f'height="{number(label.height)}" rx="3"/><text x="{number(x)}" '
                f'y="{number(y + 4)}" text-anchor="middle">{REQUIRES}</text></g>'
            )
    out.extend(tags)
    for drawing in drawings:
        at = layout.nodes[drawing.journey_id]
        left, box_top = at.x - at.width / 2, at.y - at.height / 2
        out.extend(
            [
                f'<g class="wp-journey-box" data-journey="{attr(drawing.journey_id)}">',
                f"<title>{text(f'journey {drawing.journey_id}: {drawing.title}')}</title>",
                f'<rect class="wp-shape" x="{number(left)}" y="{number(box_top)}" '
                f'width="{number(at.width)}" height="{number(at.height)}" rx="6"/>',
                f'<text class="wp-step-id" x="{number(at.x)}" y="{number(at.y - 3)}" '
                f'text-anchor="middle">{text(drawing.title)}</text>',
                f'<text class="wp-step-text" x="{number(at.x)}" y="{number(at.y + 13)}" '
                f'text-anchor="middle">{text(drawing.journey_id)}</text>',
                "</g>",
            ]
        )
    out.append("</g>")
    return out, layout.width, layout.height
