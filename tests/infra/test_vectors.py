"""engine.recall.vectors: the in-memory index every vector recall goes through, and what is embedded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import numpy as np
import pytest

from engine.recall.vectors import (
    JOURNEYS,
    TERMS,
    InMemoryVectorIndex,
    VectorDimensionMismatch,
    agent_index_texts,
    build_index,
    journey_index_texts,
)
from infra.embeddings import HashingEmbedder
from tests.contracts.factories import make_agent


def brute_force(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


async def test_top_k_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(2_000, 64)).astype(np.float32)
    ids = [f"j{i}" for i in range(len(matrix))]
    index = InMemoryVectorIndex({JOURNEYS: (ids, matrix)})
    for _ in range(5):
        query = rng.normal(size=64).astype(np.float32)
        result = await index.nearest(JOURNEYS, query, 10)
        assert [item_id for item_id, _ in result] == [
            ids[i] for i in brute_force(matrix, query, 10)
        ]
        scores = [score for _, score in result]
        assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)


async def test_k_larger_than_the_collection_returns_everything_sorted() -> None:
    index = InMemoryVectorIndex({JOURNEYS: (["a", "b"], np.array([[1.0, 0.0], [0.6, 0.8]]))})
    assert await index.nearest(JOURNEYS, np.array([0.0, 1.0]), 5) == [
        ("b", pytest.approx(0.8)),
        ("a", pytest.approx(0.0)),
    ]
    assert await index.nearest(JOURNEYS, np.array([0.0, 1.0]), 0) == []


async def test_an_unknown_namespace_has_no_neighbours() -> None:
    assert await InMemoryVectorIndex().nearest("journeys", np.ones(8), 3) == []


async def test_equal_scores_keep_insertion_order() -> None:
    same = np.ones((4, 3))
    index = InMemoryVectorIndex({TERMS: (["w", "x", "y", "z"], same)})
    assert [i for i, _ in await index.nearest(TERMS, np.ones(3), 3)] == ["w", "x", "y"]


async def test_a_query_from_another_embedder_is_a_typed_error() -> None:
    index = InMemoryVectorIndex({JOURNEYS: (["a"], np.ones((1, 384)))})
    with pytest.raises(VectorDimensionMismatch, match="re-publish"):
        await index.nearest(JOURNEYS, np.ones(1536), 1)


def test_ids_and_rows_must_line_up() -> None:
    with pytest.raises(ValueError, match="one id per row"):
        InMemoryVectorIndex({JOURNEYS: (["a"], np.ones((2, 4)))})
    with pytest.raises(ValueError, match="unique"):
        InMemoryVectorIndex({JOURNEYS: (["a", "a"], np.ones((2, 4)))})


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(len(texts))
        return await super().embed(texts)


async def test_build_index_embeds_all_namespaces_in_one_call() -> None:
    embedder = CountingEmbedder()
    index = await build_index(embedder, agent_index_texts(make_agent()))
    assert embedder.batches == [4]  # 3 journeys + 1 term
    assert set(index.namespaces) == {JOURNEYS, TERMS}
    query = await embedder.embed(["I want to transfer money"])
    assert (await index.nearest(JOURNEYS, query[0], 1))[0][0] == "transfer"


async def test_build_index_of_nothing_calls_no_embedder() -> None:
    embedder = CountingEmbedder()
    assert (await build_index(embedder, {})).namespaces == ()
    assert embedder.batches == []


def test_a_journey_is_embedded_with_its_title_conditions_steps_and_transitions() -> None:
    text = journey_index_texts(make_agent())["transfer"]
    for part in (
        "Money transfer",
        "Transfer funds between accounts",
        "the customer wants to money transfer",
        "Ask for the amount",
        "the customer is done",
    ):
        assert part in text


def test_the_engine_modules_import_no_aws_sdk() -> None:
    code = (
        "import sys, engine.recall.vectors, engine.memory.stores\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('boto3', 'botocore', 'moto', 'aioboto3', 'openai', 'fastapi')]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
