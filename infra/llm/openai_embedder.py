"""`Embedder` on OpenAI's embeddings API (or any compatible server).

Texts go out in batches of at most `BATCH_SIZE`, one batch after another: bulk embedding happens
when an agent is published, off the hot path, and sequential batches stay clear of rate limits; a
turn embeds only its query. Vectors come back L2-normalized as float32, so cosine is a dot product.

Nothing in the engine retries embeddings, so unlike the chat adapter this client keeps a couple of
the `openai` client's own retries (which honor Retry-After); errors that remain are mapped like
the chat adapter's. Importing this module does not import `openai`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.errors import LLMError
from infra.llm.openai_client import OpenAIConnection, map_openai_error
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
        client = self._connection.client()
        client.embeddings  # noqa: B018  (its resource module loads on first access)

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
        try:
            if self._requested_dimensions is None:
                response = await client.embeddings.create(model=self.model, input=inputs)
            else:
                response = await client.embeddings.create(
                    model=self.model, input=inputs, dimensions=self._requested_dimensions
                )
        except openai.OpenAIError as exc:
            raise map_openai_error(
                exc, model=self.model, base_url=self._connection.described_base_url
            ) from exc
        if len(response.data) != len(inputs):
            raise LLMError(
                f"embedding model {self.model!r} returned {len(response.data)} vectors "
                f"for {len(inputs)} texts"
            )
        ordered = sorted(response.data, key=lambda item: item.index)  # order is not promised
        return np.asarray([item.embedding for item in ordered], dtype=np.float32)
