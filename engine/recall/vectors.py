"""Vector recall in memory: top-k cosine over precomputed unit vectors, per namespace.

`InMemoryVectorIndex` is the one search implementation; the S3 adapter (`infra.aws.s3_vectors`)
only loads arrays and hands them to it. What gets embedded for an agent is decided here too
(`agent_index_texts`), so publish-time embedding and the engine agree on the same texts.
Pure numpy: no AWS, no network.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import WaypointError
from engine.model import AgentSnapshot, Guideline, Journey
from engine.ports import Embedder

JOURNEYS = "journeys"  # namespace of journey vectors, ids = journey ids
TERMS = "terms"  # namespace of glossary term vectors, ids = term names
GUIDELINES = "guidelines"  # agent-wide guidelines, ids = guideline ids (large agents only)

UnitVectors = npt.NDArray[np.float32]  # (n, dim), rows of length 1 (or 0 for empty input)
Array = npt.NDArray[Any]


class VectorDimensionMismatch(WaypointError):
    """A query vector's size differs from the index's: the query was embedded with another
    embedder than the one used at publish time. Re-publish the agent with the current embedder."""


def unit_rows(vectors: Array) -> UnitVectors:
    """Rows scaled to length 1 as a contiguous float32 matrix; all-zero rows stay zero."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D matrix of vectors, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # Dividing by 1 leaves zero rows at zero instead of producing NaNs.
    unit: UnitVectors = (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
    return unit


# Up to this many matrix cells, a query's scores are computed in this thread (`np.einsum` does
# not call BLAS): a turn ranks a few thousand rows, and BLAS's matrix-vector product hands those
# to its thread pool, whose waking and spinning threads cost 2–8 ms per call on a shared CPU
# (and a Lambda's fractional one) against 0.3 ms here for 5,000 × 384. Larger collections
# (the embedding benchmark's 100,000 rows) are worth BLAS's threads.
SINGLE_THREAD_CELLS = 4_000_000


def _scores(matrix: UnitVectors, query: UnitVectors) -> UnitVectors:
    if matrix.size <= SINGLE_THREAD_CELLS:
        scores: UnitVectors = np.einsum("ij,j->i", matrix, query)
        return scores
    product: UnitVectors = matrix @ query
    return product


class InMemoryVectorIndex:
    """Namespaces → (ids, float32 matrix of unit vectors). Implements the `VectorIndex` port."""

    def __init__(self, collections: Mapping[str, tuple[Sequence[str], Array]] | None = None):
        self._ids: dict[str, tuple[str, ...]] = {}
        self._vectors: dict[str, UnitVectors] = {}
        for namespace, (ids, vectors) in (collections or {}).items():
            self.add(namespace, ids, vectors)

    def add(self, namespace: str, ids: Sequence[str], vectors: Array) -> None:
        """Set (replace) a namespace. Rows are normalized, so raw embeddings are fine."""
        matrix = unit_rows(vectors)
        ids = tuple(ids)
        if len(ids) != matrix.shape[0]:
            raise ValueError(
                f"namespace {namespace!r}: {len(ids)} ids for {matrix.shape[0]} vectors; "
                "pass exactly one id per row"
            )
        if len(set(ids)) != len(ids):
            raise ValueError(f"namespace {namespace!r}: ids must be unique")
        self._ids[namespace] = ids
        self._vectors[namespace] = matrix

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self._ids)

    def collection(self, namespace: str) -> tuple[tuple[str, ...], UnitVectors]:
        """The ids and unit vectors of a namespace (empty when unknown)."""
        if namespace not in self._ids:
            return (), np.zeros((0, 0), dtype=np.float32)
        return self._ids[namespace], self._vectors[namespace]

    def search(self, namespace: str, query: Array, k: int) -> list[tuple[str, float]]:
        """Synchronous top-k by cosine, best first; ties broken by insertion order."""
        ids = self._ids.get(namespace)
        if not ids or k <= 0:
            return []
        matrix = self._vectors[namespace]
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != matrix.shape[1]:
            raise VectorDimensionMismatch(
                f"query has {q.shape[0]} dimensions but namespace {namespace!r} holds "
                f"{matrix.shape[1]}-dimensional vectors; embed the query with the embedder the "
                "agent was published with, or re-publish the agent"
            )
        norm = float(np.linalg.norm(q))
        scores = _scores(matrix, q / norm if norm > 0 else q)
        n = scores.shape[0]
        if k < n:
            # O(n) selection: every row scoring at least the k-th best score (all of a tie at
            # the cut, which argpartition would pick from arbitrarily), then sort only those. The
            # k best are then a prefix of the full ranking, whatever k (recall relies on it).
            cut = np.partition(scores, n - k)[n - k]
            candidates = np.flatnonzero(scores >= cut)
        else:
            candidates = np.arange(n)
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        # (`tolist` gives the same Python ints and floats as indexing one numpy scalar at a time)
        return [
            (ids[i], score) for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
        ]

    async def nearest(self, namespace: str, query: Array, k: int) -> list[tuple[str, float]]:
        """`VectorIndex.nearest`: (id, cosine) pairs, best first; unknown namespace → []."""
        return self.search(namespace, query, k)


async def build_index(
    embedder: Embedder, texts: Mapping[str, Mapping[str, str]]
) -> InMemoryVectorIndex:
    """Embed `{namespace: {id: text}}` with ONE embedder call and index the result."""
    flat = [(ns, item_id, text) for ns, items in texts.items() for item_id, text in items.items()]
    index = InMemoryVectorIndex()
    if not flat:
        return index
    vectors = await embedder.embed([text for _, _, text in flat])
    start = 0
    for namespace, items in texts.items():
        stop = start + len(items)
        if items:
            index.add(namespace, list(items), vectors[start:stop])
        start = stop
    return index


def journey_index_text(journey: Journey) -> str:
    """What represents a journey in vector recall: its title, description, activation conditions,
    step actions and transition conditions (the customer's words tend to echo any of them)."""
    parts: list[str] = [journey.title, journey.description, *journey.conditions]
    parts += [node.action for node in journey.nodes if node.action]
    parts += [node.description for node in journey.nodes if node.description]
    parts += [edge.condition for edge in journey.edges if edge.condition]
    return "\n".join(dict.fromkeys(p.strip() for p in parts if p and p.strip()))


def journey_index_texts(agent: AgentSnapshot) -> dict[str, str]:
    """Journey id → the text embedded for it at publish time."""
    return {journey.id: journey_index_text(journey) for journey in agent.journeys}


def is_agent_wide(guideline: Guideline) -> bool:
    """Neither scoped to a journey nor one of a journey's activation conditions."""
    return guideline.scoped_journey_id is None and guideline.condition_of_journey is None


def guideline_index_text(guideline: Guideline) -> str:
    parts = [guideline.condition, guideline.action or "", guideline.description or ""]
    return "\n".join(p.strip() for p in parts if p and p.strip())


def agent_index_texts(agent: AgentSnapshot) -> dict[str, dict[str, str]]:
    """Every namespace embedded at publish time: journeys; glossary terms when there are any;
    agent-wide guidelines when there are more than recall matches per turn
    (`config.guideline_top_k`)."""
    texts: dict[str, dict[str, str]] = {JOURNEYS: journey_index_texts(agent)}
    wide = [g for g in agent.guidelines if g.enabled and is_agent_wide(g)]
    top_k = agent.config.guideline_top_k
    if top_k and len(wide) > top_k:
        texts[GUIDELINES] = {g.id: guideline_index_text(g) for g in wide}
    if agent.terms:
        texts[TERMS] = {
            term.name: "\n".join([term.name, *term.synonyms, term.description])
            for term in agent.terms
        }
    return texts
