"""Embeddings in S3: written at publish, loaded once per warm container, revalidated by ETag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.agent_config import AgentConfig
from engine.model import Guideline
from engine.recall.vectors import GUIDELINES, JOURNEYS, TERMS
from infra.aws.local_stack import LocalStack
from infra.aws.s3_vectors import (
    EmbeddingsNotPublished,
    S3VectorIndex,
    clear_warm_vectors,
    publish_embeddings,
    write_embeddings,
)
from infra.embeddings import HashingEmbedder
from tests.contracts.factories import make_agent

CountCalls = Callable[[Any, str], list[dict[str, Any]]]
N, DIM = 10_000, 384


@pytest.fixture
def vectors() -> np.ndarray:
    rng = np.random.default_rng(42)
    matrix = rng.normal(size=(N, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


@pytest.fixture
def published(local_stack: LocalStack, vectors: np.ndarray) -> list[str]:
    ids = [f"journey-{i:05d}" for i in range(N)]
    write_embeddings(
        local_stack.client("s3"),
        local_stack.bucket,
        "big",
        "v1",
        {JOURNEYS: (ids, vectors)},
        embedder="random",
    )
    return ids


async def test_10k_vectors_answer_top_k_like_brute_force(
    local_stack: LocalStack, vectors: np.ndarray, published: list[str]
) -> None:
    index = S3VectorIndex("big", "v1")
    rng = np.random.default_rng(0)
    for _ in range(5):
        query = rng.normal(size=DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        expected = np.argsort(-(vectors @ query))[:10]
        result = await index.nearest(JOURNEYS, query, 10)
        assert [item_id for item_id, _ in result] == [published[i] for i in expected]
        assert [s for _, s in result] == pytest.approx(
            [float(vectors[i] @ query) for i in expected], abs=1e-5
        )


async def test_a_warm_container_loads_the_arrays_once(
    local_stack: LocalStack, published: list[str], count_calls: CountCalls
) -> None:
    gets = count_calls(local_stack.client("s3"), "GetObject")
    first = S3VectorIndex("big", "v1")
    await first.nearest(JOURNEYS, np.ones(DIM), 3)
    assert len(gets) == 3  # manifest, .npy, .ids.json
    assert first.stats.downloaded == 3

    second = S3VectorIndex("big", "v1")  # the next invocation builds a new index object
    await second.nearest(JOURNEYS, np.ones(DIM), 3)
    assert len(gets) == 3  # no second GetObject
    assert second.stats.memory_hits == 1


async def test_a_new_container_reuses_the_disk_copy_when_the_etag_matches(
    local_stack: LocalStack, published: list[str], count_calls: CountCalls
) -> None:
    expected = await S3VectorIndex("big", "v1").nearest(JOURNEYS, np.ones(DIM), 5)
    clear_warm_vectors()  # a new process; /tmp survived
    gets = count_calls(local_stack.client("s3"), "GetObject")

    index = S3VectorIndex("big", "v1")
    assert await index.nearest(JOURNEYS, np.ones(DIM), 5) == expected
    assert all("IfNoneMatch" in g for g in gets) and len(gets) == 3
    assert (index.stats.revalidated, index.stats.downloaded) == (3, 0)


async def test_a_changed_object_is_downloaded_again(
    local_stack: LocalStack, published: list[str]
) -> None:
    await S3VectorIndex("big", "v1").load()
    clear_warm_vectors()
    write_embeddings(
        local_stack.client("s3"),
        local_stack.bucket,
        "big",
        "v1",
        {JOURNEYS: (["only"], np.ones((1, DIM)))},
        embedder="random",
    )
    index = S3VectorIndex("big", "v1")
    assert await index.nearest(JOURNEYS, np.ones(DIM), 5) == [("only", pytest.approx(1.0))]
    assert index.stats.downloaded == 3


async def test_published_agent_embeddings_recall_the_transfer_journey(
    local_stack: LocalStack,
) -> None:
    embedder = HashingEmbedder()
    agent = make_agent()
    manifest = await publish_embeddings(
        local_stack.client("s3"), local_stack.bucket, agent, embedder
    )
    assert manifest.version == agent.content_hash()
    assert manifest.namespaces == {JOURNEYS: 3, TERMS: 1}
    assert (manifest.embedder, manifest.dimensions) == ("waypoint-hashing-v1", 384)

    index = S3VectorIndex("bank", manifest.version)
    (query,) = await embedder.embed(["I want to transfer money"])
    assert [j for j, _ in await index.nearest(JOURNEYS, query, 1)] == ["transfer"]
    assert await index.nearest("canned_responses", query, 1) == []


async def test_a_large_agent_publishes_its_guideline_vectors_for_recall(
    local_stack: LocalStack,
) -> None:
    embedder = HashingEmbedder()
    base = make_agent()
    extra = tuple(
        Guideline(id=f"rule_{i}", condition=f"the customer mentions topic {i}", action="help")
        for i in range(8)
    )
    agent = base.model_copy(
        update={
            "guidelines": (*base.guidelines, *extra),
            "config": AgentConfig(guideline_top_k=4),
        }
    )
    manifest = await publish_embeddings(
        local_stack.client("s3"), local_stack.bucket, agent, embedder
    )
    wide = [g for g in agent.guidelines if "journey_condition" not in g.metadata]
    wide = [g for g in wide if g.scoped_journey_id is None]
    assert manifest.namespaces[GUIDELINES] == len(wide) > 4

    index = S3VectorIndex("bank", manifest.version)
    (query,) = await embedder.embed(["the customer mentions topic 6"])
    assert (await index.nearest(GUIDELINES, query, 1))[0][0] == "rule_6"


async def test_missing_embeddings_say_how_to_publish_them(local_stack: LocalStack) -> None:
    with pytest.raises(EmbeddingsNotPublished, match="waypoint publish"):
        await S3VectorIndex("bank", "nope").load()
