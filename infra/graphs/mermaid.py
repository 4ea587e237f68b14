"""Journeys as Mermaid flowcharts, for pull requests and Markdown docs (GitHub renders them).

Node ids are generated (`s1`, `j2s3`): step ids are the author's words and may hold anything;
every label is quoted, with the characters Mermaid reads as syntax or markup written as its
`#code;` entities, so a condition can never break out of its label.
"""

from __future__ import annotations

import re

from infra.graphs.elements import DrawnEdge, DrawnNode, JourneyDrawing, NodeRole
from infra.graphs.svg_text import printable

CLASS_DEFS = (
    "classDef wpStart fill:#3e4c59,stroke:#3e4c59,color:#ffffff",
    "classDef wpChat fill:#eef4ff,stroke:#4a6fa5",
    "classDef wpTool fill:#fff6e5,stroke:#b7791f",
    "classDef wpFork fill:#f5edff,stroke:#7c3aed",
    "classDef wpEnd fill:#ffffff,stroke:#3e4c59",
    "classDef wpProposed stroke:#e67e22,stroke-width:3px,stroke-dasharray:6 3",
    "classDef wpKept stroke:#1e8e3e,stroke-width:3px",
    "classDef wpCurrent stroke:#d7263d,stroke-width:4px",
)
ROLE_CLASS = {
    NodeRole.START: "wpStart",
    NodeRole.CHAT: "wpChat",
    NodeRole.TOOL: "wpTool",
    NodeRole.FORK: "wpFork",
    NodeRole.END: "wpEnd",
}
MARK_CLASS = {"proposed": "wpProposed", "kept": "wpKept", "current": "wpCurrent"}
EDGE_STYLE = {
    "proposed": "stroke:#e67e22,stroke-width:3px,stroke-dasharray:6 3",
    "kept": "stroke:#1e8e3e,stroke-width:3px",
}
# Characters that would end a quoted label (quote, pipe), start markup (< > & `) or an entity (#).
_ENTITIES = {
    "#": "#35;",
    '"': "#quot;",
    "&": "#amp;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "`": "#96;",
    "%": "#37;",  # `%%` starts a comment or an `%%{init}%%` directive, even inside a label
}


def label(value: str) -> str:
    """`value` as the inside of a quoted Mermaid label."""
    return "".join(_ENTITIES.get(ch, ch) for ch in " ".join(printable(value).split()))


def journey_flowchart(drawing: JourneyDrawing) -> str:
    """One journey: a titled flowchart."""
    lines = [
        "---",
        f"title: {_title(drawing)}",
        "---",
        "flowchart TD",
    ]
    body, links = journey_lines(drawing, prefix="s", indent="  ")
    lines.extend(body)
    lines.extend(f"  {c}" for c in CLASS_DEFS)
    lines.extend(f"  {ln}" for ln in links)
    return "\n".join(lines) + "\n"


def _title(drawing: JourneyDrawing) -> str:
    # front-matter YAML: quoted, with only the characters YAML needs escaped
    requires = f" · requires {', '.join(drawing.requires)}" if drawing.requires else ""
    return _quoted(f"{drawing.title} ({drawing.journey_id}){requires}")


def _quoted(title: str) -> str:
    """A double-quoted YAML scalar (the chart's front matter) on one line."""
    title = re.sub(r"%(?=%)", "% ", " ".join(printable(title).split()))  # no `%%` directive
    return '"' + title.replace("\\", "\\\\").replace('"', '\\"') + '"'


def journey_lines(
    drawing: JourneyDrawing, *, prefix: str, indent: str, first_link: int = 0
) -> tuple[list[str], list[str]]:
    """Node and edge lines of one journey (ids `<prefix><n>`), and the `class` / `linkStyle`
    lines that mark it (link numbers start at `first_link`: Mermaid counts links per chart)."""
    ids = {node.step: f"{prefix}{n}" for n, node in enumerate(drawing.nodes)}
    lines = [f"{indent}{ids[node.step]}{_shape(node)}" for node in drawing.nodes]
    lines.extend(f"{indent}{_link(edge, ids)}" for edge in drawing.edges)
    marks: list[str] = []
    by_class: dict[str, list[str]] = {}
    for node in drawing.nodes:
        by_class.setdefault(ROLE_CLASS[node.role], []).append(ids[node.step])
        for mark in node.marks:
            by_class.setdefault(MARK_CLASS[mark], []).append(ids[node.step])
    order = [*ROLE_CLASS.values(), *MARK_CLASS.values()]  # marks after roles: they win
    marks.extend(f"class {','.join(by_class[c])} {c}" for c in order if c in by_class)
    for mark, style in EDGE_STYLE.items():
        taken = [str(first_link + i) for i, edge in enumerate(drawing.edges) if mark in edge.marks]
        if taken:
            marks.append(f"linkStyle {','.join(taken)} {style}")
    return lines, marks


def _shape(node: DrawnNode) -> str:
    if node.role is NodeRole.START:
        return '(("start"))'
    if node.role is NodeRole.END:
        return '((("end")))'
    text = "<br/>".join(label(part) for part in (node.heading, *node.lines))
    if node.role is NodeRole.FORK:
        return f'{{"{text}"}}'
    if node.role is NodeRole.TOOL:
        return f'[["{text}"]]'
    return f'("{text}")'


def _link(edge: DrawnEdge, ids: dict[str, str]) -> str:
    arrow = "-.->" if edge.failure else "-->"
    source, target = ids[edge.source], ids[edge.target]
    if edge.label:
        return f'{source} {arrow}|"{label(edge.label)}"| {target}'
    return f"{source} {arrow} {target}"


def agent_flowchart(title: str, drawings: list[JourneyDrawing]) -> str:
    """Every journey of an agent as a subgraph, and a dotted `requires` arrow from each journey
    to each journey it requires."""
    lines = ["---", f"title: {_quoted(title)}", "---", "flowchart TD"]
    marks: list[str] = []
    groups = {d.journey_id: f"j{n}" for n, d in enumerate(drawings, start=1)}
    links = 0
    for drawing in drawings:
        group = groups[drawing.journey_id]
        heading = label(f"{drawing.title} ({drawing.journey_id})")
        lines.append(f'  subgraph {group}["{heading}"]')
        lines.append("    direction TB")
        body, styles = journey_lines(drawing, prefix=f"{group}s", indent="    ", first_link=links)
        lines.extend(body)
        lines.append("  end")
        marks.extend(styles)
        links += len(drawing.edges)
    for drawing in drawings:
        for required in drawing.requires:
            if required in groups:
                lines.append(f'  {groups[drawing.journey_id]} -.->|"requires"| {groups[required]}')
    lines.extend(f"  {c}" for c in CLASS_DEFS)
    lines.extend(f"  {m}" for m in marks)
    return "\n".join(lines) + "\n"
