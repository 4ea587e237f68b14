"""The layered layout (infra/graphs/layout.py) on graphs of every shape — chains, forks, cycles,
loops, parallel edges, unreachable parts: nothing overlaps, every edge runs from its source's
border to its target's, and the same graph is placed the same way every time."""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from infra.graphs.layout import Box, Layout, LayoutEdge, Placed, layered_layout

Rect = tuple[float, float, float, float]  # left, top, right, bottom


def rect(p: Placed) -> Rect:
    return (p.x - p.width / 2, p.top, p.x + p.width / 2, p.bottom)


def overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def random_graph(seed: int) -> tuple[list[tuple[str, Box]], list[LayoutEdge]]:
    """A journey-like graph: a spine, forks, back edges, loops, a duplicate and a stray node."""
    rng = random.Random(seed)
    count = rng.randint(3, 24)
    nodes = [(f"n{i}", Box(rng.choice([16.0, 34.0, 120.0, 210.0]), rng.choice([16.0, 48.0, 90.0])))
             for i in range(count)]  # fmt: skip
    edges: list[LayoutEdge] = []
    for i in range(1, count):
        edges.append(LayoutEdge(f"n{rng.randrange(i)}", f"n{i}", _label(rng)))
    for _ in range(rng.randint(0, count)):
        a, b = rng.randrange(count), rng.randrange(count)
        edges.append(LayoutEdge(f"n{a}", f"n{b}", _label(rng)))
    if edges:
        edges.append(edges[rng.randrange(len(edges))])  # two transitions between the same steps
    nodes.append(("stray", Box(60.0, 30.0)))
    return nodes, edges


def _label(rng: random.Random) -> Box | None:
    return rng.choice([None, Box(60.0, 19.0), Box(180.0, 45.0)])


def assert_sound(nodes: list[tuple[str, Box]], edges: list[LayoutEdge], layout: Layout) -> None:
    assert set(layout.nodes) == {n for n, _ in nodes}
    boxes = {n: rect(p) for n, p in layout.nodes.items()}
    for (a, ra), (b, rb) in combinations(boxes.items(), 2):
        assert not overlap(ra, rb), f"{a} overlaps {b}"
    labels: list[Rect] = []
    for edge, route in zip(edges, layout.edges, strict=True):
        source, target = layout.nodes[edge.source], layout.nodes[edge.target]
        first, last = route.points[0], route.points[-1]
        assert first[1] in (source.top, source.bottom, source.y - 6) or edge.source == edge.target
        assert last[1] in (target.top, target.bottom, target.y + 6)
        if edge.label is not None:
            assert route.label_at is not None
            x, y = route.label_at
            box = (x - edge.label.width / 2, y - edge.label.height / 2,
                   x + edge.label.width / 2, y + edge.label.height / 2)  # fmt: skip
            for name, node in boxes.items():
                assert not overlap(box, node), f"a label of {edge} covers {name}"
            labels.append(box)
    for a, b in combinations(labels, 2):
        assert not overlap(a, b) or a == b, "two labels overlap"
    for left, top, right, bottom in boxes.values():
        assert left >= 0 and top >= 0 and right <= layout.width and bottom <= layout.height


@pytest.mark.parametrize("seed", range(40))
def test_random_journey_shapes_are_laid_out_without_overlaps(seed: int) -> None:
    nodes, edges = random_graph(seed)
    layout = layered_layout(nodes, edges)
    assert_sound(nodes, edges, layout)
    assert layered_layout(nodes, edges) == layout  # the same graph, the same coordinates


def test_a_chain_runs_straight_down() -> None:
    nodes = [(n, Box(100.0, 40.0)) for n in "abcd"]
    edges = [LayoutEdge(a, b) for a, b in zip("abc", "bcd", strict=True)]
    layout = layered_layout(nodes, edges)
    xs = {p.x for p in layout.nodes.values()}
    ys = [layout.nodes[n].y for n in "abcd"]
    assert len(xs) == 1 and ys == sorted(ys)


def test_a_back_edge_points_up_and_the_ranks_follow_the_forward_edges() -> None:
    nodes = [(n, Box(80.0, 30.0)) for n in ("ask", "check", "fork", "retry", "done")]
    edges = [
        LayoutEdge("ask", "check"),
        LayoutEdge("check", "fork"),
        LayoutEdge("fork", "retry", Box(90.0, 19.0)),
        LayoutEdge("fork", "done", Box(90.0, 19.0)),
        LayoutEdge("retry", "check", Box(120.0, 19.0)),
    ]
    layout = layered_layout(nodes, edges)
    y = {n: p.y for n, p in layout.nodes.items()}
    assert y["ask"] < y["check"] < y["fork"] < y["retry"]
    back = layout.edges[-1]
    assert back.points[0][1] == layout.nodes["retry"].top
    assert back.points[-1][1] == layout.nodes["check"].bottom
    assert_sound(nodes, edges, layout)


def test_barycentre_ordering_removes_an_avoidable_crossing() -> None:
    # given in an order that crosses: a→y, b→x; the lower rank is reordered to x under b
    nodes = [(n, Box(60.0, 30.0)) for n in ("a", "b", "x", "y")]
    layout = layered_layout(nodes, [LayoutEdge("a", "y"), LayoutEdge("b", "x")])
    placed = layout.nodes
    assert (placed["a"].x < placed["b"].x) == (placed["y"].x < placed["x"].x)
