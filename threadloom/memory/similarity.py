"""How alike a new memory is to stored ones: cosine of embeddings when both have one, otherwise
the overlap of their words. Auto-linking and conflict hints (`conflicts.py`) both start here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from threadloom.memory.conflicts import conflict_hint
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters
from threadloom.search.query import STOPWORDS
from threadloom.store import document_vectors
from threadloom.store.base import Store

if TYPE_CHECKING:
    from threadloom.search.embedder import Matrix

_WORD: Final = re.compile(r"[^\W_]+", re.UNICODE)
# Word overlap (Jaccard of content words) that links without a model: restatements of one fact
# share about half their content words; merely related statements, a third.
WORDS_LINK_FLOOR: Final = 0.5
QUERY_TERMS: Final = 8  # a restatement shares its rarest words; scoring all of a long text's words costs a lot


@dataclass(frozen=True)
class Similar:
    ref: str
    content: str
    similarity: float
    measure: str  # "cosine" or "words"


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def overlap(a: str, b: str) -> float:
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa or wb else 0.0


def link_floor(recall_floor: float) -> float:
    return recall_floor + (1.0 - recall_floor) * 0.75


class SimilarityFinder:
    def __init__(self, store: Store, engine: SearchEngine) -> None:
        self._store = store
        self._engine = engine

    def embed(self, text: str) -> Matrix | None:
        """The text's vector as a stored document, or None while no model is loaded."""
        embedder = self._engine.embedder
        return embedder.embed_documents([text])[0] if embedder is not None else None

    def link_floor(self, measure: str) -> float:
        """An auto-link is permanent structure, so its floor sits three quarters of the way from recall's
        floor to 1 (0.94 for the local e5). Halfway (0.875) linked 98.5% of LoCoMo dev turns to an
        earlier one, nearly all to three: a hairball; 0.94 links 24% of them."""
        if measure == "words" or self._engine.embedder is None:
            return WORDS_LINK_FLOOR
        return link_floor(self._engine.embedder.dense_floor)

    def conflict(self, content: str, candidate: Similar) -> str | None:
        """Why `content` may correct or contradict a similar memory, or None (`conflicts.py`)."""
        embedder = self._engine.embedder
        measure = candidate.measure if embedder is not None else "words"
        recall_floor = embedder.dense_floor if embedder is not None else 0.0
        return conflict_hint(content, candidate.content, candidate.similarity, measure, recall_floor)

    def similar(self, content: str, vector: Matrix | None, filters: Filters, scan: int) -> list[Similar]:
        """The `scan` best search hits for `content`, each with its similarity, most similar first."""
        hits = self._engine.search(content, filters, scan, vector=vector, max_terms=QUERY_TERMS).hits
        embedder = self._engine.embedder
        stored: dict[int, bytes] = {}
        if vector is not None and embedder is not None and hits:
            ids = [h.doc_id for h in hits]
            rows = self._store.read(lambda r: document_vectors.vectors_of(r, embedder.fingerprint, ids, filters))
            stored = {row[0]: row[1] for row in rows}
        found = []
        for hit in hits:
            if hit.doc_id in stored and vector is not None:
                import numpy as np

                cosine = float(np.dot(vector, np.frombuffer(stored[hit.doc_id], dtype=np.float32)))
                found.append(Similar(hit.ref, hit.body, cosine, "cosine"))
            else:  # no model, or this one is not embedded yet
                found.append(Similar(hit.ref, hit.body, overlap(content, hit.body), "words"))
        return sorted(found, key=lambda s: -s.similarity)
