"""A journey as a standalone SVG document, laid out by `infra.graphs.layout`.

The document styles itself (one `<style>` with `wp-` classes) and carries what a page needs to
script it: `data-journey` on the journey's group, `data-step` on every node group,
`data-source` / `data-target` on every edge group. Shapes: chat steps are rounded boxes, tool
steps boxes with side bars, forks diamonds, the start a dot and the end a ringed circle.
"""

from __future__ import annotations

import math

from infra.graphs.elements import DrawnEdge, DrawnNode, JourneyDrawing, NodeRole
from infra.graphs.layout import Box, Layout, LayoutEdge, Placed, RoutedEdge, layered_layout
from infra.graphs.svg_text import (
    FONT,
    FONT_SIZE,
    LINE_HEIGHT,
    attr,
    number,
    text,
    text_width,
    wrap,
)

NODE_TEXT_CHARS = 30
NODE_TEXT_LINES = 4
FORK_TEXT_CHARS = 22
LABEL_CHARS = 26
LABEL_LINES = 3
PAD_X = 12.0
PAD_Y = 8.0
START_RADIUS = 8.0
END_RADIUS = 17.0
HEADER_LINE = 18.0
TITLE_SIZE = 16.0
ARROW_LENGTH = 8.0
ARROW_HALF_WIDTH = 4.0

STYLE = f"""
.wp-graph {{ font-family: {FONT}; font-size: {number(FONT_SIZE)}px; }}
.wp-graph .wp-title {{ font-size: {number(TITLE_SIZE)}px; font-weight: 600; fill: #1f2933; }}
.wp-graph .wp-subtitle {{ fill: #52606d; }}
.wp-graph .wp-shape {{ stroke-width: 1.5; }}
.wp-graph .wp-chat .wp-shape {{ fill: #eef4ff; stroke: #4a6fa5; }}
.wp-graph .wp-tool .wp-shape {{ fill: #fff6e5; stroke: #b7791f; }}
.wp-graph .wp-tool .wp-bar {{ stroke: #b7791f; stroke-width: 1.5; }}
.wp-graph .wp-fork .wp-shape {{ fill: #f5edff; stroke: #7c3aed; }}
.wp-graph .wp-start .wp-shape {{ fill: #3e4c59; stroke: #3e4c59; }}
.wp-graph .wp-end .wp-shape {{ fill: #ffffff; stroke: #3e4c59; }}
.wp-graph .wp-end .wp-ring {{ fill: none; stroke: #3e4c59; stroke-width: 1.5; }}
.wp-graph .wp-end-text {{ fill: #3e4c59; font-size: 10px; }}
.wp-graph .wp-step-id {{ font-weight: 600; fill: #1f2933; }}
.wp-graph .wp-step-text {{ fill: #3e4c59; }}
.wp-graph .wp-line {{ fill: none; stroke: #7b8794; stroke-width: 1.4; }}
.wp-graph .wp-arrowhead {{ fill: #7b8794; }}
.wp-graph .wp-failure .wp-line {{ stroke: #c0392b; stroke-dasharray: 4 3; }}
.wp-graph .wp-failure .wp-arrowhead {{ fill: #c0392b; }}
.wp-graph .wp-edge-label rect {{ fill: #ffffff; stroke: #e4e7eb; }}
.wp-graph .wp-edge-label text {{ fill: #52606d; font-size: 11px; }}
.wp-graph .wp-proposed .wp-line {{ stroke: #e67e22; stroke-width: 2.5; stroke-dasharray: 7 4; }}
.wp-graph .wp-proposed .wp-arrowhead {{ fill: #e67e22; }}
.wp-graph .wp-node.wp-proposed .wp-shape {{ stroke: #e67e22; stroke-width: 2.5;
  stroke-dasharray: 7 4; }}
.wp-graph .wp-kept .wp-line {{ stroke: #1e8e3e; stroke-width: 3; stroke-dasharray: none; }}
.wp-graph .wp-kept .wp-arrowhead {{ fill: #1e8e3e; }}
.wp-graph .wp-node.wp-kept .wp-shape {{ stroke: #1e8e3e; stroke-width: 3; stroke-dasharray: none; }}
.wp-graph .wp-node.wp-current .wp-shape {{ stroke: #d7263d; stroke-width: 4;
  stroke-dasharray: none; }}
.wp-graph .wp-journey-box .wp-shape {{ fill: #f8fafc; stroke: #52606d; stroke-width: 1.5; }}
.wp-graph .wp-requires-edge .wp-line {{ stroke: #52606d; stroke-dasharray: 5 4; }}
.wp-graph .wp-cluster {{ fill: none; stroke: #cbd2d9; stroke-dasharray: 2 3; }}
""".strip()


def journey_svg_document(drawing: JourneyDrawing) -> str:
    """The whole document for one journey."""
    body, width, height = journey_fragment(drawing)
    return svg_document(body, width, height, f"Journey: {drawing.title}")


def svg_document(body: list[str], width: float, height: float, title: str) -> str:
    w, h = number(width), number(height)
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="wp-graph" width="{w}" '
            f'height="{h}" viewBox="0 0 {w} {h}" role="img">',
            f"<title>{text(title)}</title>",
            f"<style>\n{STYLE}\n</style>",
            f'<rect class="wp-background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def journey_fragment(drawing: JourneyDrawing, *, y: float = 0.0) -> tuple[list[str], float, float]:
    """The journey's group (title, requirements, graph) placed at height `y`; its size."""
    header = [(drawing.title, "wp-title")]
    subtitle = f"journey {drawing.journey_id}"
    if drawing.requires:
        named = ", ".join(
            f"{title} ({jid})" if title != jid else jid
            for jid, title in zip(drawing.requires, drawing.requires_titles, strict=True)
        )
        subtitle += f" · requires {named}"
    header.append((subtitle, "wp-subtitle"))
    header_height = 16.0 + HEADER_LINE * len(header)

    shapes = {node.step: _node_box(node) for node in drawing.nodes}
    labels = {i: _label_lines(edge) for i, edge in enumerate(drawing.edges)}
    layout = layered_layout(
        [(node.step, shapes[node.step]) for node in drawing.nodes],
        [
            LayoutEdge(edge.source, edge.target, _label_box(labels[i]))
            for i, edge in enumerate(drawing.edges)
        ],
    )
    width = max(layout.width, max(_header_width(line, css) for line, css in header) + 32)
    requires = " ".join(drawing.requires)
    out = [
        f'<g class="wp-journey" data-journey="{attr(drawing.journey_id)}" '
        f'data-requires="{attr(requires)}" transform="translate(0,{number(y)})">'
    ]
    for k, (line, css) in enumerate(header):
        out.append(
            f'<text class="{css}" x="16" y="{number(16 + HEADER_LINE * (k + 1) - 4)}">'
            f"{text(line)}</text>"
        )
    out.append(f'<g class="wp-diagram" transform="translate(0,{number(header_height)})">')
    out.extend(_edges_svg(drawing.edges, layout, labels))
    for node in drawing.nodes:
        out.extend(_node_svg(node, layout.nodes[node.step], drawing.title))
    out.append("</g>")
    out.append("</g>")
    return out, width, header_height + layout.height


def _header_width(line: str, css: str) -> float:
    if css == "wp-title":  # 16px bold against the 12px the estimate is for
        return text_width(line, bold=True) * TITLE_SIZE / FONT_SIZE
    return text_width(line)


# --------------------------------------------------------------------------------------------------
# Nodes


def _node_lines(node: DrawnNode) -> tuple[str, ...]:
    chars = FORK_TEXT_CHARS if node.role is NodeRole.FORK else NODE_TEXT_CHARS
    lines: list[str] = []
    for line in node.lines:
        lines.extend(wrap(line, chars, NODE_TEXT_LINES))
    return tuple(lines[: NODE_TEXT_LINES + 2])


def _node_box(node: DrawnNode) -> Box:
    if node.role is NodeRole.START:
        return Box(2 * START_RADIUS, 2 * START_RADIUS, pointed=True)
    if node.role is NodeRole.END:
        return Box(2 * END_RADIUS, 2 * END_RADIUS, pointed=True)
    lines = _node_lines(node)
    inner_w = max([text_width(node.heading, bold=True), *(text_width(ln) for ln in lines)])
    inner_h = LINE_HEIGHT * (1 + len(lines))
    if node.role is NodeRole.FORK:  # a diamond around the text box
        return Box(1.6 * inner_w + 2 * PAD_X, 2.0 * inner_h + 2 * PAD_Y, pointed=True)
    bars = 2 * 8.0 if node.role is NodeRole.TOOL else 0.0
    return Box(max(110.0, inner_w + 2 * PAD_X + bars), inner_h + 2 * PAD_Y)


def _node_svg(node: DrawnNode, at: Placed, journey_title: str) -> list[str]:
    classes = " ".join(node.classes)
    out = [f'<g class="{classes}" data-step="{attr(node.step)}">']
    x, y, w, h = at.x, at.y, at.width, at.height
    left, top = x - w / 2, y - h / 2
    if node.role is NodeRole.START:
        out.append(f"<title>{text(f'start of {journey_title}')}</title>")
        out.append(
            f'<circle class="wp-shape" cx="{number(x)}" cy="{number(y)}" r="{number(START_RADIUS)}"/>'
        )
        out.append("</g>")
        return out
    if node.role is NodeRole.END:
        out.append(f"<title>{text(f'end of {journey_title}')}</title>")
        out.append(
            f'<circle class="wp-shape" cx="{number(x)}" cy="{number(y)}" r="{number(END_RADIUS)}"/>'
        )
        out.append(
            f'<circle class="wp-ring" cx="{number(x)}" cy="{number(y)}" '
            f'r="{number(END_RADIUS - 4)}"/>'
        )
        out.append(
            f'<text class="wp-end-text" x="{number(x)}" y="{number(y + 3.5)}" '
            f'text-anchor="middle">end</text>'
        )
        out.append("</g>")
        return out
    out.append(f"<title>{text(_tooltip(node))}</title>")
    if node.role is NodeRole.FORK:
        points = [(x, top), (left + w, y), (x, top + h), (left, y)]
        d = " ".join(f"{number(px)},{number(py)}" for px, py in points)
        out.append(f'<polygon class="wp-shape" points="{d}"/>')
    else:
        radius = 10 if node.role is NodeRole.CHAT else 2
        out.append(
            f'<rect class="wp-shape" x="{number(left)}" y="{number(top)}" width="{number(w)}" '
            f'height="{number(h)}" rx="{radius}"/>'
        )
        if node.role is NodeRole.TOOL:
            for bar_x in (left + 8, left + w - 8):
                out.append(
                    f'<line class="wp-bar" x1="{number(bar_x)}" y1="{number(top)}" '
                    f'x2="{number(bar_x)}" y2="{number(top + h)}"/>'
                )
    lines = _node_lines(node)
    first = y - LINE_HEIGHT * (len(lines) + 1) / 2 + LINE_HEIGHT - 3
    out.append(
        f'<text class="wp-step-id" x="{number(x)}" y="{number(first)}" text-anchor="middle">'
        f"{text(node.heading)}</text>"
    )
    for k, line in enumerate(lines, start=1):
        out.append(
            f'<text class="wp-step-text" x="{number(x)}" y="{number(first + LINE_HEIGHT * k)}" '
            f'text-anchor="middle">{text(line)}</text>'
        )
    out.append("</g>")
    return out


def _tooltip(node: DrawnNode) -> str:
    return "\n".join([f"{node.role.value} step {node.step}", *node.lines])


# --------------------------------------------------------------------------------------------------
# Edges


def _label_lines(edge: DrawnEdge) -> tuple[str, ...]:
    return wrap(edge.label, LABEL_CHARS, LABEL_LINES) if edge.label else ()


def _label_box(lines: tuple[str, ...]) -> Box | None:
    if not lines:
        return None
    width = max(text_width(line) for line in lines) * 11 / 12 + 10
    return Box(width, 13.0 * len(lines) + 6)


def _edges_svg(
    edges: tuple[DrawnEdge, ...], layout: Layout, labels: dict[int, tuple[str, ...]]
) -> list[str]:
    """Every edge's line, then every condition label above all lines (a line drawn later must
    not cross out an earlier edge's condition); a label's group names its edge too."""
    lines: list[str] = []
    tags: list[str] = []
    for i, edge in enumerate(edges):
        route = layout.edges[i]
        ends = f'data-source="{attr(edge.source)}" data-target="{attr(edge.target)}"'
        lines.append(f'<g class="{" ".join(edge.classes)}" {ends}>')
        if edge.label:
            lines.append(f"<title>{text(edge.label)}</title>")
        lines.extend(route_svg(route))
        lines.append("</g>")
        box = _label_box(labels[i])
        if box is not None and route.label_at is not None:
            tags.extend(_label_svg(labels[i], box, route.label_at, ends, edge.label or ""))
    return [*lines, *tags]


def route_svg(route: RoutedEdge) -> list[str]:
    """The line of an edge and its arrowhead at the last point."""
    d = "M " + " L ".join(f"{number(x)} {number(y)}" for x, y in route.points)
    (x0, y0), (x1, y1) = route.points[-2], route.points[-1]
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    bx, by = x1 - ux * ARROW_LENGTH, y1 - uy * ARROW_LENGTH
    left = (bx - uy * ARROW_HALF_WIDTH, by + ux * ARROW_HALF_WIDTH)
    right = (bx + uy * ARROW_HALF_WIDTH, by - ux * ARROW_HALF_WIDTH)
    head = " L ".join(f"{number(px)} {number(py)}" for px, py in ((x1, y1), left, right))
    return [f'<path class="wp-line" d="{d}"/>', f'<path class="wp-arrowhead" d="M {head} Z"/>']


def _label_svg(
    lines: tuple[str, ...], box: Box, at: tuple[float, float], ends: str, condition: str
) -> list[str]:
    x, y = at
    out = [
        f'<g class="wp-edge-label" {ends}>',
        f"<title>{text(condition)}</title>",
        f'<rect x="{number(x - box.width / 2)}" y="{number(y - box.height / 2)}" '
        f'width="{number(box.width)}" height="{number(box.height)}" rx="3"/>',
    ]
    first = y - box.height / 2 + 3 + 10
    for k, line in enumerate(lines):
        out.append(
            f'<text x="{number(x)}" y="{number(first + 13 * k)}" text-anchor="middle">'
            f"{text(line)}</text>"
        )
    out.append("</g>")
    return out
