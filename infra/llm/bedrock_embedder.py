"""`Embedder` on a Bedrock embedding model: Amazon Titan Text Embeddings (v2 by default), through
`bedrock-runtime` `InvokeModel` and the function's IAM role.

Titan embeds one text per request (`{"inputText", "dimensions", "normalize"}` → `{"embedding"}`),
so texts go out a few at a time (`CONCURRENCY` worker threads): bulk embedding happens when an
agent is published, off the hot path; a turn embeds only its query. Vectors come back as
unit-length float32 (normalized again here, so cosine is a dot product whatever the model did),
into the same S3 vectors as the OpenAI embedder's.

Nothing in the engine retries embeddings, so this client keeps botocore's own retries (standard
mode, 3 attempts, backing off on throttling); errors that remain are mapped like the chat
adapter's (`infra.llm.bedrock_client`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import LLMError
from infra.llm.bedrock_client import BedrockConnection, map_bedrock_error
from infra.llm.vector_size import VectorSize

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
# Native sizes, so `dimensions` is known before the first call; v2 also offers 256 and 512.
KNOWN_DIMENSIONS = {
    "amazon.titan-embed-text-v2:0": 1024,
    "amazon.titan-embed-text-v1": 1536,
}
# Only v2 takes `dimensions` and `normalize` in its request.
_V2_PREFIX = "amazon.titan-embed-text-v2"
V2_SIZES = (256, 512, 1024)


class BedrockEmbedder:
    """Texts → unit-length float32 vectors of shape (len(texts), dimensions)."""

    CONCURRENCY = 4

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeout: float = 30.0,
        max_attempts: int = 3,
        client: Any = None,
    ) -> None:
        takes_size = model.startswith(_V2_PREFIX)
        if dimensions is not None and takes_size and dimensions not in V2_SIZES:
            raise LLMError(
                f"{model!r} embeds in {', '.join(map(str, V2_SIZES))} dimensions, not "
                f"{dimensions}; set WAYPOINT_EMBEDDING_DIMENSIONS to one of them"
            )
        if dimensions is not None and not takes_size:
            raise LLMError(
                f"{model!r} has a fixed vector size; unset WAYPOINT_EMBEDDING_DIMENSIONS "
                f"(only {_V2_PREFIX}… takes one)"
            )
        self.model = model
        self._takes_size = takes_size
        self._requested_dimensions = dimensions
        self._size = VectorSize(
            model, dimensions, KNOWN_DIMENSIONS.get(model), "set WAYPOINT_EMBEDDING_DIMENSIONS"
        )
        self._connection = BedrockConnection(
            region=region,
            endpoint_url=endpoint_url,
            timeout=timeout,
            max_attempts=max_attempts,
            client=client,
        )

    @property
    def dimensions(self) -> int:
        """Vector size: as configured, the model's native size, or what the first call returned."""
        return self._size.value

    async def connect(self) -> None:
        """Create the client now (a Lambda container's init phase)."""
        await asyncio.to_thread(self._connection.client)

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed `texts` in order. Raises `LLMTransientError` or `LLMError` like the chat adapter."""
        if not texts:
            return self._size.empty()
        gate = asyncio.Semaphore(self.CONCURRENCY)

        async def one(text: str) -> list[float]:
            async with gate:
                return await self._embed_one(text)

        rows = await asyncio.gather(*(one(text) for text in texts))
        sizes = {len(row) for row in rows}
        if len(sizes) != 1:
            raise LLMError(f"embedding model {self.model!r} returned vectors of sizes {sizes}")
        return self._size.learned(np.asarray(rows, dtype=np.float32))

    def request_body(self, text: str) -> dict[str, Any]:
        """Titan's request: the text (an empty one embeds as a space: Titan rejects ""), and for
        v2 the vector size and normalization."""
        body: dict[str, Any] = {"inputText": text if text.strip() else " "}
        if self._takes_size:
            body["normalize"] = True
            if self._requested_dimensions is not None:
                body["dimensions"] = self._requested_dimensions
        return body

    async def _embed_one(self, text: str) -> list[float]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._connection.client()
        body = json.dumps(self.request_body(text))
        try:
            response = await asyncio.to_thread(
                client.invoke_model,
                modelId=self.model,
                body=body,
                contentType="application/json",
                accept="application/json",
            )
            payload = json.loads(response["body"].read())
        except (BotoCoreError, ClientError) as exc:
            raise map_bedrock_error(exc, model=self.model, region=self._connection.region) from exc
        except ValueError as exc:
            raise LLMError(f"embedding model {self.model!r} answered with non-JSON: {exc}") from exc
        embedding = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(embedding, list) or not embedding:
            raise LLMError(
                f"embedding model {self.model!r} answered without an 'embedding' (is it a Titan "
                "text embedding model? Set WAYPOINT_EMBEDDING_MODEL)"
            )
        return [float(x) for x in embedding]
