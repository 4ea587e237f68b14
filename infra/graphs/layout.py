"""A layered (Sugiyama-style) layout for small directed graphs, deterministic to the pixel.

Steps, each plain and bounded: break cycles (edges back to a node on the depth-first stack are
laid out reversed), rank by longest path, put a dummy point on every rank a long edge crosses,
order each rank by barycentre sweeps (keeping the order with the fewest crossings), then place
x by pulling every item towards its neighbours without overlapping. Edge labels sit in the gap
above the first point their edge reaches, and the item there is made wide enough to hold them.

No randomness and no hash order: the same graph always gives the same coordinates, which the
golden SVGs rely on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]

SWEEPS = 12  # barycentre passes (down + up each); small graphs settle in a few
PULLS = 8  # coordinate passes towards the neighbours' mean
DUMMY_WIDTH = 16.0
LABEL_PAD = 6.0  # between a label and the item it sits above
SELF_LOOP = 22.0  # how far a loop sticks out to the right of its node
PORT_GAP = 14.0  # between the ends of edges that meet one flat side of a node
POINTED_PORT_GAP = 5.0  # the same at the tip of a circle or a diamond
PORT_MARGIN = 12.0  # kept free at each corner of a side


@dataclass(frozen=True)
class Box:
    width: float
    height: float
    # A node whose top and bottom are a point (a circle, a diamond): edges meet there, close
    # together, instead of spread along a flat side.
    pointed: bool = False


@dataclass(frozen=True)
class LayoutEdge:
    source: str
    target: str
    label: Box | None = None


@dataclass(frozen=True)
class Placed:
    """A node's centre and size."""

    x: float
    y: float
    width: float
    height: float

    @property
    def top(self) -> float:
        return self.y - self.height / 2

    @property
    def bottom(self) -> float:
        return self.y + self.height / 2


@dataclass(frozen=True)
class RoutedEdge:
    """Points in the edge's own direction (last point: where the arrow ends); the label's centre."""

    points: tuple[Point, ...]
    label_at: Point | None


@dataclass(frozen=True)
class Layout:
    nodes: dict[str, Placed]
    edges: tuple[RoutedEdge, ...]  # in the order of the edges given
    width: float
    height: float


@dataclass
class _Chain:
    """One edge as laid out: upper end, dummies, lower end (reversed when it points upwards)."""

    index: int
    items: list[str]  # node ids and dummy ids, from the upper rank to the lower
    reversed: bool
    label: Box | None


def layered_layout(
    nodes: Sequence[tuple[str, Box]],
    edges: Sequence[LayoutEdge],
    *,
    node_gap: float = 36.0,
    rank_gap: float = 40.0,
    margin: float = 16.0,
) -> Layout:
    """Coordinates for `nodes` (in their given order when nothing else decides) and `edges`."""
    order = {node_id: i for i, (node_id, _) in enumerate(nodes)}
    sizes = dict(nodes)
    real = [e for e in edges if e.source in order and e.target in order]
    back = _back_edges(list(order), real)
    oriented = [
        (e.target, e.source) if (i in back) else (e.source, e.target)
        for i, e in enumerate(real)
        if e.source != e.target
    ]
    rank = _longest_path_ranks(list(order), oriented)

    chains: list[_Chain] = []
    widths: dict[str, float] = {n: b.width for n, b in sizes.items()}
    heights: dict[str, float] = {n: b.height for n, b in sizes.items()}
    item_rank: dict[str, int] = dict(rank)
    for i, e in enumerate(real):
        if e.source == e.target:
            continue
        upper, lower = (e.target, e.source) if i in back else (e.source, e.target)
        items = [upper]
        for r in range(rank[upper] + 1, rank[lower]):
            dummy = f"\0{i}:{r}"
            items.append(dummy)
            item_rank[dummy] = r
            widths[dummy] = DUMMY_WIDTH
            heights[dummy] = 0.0
        items.append(lower)
        chains.append(_Chain(i, items, i in back, e.label))

    # Labels sit above the first item their chain reaches; that item must be wide enough.
    labels_into: dict[str, list[_Chain]] = {}
    for chain in chains:
        if chain.label is not None:
            labels_into.setdefault(chain.items[1], []).append(chain)
            widths[chain.items[1]] = max(widths[chain.items[1]], chain.label.width)

    # A loop sticks out to the right of its node: room on both sides keeps the node centred.
    for e in real:
        if e.source == e.target:
            widths[e.source] += 2 * _loop_reach(e)

    layers = _initial_layers(item_rank, order, chains)
    layers = _order_layers(layers, chains)
    xs = _x_coordinates(layers, chains, widths, node_gap)

    ys: dict[str, float] = {}
    tops: list[float] = []
    top = margin
    for layer in layers:
        above = max(
            (
                sum(c.label.height + LABEL_PAD for c in labels_into.get(item, ()) if c.label)
                for item in layer
            ),
            default=0.0,
        )
        top += (rank_gap + above) if tops else 0.0
        tops.append(top)
        height = max((heights[item] for item in layer), default=0.0)
        for item in layer:
            ys[item] = top + height / 2
        top += height

    left = min((xs[n] - widths[n] / 2 for n in xs), default=0.0)
    shift = margin - left
    placed = {n: Placed(xs[n] + shift, ys[n], sizes[n].width, sizes[n].height) for n in order}
    ports = _ports(chains, placed, sizes, xs, shift)
    routes = _routes(real, chains, placed, ports, xs, ys, shift, labels_into, tops, item_rank)
    right = max((xs[n] + shift + widths[n] / 2 for n in xs), default=0.0)
    return Layout(placed, routes, right + margin, top + margin)


def _loop_reach(edge: LayoutEdge) -> float:
    """How far a loop and its label reach beyond the right side of their node."""
    return SELF_LOOP + 4 + (edge.label.width if edge.label else 0.0)


def _back_edges(nodes: list[str], edges: Sequence[LayoutEdge]) -> set[int]:
    """Indices of edges that close a cycle in a depth-first walk from each node in order."""
    outgoing: dict[str, list[int]] = {n: [] for n in nodes}
    for i, e in enumerate(edges):
        outgoing[e.source].append(i)
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    back: set[int] = set()
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(outgoing[start]))]
        while stack:
            node, pending = stack[-1]
            step = next(pending, None)
            if step is None:
                state[node] = 2
                stack.pop()
                continue
            target = edges[step].target
            if state.get(target) == 1:
                back.add(step)
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(outgoing[target])))
    return back


def _longest_path_ranks(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    indegree = {n: 0 for n in nodes}
    outgoing: dict[str, list[str]] = {n: [] for n in nodes}
    for source, target in edges:
        outgoing[source].append(target)
        indegree[target] += 1
    rank = {n: 0 for n in nodes}
    ready = [n for n in nodes if indegree[n] == 0]
    while ready:
        node = ready.pop(0)
        for target in outgoing[node]:
            rank[target] = max(rank[target], rank[node] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    return rank


def _initial_layers(
    item_rank: dict[str, int], order: dict[str, int], chains: list[_Chain]
) -> list[list[str]]:
    """Nodes in their given order, each dummy right after where its chain starts."""
    position: dict[str, float] = {item: float(i) for item, i in order.items()}
    for chain in chains:
        for k, item in enumerate(chain.items[1:-1], start=1):
            position[item] = order[chain.items[0]] + k / 1000 + chain.index / 1_000_000
    depth = max(item_rank.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for item in sorted(item_rank, key=lambda i: position[i]):
        layers[item_rank[item]].append(item)
    return layers


def _segments(chains: list[_Chain]) -> list[tuple[str, str]]:
    return [(c.items[k], c.items[k + 1]) for c in chains for k in range(len(c.items) - 1)]


def _order_layers(layers: list[list[str]], chains: list[_Chain]) -> list[list[str]]:
    segments = _segments(chains)
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for a, b in segments:
        down.setdefault(a, []).append(b)
        up.setdefault(b, []).append(a)
    best = [list(layer) for layer in layers]
    fewest = _crossings(best, segments)
    current = [list(layer) for layer in layers]
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        ranks = range(1, len(current)) if downward else range(len(current) - 2, -1, -1)
        for r in ranks:
            fixed = current[r - 1] if downward else current[r + 1]
            where = {item: i for i, item in enumerate(fixed)}
            neighbours = up if downward else down
            current[r] = _by_barycentre(current[r], neighbours, where)
        count = _crossings(current, segments)
        if count < fewest:
            best, fewest = [list(layer) for layer in current], count
    return best


def _by_barycentre(
    layer: list[str], neighbours: dict[str, list[str]], where: dict[str, int]
) -> list[str]:
    def key(entry: tuple[int, str]) -> tuple[float, int]:
        i, item = entry
        linked = [where[n] for n in neighbours.get(item, ()) if n in where]
        return (sum(linked) / len(linked) if linked else float(i), i)

    return [item for _, item in sorted(enumerate(layer), key=key)]


def _crossings(layers: list[list[str]], segments: list[tuple[str, str]]) -> int:
    where = {item: i for layer in layers for i, item in enumerate(layer)}
    rank = {item: r for r, layer in enumerate(layers) for item in layer}
    by_rank: dict[int, list[tuple[int, int]]] = {}
    for a, b in segments:
        by_rank.setdefault(rank[a], []).append((where[a], where[b]))
    total = 0
    for pairs in by_rank.values():
        for i, (a1, b1) in enumerate(pairs):
            for a2, b2 in pairs[i + 1 :]:
                total += (a1 - a2) * (b1 - b2) < 0
    return total


def _x_coordinates(
    layers: list[list[str]], chains: list[_Chain], widths: dict[str, float], gap: float
) -> dict[str, float]:
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for a, b in _segments(chains):
        down.setdefault(a, []).append(b)
        up.setdefault(b, []).append(a)
    xs: dict[str, float] = {}
    for layer in layers:
        x = 0.0
        for item in layer:
            xs[item] = x + widths[item] / 2
            x += widths[item] + gap
        offset = x / 2
        for item in layer:
            xs[item] -= offset
    for sweep in range(PULLS):
        neighbours = up if sweep % 2 == 0 else down
        for layer in layers:
            wanted = []
            for item in layer:
                linked = [xs[n] for n in neighbours.get(item, ())]
                wanted.append(sum(linked) / len(linked) if linked else xs[item])
            _place_without_overlap(layer, wanted, widths, gap, xs)
    return xs


def _place_without_overlap(
    layer: list[str],
    wanted: list[float],
    widths: dict[str, float],
    gap: float,
    xs: dict[str, float],
) -> None:
    """Each item as close to where it is wanted as the items before it allow, keeping the
    layer's centre where the wishes put it."""
    placed: list[float] = []
    for i, item in enumerate(layer):
        x = wanted[i]
        if placed:
            x = max(x, placed[-1] + (widths[layer[i - 1]] + widths[item]) / 2 + gap)
        placed.append(x)
    drift = (sum(placed) - sum(wanted)) / len(placed) if placed else 0.0
    for item, x in zip(layer, placed, strict=True):
        xs[item] = x - drift


def _ports(
    chains: list[_Chain],
    placed: dict[str, Placed],
    sizes: dict[str, Box],
    xs: dict[str, float],
    shift: float,
) -> dict[tuple[int, str], float]:
    """Where each edge meets its nodes, as an offset from the node's centre: the edges sharing a
    side are spread along it in the order of where they go, so none run on top of another."""
    sides: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for chain in chains:
        upper, lower = chain.items[0], chain.items[-1]
        going = xs[chain.items[1]] + shift
        coming = xs[chain.items[-2]] + shift
        sides.setdefault((upper, "bottom"), []).append((going, chain.index))
        sides.setdefault((lower, "top"), []).append((coming, chain.index))
    offsets: dict[tuple[int, str], float] = {}
    for (node, side), ends in sides.items():
        ends.sort()
        count = len(ends)
        room = max(0.0, placed[node].width - 2 * PORT_MARGIN) / max(1, count - 1)
        gap = min(POINTED_PORT_GAP if sizes[node].pointed else PORT_GAP, room)
        for k, (_, index) in enumerate(ends):
            offsets[(index, side)] = (k - (count - 1) / 2) * gap
    return offsets


def _routes(
    edges: list[LayoutEdge],
    chains: list[_Chain],
    placed: dict[str, Placed],
    ports: dict[tuple[int, str], float],
    xs: dict[str, float],
    ys: dict[str, float],
    shift: float,
    labels_into: dict[str, list[_Chain]],
    tops: list[float],
    item_rank: dict[str, int],
) -> tuple[RoutedEdge, ...]:
    by_index = {c.index: c for c in chains}
    routes: list[RoutedEdge] = []
    for i, edge in enumerate(edges):
        chain = by_index.get(i)
        if chain is None:  # a loop on one node, out to its right side and back
            node = placed[edge.source]
            x0, x1 = node.x + node.width / 2, node.x + node.width / 2 + SELF_LOOP
            points: tuple[Point, ...] = (
                (x0, node.y - 6),
                (x1, node.y - 6),
                (x1, node.y + 6),
                (x0, node.y + 6),
            )
            label = (x1 + 4 + edge.label.width / 2, node.y) if edge.label else None
            routes.append(RoutedEdge(points, label))
            continue
        upper, lower = placed[chain.items[0]], placed[chain.items[-1]]
        inner = [(xs[item] + shift, ys[item]) for item in chain.items[1:-1]]
        path = [
            (upper.x + ports[(chain.index, "bottom")], upper.bottom),
            *inner,
            (lower.x + ports[(chain.index, "top")], lower.top),
        ]
        label_at = None
        if chain.label is not None:
            # The label sits on a straight stretch right above the first point the edge
            # reaches, where that point's room (made as wide as the label) keeps it clear.
            first = chain.items[1]
            stacked = labels_into[first]
            above = sum(
                c.label.height + LABEL_PAD for c in stacked[stacked.index(chain) :] if c.label
            )
            y = tops[item_rank[first]] - above + chain.label.height / 2
            x = path[1][0]
            label_at = (x, y)
            path.insert(1, (x, y - chain.label.height / 2))
        if chain.reversed:
            path.reverse()
        routes.append(RoutedEdge(tuple(path), label_at))
    return tuple(routes)
