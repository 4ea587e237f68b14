"""Embeddings in S3 (moto): publish, load and top-k for 1k / 10k / 100k vectors.

Written with `write_embeddings` (what `waypoint publish` does after embedding) and read with
`S3VectorIndex` (what a turn does), three ways: cold (download + parse, no disk copy),
revalidated (conditional GET → 304, then the disk copy), and warm (this container has it).
Top-k is `VectorIndex.nearest` on the loaded index, k = 5, over random unit queries.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable

import numpy as np

from bench.results import EmbeddingRow
from bench.stats import median, p95

Progress = Callable[[str], None]
TOP_K = 5
LOAD_REPEATS = 3


def run_embedding_suite(
    sizes: tuple[int, ...], dimensions: int, queries: int, progress: Progress
) -> list[EmbeddingRow]:
    return asyncio.run(_suite(sizes, dimensions, queries, progress))


async def _suite(
    sizes: tuple[int, ...], dimensions: int, queries: int, progress: Progress
) -> list[EmbeddingRow]:
    from infra.aws.clients import client
    from infra.aws.local_stack import LocalStack
    from infra.aws.s3_vectors import S3VectorIndex, clear_warm_vectors, write_embeddings

    rows = []
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="waypoint-bench-emb-") as cache, LocalStack() as stack:
        s3 = client("s3")
        for n in sizes:
            vectors = rng.standard_normal((n, dimensions), dtype=np.float32)
            ids = [f"item-{i}" for i in range(n)]
            agent = f"emb-{n}"
            started = time.perf_counter()
            write_embeddings(
                s3, stack.bucket, agent, "v1", {"journeys": (ids, vectors)}, embedder="random"
            )
            write_ms = (time.perf_counter() - started) * 1000

            def index(disk: bool, agent: str = agent) -> S3VectorIndex:
                return S3VectorIndex(
                    agent, "v1", bucket=stack.bucket, s3=s3, cache_dir=cache, disk_cache=disk
                )

            cold = []
            for _ in range(LOAD_REPEATS):
                clear_warm_vectors()
                started = time.perf_counter()
                await index(False).load()
                cold.append((time.perf_counter() - started) * 1000)
            clear_warm_vectors()
            await index(True).load()  # puts the files on disk
            revalidated = []
            for _ in range(LOAD_REPEATS):
                clear_warm_vectors()
                probe = index(True)
                started = time.perf_counter()
                await probe.load()
                revalidated.append((time.perf_counter() - started) * 1000)
                assert probe.stats.revalidated > 0, "expected a 304 revalidation"
            warm_index = index(True)
            started = time.perf_counter()
            await warm_index.load()
            warm_ms = (time.perf_counter() - started) * 1000
            assert warm_index.stats.memory_hits == 1
            query_vectors = rng.standard_normal((queries, dimensions), dtype=np.float32)
            topk = []
            for q in query_vectors:
                started = time.perf_counter()
                found = await warm_index.nearest("journeys", q, TOP_K)
                topk.append((time.perf_counter() - started) * 1000)
                assert len(found) == TOP_K
            row = EmbeddingRow(
                vectors=n,
                dimensions=dimensions,
                megabytes=vectors.nbytes / 1e6,
                write_ms=write_ms,
                cold_load_ms=median(cold),
                revalidated_load_ms=median(revalidated),
                warm_hit_ms=warm_ms,
                topk_p50_ms=median(topk),
                topk_p95_ms=p95(topk),
            )
            rows.append(row)
            progress(
                f"embeddings {n:,} x {dimensions}: write {write_ms:.0f} ms, cold load "
                f"{row.cold_load_ms:.0f} ms, revalidated {row.revalidated_load_ms:.0f} ms, "
                f"top-{TOP_K} p50 {row.topk_p50_ms:.2f} ms"
            )
            clear_warm_vectors()
    return rows
