"""A deterministic embedder for tests, plugged in through the real embedder seam."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from threadloom.search.embedder import fingerprint

# Words that the fake treats as meaning the same thing, so dense search can find what BM25 cannot.
SYNONYMS = {"automobile": "car", "vehicle": "car", "canine": "dog", "puppy": "dog"}


class HashingEmbedder:
    """Bag of words hashed into `dimension` buckets, with a few synonyms folded together."""

    def __init__(self, dimension: int = 64, revision: str = "1") -> None:
        self._dimension = dimension
        self._fingerprint = fingerprint("fake", "hashing", dimension, revision)
        self.calls = 0

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def uses_every_core(self) -> bool:
        return False

    @property
    def dense_floor(self) -> float:
        return 0.0

    def _one(self, text: str) -> npt.NDArray[np.float32]:
        vec = np.zeros(self._dimension, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            word = SYNONYMS.get(word, word)
            bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
            vec[bucket % self._dimension] += 1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, self._dimension), np.float32)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return self._one(text)
