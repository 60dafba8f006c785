"""Paraphrase clusters: a new candidate joins the cluster of the most similar pending one of its owner when
they say the same thing. By cosine of the search engine's embeddings when a model is loaded (the floor is
the one memories auto-link at: restatements, not merely related sentences), else by the overlap of their
word stems (CJK: character pairs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from threadloom.learning.locales import any_cue
from threadloom.memory.similarity import link_floor
from threadloom.search.query import STOPWORDS
from threadloom.store.base import Row

if TYPE_CHECKING:
    from threadloom.search.embedder import Embedder, Matrix

TEXT_FLOOR: Final = 0.5  # stem overlap (Jaccard) of two restatements of one rule
POSTINGS: Final = 200
STEM: Final = 5  # "tests"/"test", "pushing"/"push": a word's first letters stand for it
_WORD: Final = re.compile(r"[^\W\d_]+")
_CJK: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")


@dataclass(frozen=True)
class Match:
    """Where a new candidate goes: an existing candidate's cluster (`cluster`), or the cluster of an earlier
    new candidate of the same batch (`batch_index`), or neither (its own)."""

    cluster: int | None
    batch_index: int | None
    similarity: float | None


@lru_cache(maxsize=8_192)  # each pass compares with the same pending peers again
def stems(text: str) -> frozenset[str]:
    """The word stems (CJK: character pairs) of what a candidate says, without its cue ("always", "next
    time"): two restatements share their content, not their cue."""
    lowered = any_cue().sub(" ", text.lower())
    out = {w[:STEM] for w in _WORD.findall(_CJK.sub(" ", lowered)) if len(w) > 2 and w not in STOPWORDS}
    for run in _CJK.findall(lowered):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(out)


def text_similarity(a: str, b: str) -> float:
    sa, sb = stems(a), stems(b)
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


class Clusterer:
    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder

    @property
    def measure(self) -> str:
        return "cosine" if self.embedder is not None else "words"

    def vectors(self, texts: Sequence[str]) -> tuple[list[bytes | None], str | None]:
        """The texts' embeddings as stored bytes and the model's fingerprint (Nones without a model)."""
        if self.embedder is None or not texts:
            return [None] * len(texts), None
        import numpy as np

        matrix = self.embedder.embed_documents(list(texts))
        return [row.astype(np.float32).tobytes() for row in matrix], self.embedder.fingerprint

    def assign(
        self, owners: Sequence[str], texts: Sequence[str], vectors: Sequence[bytes | None], existing: Sequence[Row]
    ) -> list[Match]:
        """Each new candidate's cluster, compared with `existing` pending ones of the same owner and with the
        earlier ones of this batch."""
        fingerprint = self.embedder.fingerprint if self.embedder is not None else None
        pools: dict[str, _Pool] = {}
        for row in existing:
            vec = _vector(row["vector"]) if row["vector_model"] == fingerprint else None
            pool = pools.setdefault(str(row["owner"]), _Pool())
            pool.add(int(row["cluster"]), None, stems(str(row["text"])), vec)
        floor = link_floor(self.embedder.dense_floor) if self.embedder is not None else TEXT_FLOOR
        out: list[Match] = []
        for i, (owner, text, raw) in enumerate(zip(owners, texts, vectors, strict=True)):
            pool = pools.setdefault(owner, _Pool())
            vec, words = _vector(raw), stems(text)
            score, at = pool.nearest(vec) if self.embedder is not None else pool.overlapping(words)
            if at is not None and score >= floor:
                out.append(Match(pool.clusters[at], pool.indexes[at], round(score, 3)))
            else:
                out.append(Match(None, None, None))
            pool.add(None, i, words, vec)
        return out


class _Pool:
    """One owner's candidates to compare with: a word index (only the latest POSTINGS per stem are scanned,
    so a stem every candidate shares costs a constant) and a stack of vectors."""

    def __init__(self) -> None:
        self.clusters: list[int | None] = []
        self.indexes: list[int | None] = []
        self.stems: list[frozenset[str]] = []
        self.exact: dict[frozenset[str], int] = {}
        self.postings: dict[str, list[int]] = {}
        self.matrix: Matrix | None = None  # rows 0..len(vector_at), grown by doubling
        self.vector_at: list[int] = []

    def add(self, cluster: int | None, index: int | None, words: frozenset[str], vec: Matrix | None) -> None:
        import numpy as np

        at = len(self.clusters)
        self.clusters.append(cluster)
        self.indexes.append(index)
        self.stems.append(words)
        self.exact.setdefault(words, at)
        for w in words:
            self.postings.setdefault(w, []).append(at)
        if vec is not None:
            n = len(self.vector_at)
            if self.matrix is None or n == len(self.matrix):
                grown = np.zeros((max(64, 2 * n), len(vec)), dtype=np.float32)
                if self.matrix is not None:
                    grown[:n] = self.matrix
                self.matrix = grown
            self.matrix[n] = vec
            self.vector_at.append(at)

    def overlapping(self, words: frozenset[str]) -> tuple[float, int | None]:
        if not words:
            return 0.0, None
        if words in self.exact:
            return 1.0, self.exact[words]
        shared: dict[int, int] = {}
        for w in words:
            for at in self.postings.get(w, ())[-POSTINGS:]:
                shared[at] = shared.get(at, 0) + 1
        best: tuple[float, int | None] = (0.0, None)
        for at, n in shared.items():
            score = n / (len(words) + len(self.stems[at]) - n)
            if score > best[0]:
                best = (score, at)
        return best

    def nearest(self, vec: Matrix | None) -> tuple[float, int | None]:
        import numpy as np

        if vec is None or self.matrix is None:
            return 0.0, None
        scores = self.matrix[: len(self.vector_at)] @ vec
        best = int(np.argmax(scores))
        return float(scores[best]), self.vector_at[best]


def _vector(raw: bytes | None) -> Matrix | None:
    import numpy as np

    if raw is None:
        return None
    return np.frombuffer(raw, dtype=np.float32)
