"""Agent embeddings in S3: written once at publish, loaded once per warm container.

Layout, per agent version (versions are immutable, so keys never need invalidation):

    agents/{agent}/{version}/{namespace}.npy        float32 (n, dim) unit rows, allow_pickle=False
    agents/{agent}/{version}/{namespace}.ids.json   the n ids, row order
    agents/{agent}/{version}/manifest.json          embedder, dimensions, namespaces; written last

The hot path never embeds agent content: `S3VectorIndex` only downloads arrays and searches them
with `engine.recall.vectors.InMemoryVectorIndex`. Loaded indexes are kept in a module-level cache (the
warm container); downloaded files are also kept on local disk (`WAYPOINT_CACHE_DIR`, default the
temp dir) and revalidated with a conditional GET on their ETag, which costs no transfer.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from botocore.exceptions import ClientError
from pydantic import BaseModel

from engine.errors import WaypointError
from engine.memory.stores import versioned
from engine.model import AgentSnapshot
from engine.ports import Embedder
from engine.recall.vectors import (
    Array,
    InMemoryVectorIndex,
    agent_index_texts,
    build_index,
    unit_rows,
)
from infra.aws.clients import BUCKET_ENV, client, required_env

CACHE_DIR_ENV = "WAYPOINT_CACHE_DIR"
MANIFEST = "manifest.json"


class EmbeddingsNotPublished(WaypointError):
    """No embeddings in S3 for an agent version."""


class EmbeddingsManifest(BaseModel):
    """What was embedded for one agent version, and with which embedder."""

    agent_id: str
    version: str
    embedder: str
    dimensions: int
    namespaces: dict[str, int]  # namespace → number of vectors


def embeddings_prefix(agent_id: str, version: str) -> str:
    return f"agents/{agent_id}/{version}/"


# --------------------------------------------------------------------------------------------------
# Publishing


def write_embeddings(
    s3: Any,
    bucket: str,
    agent_id: str,
    version: str,
    collections: Mapping[str, tuple[Sequence[str], Array]],
    *,
    embedder: str,
) -> EmbeddingsManifest:
    """Write precomputed vectors (namespace → (ids, matrix)) and then the manifest.

    The manifest goes last: readers open it first, so they never see half a publish."""
    prefix = embeddings_prefix(agent_id, version)
    counts: dict[str, int] = {}
    dimensions = 0
    for namespace, (ids, vectors) in collections.items():
        matrix = unit_rows(vectors)
        if len(ids) != matrix.shape[0]:
            raise ValueError(f"{namespace}: {len(ids)} ids for {matrix.shape[0]} vectors")
        buffer = io.BytesIO()
        np.save(buffer, matrix, allow_pickle=False)
        s3.put_object(Bucket=bucket, Key=f"{prefix}{namespace}.npy", Body=buffer.getvalue())
        s3.put_object(
            Bucket=bucket,
            Key=f"{prefix}{namespace}.ids.json",
            Body=json.dumps(list(ids)).encode(),
            ContentType="application/json",
        )
        counts[namespace] = matrix.shape[0]
        dimensions = matrix.shape[1]
    manifest = EmbeddingsManifest(
        agent_id=agent_id,
        version=version,
        embedder=embedder,
        dimensions=dimensions,
        namespaces=counts,
    )
    s3.put_object(
        Bucket=bucket,
        Key=prefix + MANIFEST,
        Body=manifest.model_dump_json().encode(),
        ContentType="application/json",
    )
    return manifest


async def publish_embeddings(
    s3: Any, bucket: str, agent: AgentSnapshot, embedder: Embedder
) -> EmbeddingsManifest:
    """Embed the agent's recall texts (one embedder call) and write them for its version."""
    agent = versioned(agent)
    index = await build_index(embedder, agent_index_texts(agent))
    collections = {namespace: index.collection(namespace) for namespace in index.namespaces}
    name = str(getattr(embedder, "model", type(embedder).__name__))
    return write_embeddings(s3, bucket, agent.id, agent.version, collections, embedder=name)


# --------------------------------------------------------------------------------------------------
# Loading


@dataclass
class LoadStats:
    """Where an `S3VectorIndex` got its data from: for tests and traces."""

    memory_hits: int = 0  # the whole index came from the warm-container cache
    revalidated: int = 0  # files served from disk after a 304 Not Modified
    downloaded: int = 0  # files transferred from S3


_WARM: OrderedDict[tuple[str, str, str], InMemoryVectorIndex] = OrderedDict()
_WARM_LOCK = threading.Lock()
_WARM_MAX = 8  # agent versions kept per container; ~15 MB each at 10k x 384 float32


def clear_warm_vectors() -> None:
    """Forget every index loaded in this process (tests; a new container starts empty)."""
    with _WARM_LOCK:
        _WARM.clear()


class S3VectorIndex:
    """`VectorIndex` over one agent version's embeddings in S3."""

    def __init__(
        self,
        agent_id: str,
        version: str,
        *,
        bucket: str | None = None,
        s3: Any = None,
        cache_dir: str | Path | None = None,
        disk_cache: bool = True,
    ):
        self.agent_id = agent_id
        self.version = version
        self.bucket = bucket or required_env(BUCKET_ENV, "the S3 embeddings bucket")
        self._s3 = s3 or client("s3")
        root = cache_dir or os.environ.get(CACHE_DIR_ENV) or tempfile.gettempdir()
        self._cache_root = Path(root) / "waypoint-embeddings" if disk_cache else None
        self.stats = LoadStats()
        self._index: InMemoryVectorIndex | None = None

    async def load(self) -> InMemoryVectorIndex:
        """The loaded index: from this container's memory, else disk (ETag-checked), else S3."""
        if self._index is not None:
            return self._index
        key = (self.bucket, self.agent_id, self.version)
        with _WARM_LOCK:
            warm = _WARM.get(key)
            if warm is not None:
                _WARM.move_to_end(key)
        if warm is not None:
            self.stats.memory_hits += 1
            self._index = warm
            return warm
        index = self._download()
        with _WARM_LOCK:
            _WARM[key] = index
            while len(_WARM) > _WARM_MAX:
                _WARM.popitem(last=False)
        self._index = index
        return index

    async def nearest(self, namespace: str, query: Array, k: int) -> list[tuple[str, float]]:
        """`VectorIndex.nearest`: (id, cosine), best first; unknown namespace → []."""
        index = await self.load()
        return index.search(namespace, query, k)

    def _download(self) -> InMemoryVectorIndex:
        prefix = embeddings_prefix(self.agent_id, self.version)
        manifest = EmbeddingsManifest.model_validate_json(self._fetch(prefix + MANIFEST))
        index = InMemoryVectorIndex()
        for namespace in manifest.namespaces:
            vectors = np.load(
                io.BytesIO(self._fetch(f"{prefix}{namespace}.npy")), allow_pickle=False
            )
            ids = json.loads(self._fetch(f"{prefix}{namespace}.ids.json"))
            index.add(namespace, ids, vectors)
        return index

    def _fetch(self, key: str) -> bytes:
        """An object's bytes, reusing the disk copy when S3 says its ETag is unchanged."""
        local = self._cache_root / self.bucket / key if self._cache_root else None
        etag_file = local.with_name(local.name + ".etag") if local else None
        request: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if local and etag_file and local.exists() and etag_file.exists():
            request["IfNoneMatch"] = etag_file.read_text()
        try:
            response = self._s3.get_object(**request)
        except ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 304 and local is not None:
                self.stats.revalidated += 1
                return local.read_bytes()
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise EmbeddingsNotPublished(
                    f"no embeddings at s3://{self.bucket}/{key}: agent {self.agent_id!r} version "
                    f"{self.version!r} was published without them; publish it again with "
                    "`waypoint publish` (it writes the embeddings)"
                ) from error
            raise
        body: bytes = response["Body"].read()
        self.stats.downloaded += 1
        if local is not None and etag_file is not None:
            _write_atomically(local, body)
            # The ETag goes last: a crash in between leaves an old ETag, which forces a download.
            _write_atomically(etag_file, response["ETag"].encode())
        return body


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)
