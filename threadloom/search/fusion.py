"""Combining ranked lists from several retrievers into one ranking.

Weighted reciprocal-rank fusion: each retriever contributes weight / (k + rank). Plain RRF
(equal weights) lets a weak retriever drag down a strong one; the weights and k here were
tuned on the LoCoMo dev split (bench/locomo), never on its test split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FusionWeights:
    lexical: float = 1.0
    dense: float = 1.0
    graph: float = 0.5
    k: float = 60.0
    temporal_boost: float = 0.5  # added as weight / (k + 1) for a document inside a time window the query names


def fuse(
    ranked: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: float
) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
    """Fused scores per document, and each document's rank in each list (1-based) for explanations."""
    scores: dict[int, float] = {}
    why: dict[int, dict[str, float]] = {}
    for signal, ids in ranked.items():
        weight = weights.get(signal, 0.0)
        for rank, doc_id in enumerate(ids, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
            why.setdefault(doc_id, {})[signal] = rank
    return scores, why
