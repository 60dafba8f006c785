"""The embedder seam: a handful of methods, so a real model, an HTTP endpoint and a test fake all fit.

Vectors are unit-normalised float32. Each embedder has a fingerprint (backend, model,
dimension, revision); stored vectors carry it, and a query is only ever compared with
vectors of the same fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    import numpy.typing as npt

    Matrix: TypeAlias = npt.NDArray[np.float32]

MISSING_EXTRA: Final = "the local embedder needs the `embed` extra: pip install 'threadloom[embed]'"


class Embedder(Protocol):
    @property
    def fingerprint(self) -> str:
        """`backend:model:dimension:revision`; changes whenever vectors stop being comparable."""
        ...

    @property
    def dimension(self) -> int: ...

    @property
    def dense_floor(self) -> float:
        """Cosine under which a match is noise for this model (calibrated per model; 0 keeps everything)."""
        ...

    @property
    def uses_every_core(self) -> bool:
        """Whether embedding keeps every core of this machine busy (a local model on all of them): a search
        then embeds its question before its other work rather than beside it, which would slow both."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """One unit vector per text, shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> Matrix:
        """One unit vector, shape (dimension,)."""
        ...


def fingerprint(backend: str, model: str, dimension: int, revision: str) -> str:
    return f"{backend}:{model}:{dimension}:{revision}"
