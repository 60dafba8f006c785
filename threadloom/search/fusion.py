"""Combining the retrievers' scores into one ranking.

Each retriever's raw score is put on an absolute [0, 1] scale of its own, then the scores are mixed with
weights. Absolute: a document's calibrated score depends on the query and the document, never on what
else was found, so it means the same in a store of 5 documents and of 500k. Min-max over the candidates
(what fusion did first) gave the weaker of two candidates exactly 0 however close they were, so in a
small store a superseded memory outranked its correction by the whole lexical weight.

- Full-text: the document's BM25 as a share of the query's ceiling, the score of a document of average
  length holding every scored term many times ((k1 + 1) x each term's IDF). Raw BM25 grows with the
  store (IDF is the log of its size), so no constant fitted on raw scores holds at every size; the share
  does. On the LoCoMo dev split (R@10, categories 1-4) the share as it is did best: 82.4, against 82.1
  for a saturating share / (share + 1), 81.6 for its square root, and 79.5-80.8 for raw BM25 saturated
  as raw / (raw + c) with c from 3 to 20.
- Dense: (cosine - floor) / (1 - floor), the floor being the model's calibrated noise level (cosines at
  or under it are dropped). A power of 0.75 or 1.5 on it was no better (82.3, 80.8).

Weights and the engine's constants were re-tuned on the dev split for these scales (lexical 0.4, dense
0.6, thread prior 0.4: 82.4, against 82.3 with min-max and its own tuning). Plain reciprocal-rank fusion
throws the margins away and lost to BM25 alone there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BM25_K1 = 1.2  # FTS5's bm25() constants
BM25_FLOOR_IDF = 1e-6  # FTS5's IDF for a term found in half the documents or more


@dataclass(frozen=True)
class FusionWeights:
    lexical: float = 0.4
    dense: float = 0.6
    graph: float = 0.1  # spreading activation along memory edges; see ARCHITECTURE.md for what was measured
    temporal_boost: float = 0.3  # added to a document inside a time window the question names
    source_boost: float = 0.3  # added to a document whose source (speaker, author) the question names


def idf(documents: int, containing: int) -> float:
    """FTS5's BM25 inverse document frequency (never below its floor)."""
    value = math.log((documents - containing + 0.5) / (containing + 0.5)) if documents else 0.0
    return value if value > 0 else BM25_FLOOR_IDF


def bm25_ceiling(documents: int, frequencies: Sequence[int]) -> float:
    """What BM25 tends to for a document holding every scored term many times, of average length."""
    return (BM25_K1 + 1) * sum(idf(documents, df) for df in frequencies)


def lexical_scale(raw: float, ceiling: float) -> float:
    return min(1.0, max(0.0, raw / ceiling)) if ceiling > 0 else 0.0


def dense_scale(cosine: float, floor: float) -> float:
    return max(0.0, (cosine - floor) / max(1e-9, 1.0 - floor))


def fuse(
    scored: Mapping[str, Sequence[tuple[int, float]]], weights: Mapping[str, float]
) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
    """Fused scores per document from each signal's calibrated scores (in [0, 1]; a document a signal did
    not return counts 0 for it), and each document's score per signal, for explanations (rounded only
    for the hits returned)."""
    scores: dict[int, float] = {}
    why: dict[int, dict[str, float]] = {}
    for signal, pairs in scored.items():
        weight = weights.get(signal, 0.0)
        for doc_id, value in pairs:
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * value
            if doc_id in why:
                why[doc_id][signal] = value
            else:
                why[doc_id] = {signal: value}
    return scores, why
