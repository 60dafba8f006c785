"""Conflict hints on a labelled set: precision and recall of the word heuristic (the baseline) and of
the detector that uses the model's vectors, with and without the model, in one run.

tests/data/conflicts.jsonl holds pairs of coding-agent memories (an older one, a newer one), each
labelled conflict (a reworded correction or contradiction), restatement (the same fact in other words),
related (the same topic, a compatible fact) or unrelated, and split into a tuning half and a held-out
half. Thresholds are tuned on the tuning half only (`--tune` searches them); the figures that count are
the held-out half's. The pairs are scored as the store path scores a candidate: the cosine of the two
texts' stored vectors with the model, their word overlap without it.

    python bench/conflicts.py [--tune] [--show]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from threadloom.memory import conflicts
from threadloom.memory.conflicts import ConflictFloors, conflict_hint, conflict_reason, reworded_conflict
from threadloom.memory.similarity import overlap

DATA = Path(__file__).resolve().parents[1] / "tests/data/conflicts.jsonl"
LABELS = ("conflict", "restatement", "related", "unrelated")
WORDS_FLOOR_BEFORE = 0.3  # what the store path required before the vectors were used (unchanged)


@dataclass(frozen=True)
class Pair:
    old: str
    new: str
    label: str
    split: str
    cosine: float | None  # of the passages' vectors, None without the model
    words: float  # word overlap


Detector = Callable[[Pair], bool]


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pairs_with_similarity(rows: list[dict[str, str]], with_model: bool) -> tuple[list[Pair], float]:
    cosines: dict[tuple[str, str], float] = {}
    floor = 0.0
    if with_model:
        import numpy as np

        from threadloom.search.embedders import local_embedder

        embedder = local_embedder()
        floor = embedder.dense_floor
        texts = sorted({r[side] for r in rows for side in ("old", "new")})
        vectors = dict(zip(texts, embedder.embed_documents(texts), strict=True))
        cosines = {(r["old"], r["new"]): float(np.dot(vectors[r["old"]], vectors[r["new"]])) for r in rows}
    pairs = [
        Pair(r["old"], r["new"], r["label"], r["split"], cosines.get((r["old"], r["new"])), overlap(r["new"], r["old"]))
        for r in rows
    ]
    return pairs, floor


def detectors(floor: float) -> dict[str, Detector]:
    """Each detector as the store path applies it to a candidate."""

    def before_words(p: Pair) -> bool:
        return p.words >= WORDS_FLOOR_BEFORE and conflict_reason(p.new, p.old) is not None

    def before_model(p: Pair) -> bool:
        return p.cosine is not None and p.cosine >= floor and conflict_reason(p.new, p.old) is not None

    def now_words(p: Pair) -> bool:
        return conflict_hint(p.new, p.old, p.words, "words", 0.0) is not None

    def now_model(p: Pair) -> bool:
        return p.cosine is not None and conflict_hint(p.new, p.old, p.cosine, "cosine", floor) is not None

    return {
        "words heuristic, no model (before)": before_words,
        "words heuristic, model (before)": before_model,
        "detector, no model": now_words,
        "detector, model": now_model,
    }


def prf(pairs: list[Pair], hinted: Detector) -> tuple[float, float, float, int, int, int]:
    tp = sum(1 for p in pairs if p.label == "conflict" and hinted(p))
    fp = sum(1 for p in pairs if p.label != "conflict" and hinted(p))
    fn = sum(1 for p in pairs if p.label == "conflict" and not hinted(p))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, tp, fp, fn


def tune(pairs: list[Pair], floor: float) -> None:
    """Every floor from 0.2 to 0.98 for each cue, on the tuning half: the best F1 (ties: precision), and
    for each cue the range of its floor that keeps that best with the others fixed at the chosen ones."""
    tuning = [p for p in pairs if p.split == "tune"]
    # The cues and the word heuristic do not depend on the floors: computed once per pair for the search.
    conflicts.cues = functools.lru_cache(maxsize=None)(conflicts.cues)  # type: ignore[assignment]
    conflicts.conflict_reason = functools.lru_cache(maxsize=None)(conflicts.conflict_reason)  # type: ignore[assignment]
    grid = [x / 100 for x in range(20, 99)]

    def f1_with(floors: ConflictFloors) -> tuple[float, float]:
        scored = prf(tuning, lambda p: p.cosine is not None and reworded(p, floors))
        return scored[2], scored[0]

    def reworded(p: Pair, floors: ConflictFloors) -> bool:
        assert p.cosine is not None
        return reworded_conflict(p.new, p.old, p.cosine, floor, floors) is not None

    coarse = [x / 100 for x in range(20, 99, 3)]
    best = max(itertools.product(coarse, coarse, coarse), key=lambda f: f1_with(ConflictFloors(*f)))
    chosen = ConflictFloors(*best)
    top = f1_with(chosen)
    print(f"tuning half ({len(tuning)} pairs): best F1 {top[0]:.3f} (precision {top[1]:.3f})")
    for cue in ("marker", "negation", "value"):
        keeps = [x for x in grid if f1_with(_with(chosen, cue, x)) == top]
        middle = (min(keeps) + max(keeps)) / 2
        print(f"  {cue:9} floor keeps it from {min(keeps):.2f} to {max(keeps):.2f} (middle {middle:.3f})")
    print(f"in use: {ConflictFloors()}")


def _with(floors: ConflictFloors, cue: str, value: float) -> ConflictFloors:
    fields = {"marker": floors.marker, "negation": floors.negation, "value": floors.value} | {cue: value}
    return ConflictFloors(**fields)


def report(pairs: list[Pair], floor: float, show: bool) -> None:
    found = detectors(floor)
    for split in ("heldout", "tune"):
        part = [p for p in pairs if p.split == split]
        counts = {label: sum(p.label == label for p in part) for label in LABELS}
        print(f"\n{split} half: {len(part)} pairs ({', '.join(f'{n} {label}' for label, n in counts.items())})")
        print(f"{'':38} {'precision':>9} {'recall':>7} {'F1':>6}   tp fp fn   hinted: restated related unrelated")
        for name, hinted in found.items():
            if "model" in name and "no model" not in name and part[0].cosine is None:
                continue
            precision, recall, f1, tp, fp, fn = prf(part, hinted)
            wrong = [sum(1 for p in part if p.label == label and hinted(p)) for label in LABELS[1:]]
            print(
                f"{name:38} {precision:9.3f} {recall:7.3f} {f1:6.3f} {tp:4} {fp:2} {fn:2}"
                f"   {wrong[0]:16} {wrong[1]:7} {wrong[2]:9}"
            )
    if show:
        print("\nheld-out pairs the model's detector gets wrong:")
        model = found["detector, model"]
        for p in pairs:
            if p.split == "heldout" and p.cosine is not None and model(p) != (p.label == "conflict"):
                reason = conflict_hint(p.new, p.old, p.cosine, "cosine", floor)
                print(f"  {p.label:11} cos {p.cosine:.3f}  {p.old!r} -> {p.new!r}  [{reason}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--no-model", action="store_true", help="only the figures without the model")
    parser.add_argument("--tune", action="store_true", help="search the floors on the tuning half")
    parser.add_argument("--show", action="store_true", help="print the held-out pairs the detector gets wrong")
    args = parser.parse_args()
    rows = load(args.data)
    started = time.perf_counter()
    pairs, floor = pairs_with_similarity(rows, with_model=not args.no_model)
    print(f"{len(pairs)} pairs from {args.data}; similarity in {time.perf_counter() - started:.1f} s")
    if not args.no_model:
        print(f"model: the bundled local e5, recall floor {floor}; floors in use: {ConflictFloors()}")
    if args.tune:
        tune(pairs, floor)
    report(pairs, floor, args.show)


if __name__ == "__main__":
    main()
