"""`Embedder` on OpenAI's embeddings API (or any compatible server).

Texts go out in batches of at most `BATCH_SIZE`, one batch after another: bulk embedding happens
when an agent is published, off the hot path, and sequential batches stay clear of rate limits; a
turn embeds only its query. Vectors come back L2-normalized as float32, so cosine is a dot product.

Nothing in the engine retries embeddings, so unlike the chat adapter this client keeps a couple of
the `openai` client's own retries (which honor Retry-After); errors that remain are mapped like
the chat adapter's. Importing this module does not import `openai`.

Like the chat adapter, it posts through the client (`client.post`) rather than its `embeddings`
resource, and reads the answer's JSON: vectors asked for as base64, as that resource asks for
them, decoded straight into float32 arrays (the resource builds its response models, then turns
each vector into a list of floats).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from engine.errors import LLMError
from infra.llm.openai_client import OpenAIConnection, map_openai_error, post_json
from infra.llm.vector_size import VectorSize

if TYPE_CHECKING:
    from openai import AsyncOpenAI

# Native sizes of OpenAI's embedding models, so `dimensions` is known before the first call.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """Texts → unit-length float32 vectors of shape (len(texts), dimensions)."""

    BATCH_SIZE = 256

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        client: AsyncOpenAI | None = None,
    ) -> None:
        self.model = model
        self._requested_dimensions = dimensions  # sent to the API (shortened text-embedding-3)
        self._size = VectorSize(
            model, dimensions, KNOWN_DIMENSIONS.get(model), "pass dimensions= to OpenAIEmbedder"
        )
        self._connection = OpenAIConnection(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
        )

    @property
    def dimensions(self) -> int:
        """Vector size: as configured, the model's native size, or what the first call returned."""
        return self._size.value

    async def connect(self) -> None:
        """Import `openai` and create the running loop's client now, before a first request
        needs it (a Lambda container's init phase: `infra.runtime.Runtime.prepare_for_turns`)."""
        self._connection.client()

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (see `OpenAIConnection.aclose`)."""
        await self._connection.aclose()

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed `texts` in order. Raises `LLMTransientError` or `LLMError` like the chat adapter."""
        if not texts:
            return self._size.empty()
        batches = [
            await self._embed_batch(texts[i : i + self.BATCH_SIZE])
            for i in range(0, len(texts), self.BATCH_SIZE)
        ]
        return self._size.learned(np.concatenate(batches))

    async def _embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        client = self._connection.client()  # imports openai on first use
        import openai

        # The API rejects empty strings; a single space embeds as "nothing" just as well.
        inputs = [text if text.strip() else " " for text in texts]
        body: dict[str, Any] = {"model": self.model, "input": inputs}
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        body["encoding_format"] = "base64"  # the `embeddings` resource's default, and order
        try:
            answer = await post_json(client, "/embeddings", body)
        except openai.OpenAIError as exc:
            raise map_openai_error(
                exc, model=self.model, base_url=self._connection.described_base_url
            ) from exc
        data = answer.get("data") if isinstance(answer, dict) else None
        items = data if isinstance(data, list) else []
        if len(items) != len(inputs):
            raise LLMError(
                f"embedding model {self.model!r} returned {len(items)} vectors "
                f"for {len(inputs)} texts"
            )
        try:  # order is not promised: by `index`
            ordered = sorted(items, key=lambda item: int(item["index"]))
            return np.stack([decoded_vector(item["embedding"]) for item in ordered])
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise LLMError(
                f"embedding model {self.model!r} returned vectors that cannot be read: "
                f"{type(exc).__name__}: {exc}"
            ) from exc


def decoded_vector(embedding: Any) -> npt.NDArray[np.float32]:
    """One vector of the answer: base64 of little-endian float32s, or a list of numbers (a
    server that ignores `encoding_format`)."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").astype(np.float32)
    return np.asarray(embedding, dtype=np.float32)
