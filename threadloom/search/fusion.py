"""Combining the retrievers' scores into one ranking.

Each retriever's scores are min-max normalised over its own candidates, then mixed with
weights: plain reciprocal-rank fusion throws the score margins away and, measured on the
LoCoMo dev split, lost to BM25 alone, while this mix beat both parts (bench/locomo). A
document a retriever did not return counts 0 for it. The weights were tuned on the dev
split only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FusionWeights:
    lexical: float = 0.5
    dense: float = 0.5
    graph: float = 0.1  # spreading activation along memory edges; see ARCHITECTURE.md for what was measured
    temporal_boost: float = 0.3  # added to a document inside a time window the question names
    source_boost: float = 0.3  # added to a document whose source (speaker, author) the question names


def fuse(
    scored: Mapping[str, Sequence[tuple[int, float]]], weights: Mapping[str, float]
) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
    """Fused scores per document, and each document's normalised score per signal, for explanations
    (rounded only for the hits returned). Each signal is min-max normalised to [0, 1] over its own
    candidates; a single candidate, or all equal, scores 1."""
    scores: dict[int, float] = {}
    why: dict[int, dict[str, float]] = {}
    for signal, pairs in scored.items():
        if not pairs:
            continue
        weight = weights.get(signal, 0.0)
        values = [score for _, score in pairs]
        low = min(values)
        span = max(values) - low
        for doc_id, score in pairs:
            value = 1.0 if span == 0 else (score - low) / span
            scores[doc_id] = scores.get(doc_id, 0.0) + weight * value
            if doc_id in why:
                why[doc_id][signal] = value
            else:
                why[doc_id] = {signal: value}
    return scores, why
