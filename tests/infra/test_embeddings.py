"""HashingEmbedder: offline, deterministic, and good enough to recall the right journey."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from infra.embeddings import HashingEmbedder

TRANSFER = "Money transfer\nTransfer funds between accounts\nAsk for the amount"
STOCK = "Stock price lookup\nLook up the price of a stock"


async def cosines(query: str, *documents: str) -> list[float]:
    vectors = await HashingEmbedder().embed([query, *documents])
    return [float(vectors[0] @ v) for v in vectors[1:]]


async def test_vectors_are_unit_float32_rows() -> None:
    vectors = await HashingEmbedder(dimensions=384).embed(["hello", "", "the a to"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_a_money_transfer_request_is_closest_to_the_transfer_journey() -> None:
    to_transfer, to_stock = await cosines("I want to transfer money", TRANSFER, STOCK)
    assert to_transfer > 0.4
    assert to_stock < 0.1


async def test_inflections_still_match() -> None:
    (score,) = await cosines("transferring my funds", "transfer funds")
    assert score > 0.6


def test_vectors_are_identical_across_processes() -> None:
    code = (
        "import asyncio; from infra.embeddings import HashingEmbedder\n"
        "v = asyncio.run(HashingEmbedder().embed(['I want to transfer money']))\n"
        "print(v.tobytes().hex())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1


def test_the_cached_bucket_sums_equal_adding_every_feature_one_by_one() -> None:
    """embed_one sums per-line and per-term cached buckets at once (np.bincount); vectors written
    at publish time must stay valid, so it must give exactly the vector of the
    feature-by-feature sum over the whole text (word pairs across line breaks included)."""
    from infra.embeddings import _bucket, _features

    texts = [
        "",
        "the a to",
        "I want to transfer money to my savings account",
        "Transferring funds: transferred, transfers — stopping, stopped; bills & passes",
        "Stock price lookup\nLook up the price of a stock\nORD-5521 arrived damaged twice",
        "money money money transfer transfer",
        # line by line (cached per line): pairs across breaks, lines without words, repeats
        "Customer: I want to transfer money\nAgent: Sure, from which account?\nCustomer: savings",
        "\n\nthe a to\nmoney\n\ntransfer\n",
        "money\nmoney\nmoney transfer\n the \nfunds",
        "\n",
        "ΟΔΟΣ\nοδός Σ\nstraße STRASSE",
    ]
    for dimensions in (16, 384):
        embedder = HashingEmbedder(dimensions)
        for text in texts:
            expected = np.zeros(dimensions, dtype=np.float32)
            for feature, weight in _features(text):
                index, sign = _bucket(feature, dimensions)
                expected[index] += sign * weight
            norm = float(np.linalg.norm(expected))
            expected = expected / norm if norm > 0 else expected
            got = embedder.embed_one(text)
            assert got.dtype == np.float32
            assert np.array_equal(got, expected), text
