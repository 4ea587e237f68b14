"""An embedding model's vector size, as both remote embedders (`openai_embedder`,
`bedrock_embedder`) know it: configured, the model's native size, or learnt from its first answer."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from engine.errors import LLMError


class VectorSize:
    def __init__(self, model: str, configured: int | None, native: int | None, hint: str) -> None:
        self._model = model
        self._size = configured or native
        self._hint = hint  # how to configure it, for the error while it is unknown

    @property
    def value(self) -> int:
        """The size; `LLMError` naming the model and `hint` while it is still unknown."""
        if self._size is None:
            raise LLMError(
                f"the vector size of embedding model {self._model!r} is unknown until it has "
                f"embedded something; {self._hint}"
            )
        return self._size

    def empty(self) -> npt.NDArray[np.float32]:
        """The answer to no texts: no rows, of the size known so far (0 when none is)."""
        return np.zeros((0, self._size or 0), dtype=np.float32)

    def learned(self, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """`vectors` (one row per text) at unit length, their width kept as the size."""
        self._size = int(vectors.shape[1])
        return normalize(vectors)


def normalize(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Scale each row to unit L2 norm; all-zero rows stay zero rather than becoming NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return unit
