"""Concepts: abstract regularities a user's agents noticed across sources ("the flaky tests are always the
ones touching the clock"). A write deduplicates: the same words (normalised: case, punctuation and spacing
aside) or, with an embedder loaded, a restatement (cosine at the memory auto-link floor) is the same concept,
observed again. Each observation keeps its source; a concept's confidence grows with each distinct source
(1 - (1 - BASE)^n), never with the same source repeated, so one chatty session cannot make a rule certain.
Per owner: another user's concepts are never compared with, shown or changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput
from threadloom.identity import check_user
from threadloom.learning.curator_audit import normalised
from threadloom.memory.similarity import link_floor
from threadloom.scrub import SCRUB, Scrubber
from threadloom.store.base import Reader, Store, Writer

if TYPE_CHECKING:
    from threadloom.search.embedder import Embedder

MAX_TEXT: Final = 500  # a regularity is a sentence or two
MAX_SOURCE: Final = 200
BASE: Final = 0.3  # one source's worth of confidence
PEERS: Final = 2_000  # an owner's most confident concepts a new one is compared with by vector


def confidence(sources: int) -> float:
    return round(1.0 - (1.0 - BASE) ** max(sources, 0), 4)


def check_text(text: object, limit: int, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{what} needs text")
    if len(text) > limit:
        raise InvalidInput(f"{what} is at most {limit} characters, not {len(text)}")
    text = " ".join(text.split())
    if not normalised(text):
        raise InvalidInput(f"{what} needs words, not only punctuation")
    return text


def check_source(source: object) -> str:
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_SOURCE:
        raise InvalidInput(f"source is a short reference to where it was seen (1-{MAX_SOURCE} characters)")
    return " ".join(source.split())


class Concepts:
    def __init__(
        self, store: Store, scrubber: Scrubber = SCRUB, embedder: Callable[[], Embedder | None] = lambda: None
    ) -> None:
        self.store = store
        self.scrubber = scrubber
        self.embedder = embedder

    def observe(self, owner: str, text: str, source: str, session_id: str | None = None) -> dict[str, Any]:
        """Note that `text` was seen at `source`: a new concept, or one more observation of the same one."""
        import numpy as np

        owner = check_user(owner, "the owner")
        text = self.scrubber.text(check_text(text, MAX_TEXT, "a concept"))
        source = self.scrubber.text(check_source(source))
        norm = normalised(text)
        embedder = self.embedder()
        vector = model = None
        if embedder is not None:
            vector = np.asarray(embedder.embed_documents([text])[0], dtype=np.float32)
            vector /= max(float(np.linalg.norm(vector)), 1e-9)
            model = embedder.fingerprint
        floor = link_floor(embedder.dense_floor) if embedder is not None else 1.0
        now = now_ms()

        def tx(w: Writer) -> dict[str, Any]:
            row = w.one("SELECT id, text FROM concepts WHERE owner = :o AND norm = :n", {"o": owner, "n": norm})
            similarity: float | None = None
            if row is None and vector is not None:
                row, similarity = _nearest(w, owner, vector, model, floor)
            created = row is None
            if row is None:
                concept_id = w.insert(
                    "INSERT INTO concepts (owner, text, norm, vector, vector_model, confidence, created_at, "
                    "updated_at) VALUES (:o, :t, :n, :v, :m, 0, :now, :now)",
                    {"o": owner, "t": text, "n": norm, "v": None if vector is None else vector.tobytes(), "m": model,
                     "now": now},
                )  # fmt: skip
            else:
                concept_id = int(row["id"])
            new_source = w.execute(
                "INSERT INTO concept_observations (concept_id, source, text, session_id, observed_at) "
                "VALUES (:c, :s, :t, :sid, :now) ON CONFLICT (concept_id, source) DO NOTHING",
                {"c": concept_id, "s": source, "t": text, "sid": session_id, "now": now},
            )
            n = int(w.scalar("SELECT count(*) FROM concept_observations WHERE concept_id = :c", {"c": concept_id}))
            w.execute(
                "UPDATE concepts SET observations = :n, confidence = :conf, updated_at = :now WHERE id = :c",
                {"n": n, "conf": confidence(n), "now": now, "c": concept_id},
            )
            shown = text if created else str(row["text"]) if row is not None else text
            out: dict[str, Any] = {"id": concept_id, "text": shown, "created": created, "new_source": bool(new_source)}
            out |= {"sources": n, "confidence": confidence(n)}
            if not created and similarity is not None:
                out["similarity"] = round(similarity, 3)  # a restatement, not the same words
            return out

        return self.store.write(tx)

    def listing(self, owner: str, limit: int = 20, min_confidence: float = 0.0) -> list[dict[str, Any]]:
        """`owner`'s concepts, most confident first, each with its latest sources."""
        owner = check_user(owner, "the owner")
        return self.store.read(lambda r: _listing(r, owner, limit, min_confidence))


def _nearest(w: Reader, owner: str, vector: Any, model: str | None, floor: float) -> tuple[Any, float | None]:
    import numpy as np

    rows = w.rows(
        "SELECT id, text, vector FROM concepts WHERE owner = :o AND vector_model = :m AND vector IS NOT NULL "
        "ORDER BY confidence DESC, id DESC LIMIT :n",
        {"o": owner, "m": model, "n": PEERS},
    )
    best, score = None, -1.0
    for row in rows:
        other = np.frombuffer(row["vector"], dtype=np.float32)
        if other.shape != vector.shape:
            continue
        s = float(other @ vector)
        if s > score:
            best, score = row, s
    return (best, score) if best is not None and score >= floor else (None, None)


def _listing(r: Reader, owner: str, limit: int, min_confidence: float) -> list[dict[str, Any]]:
    rows = r.rows(
        "SELECT id, text, confidence, observations, created_at, updated_at FROM concepts "
        "WHERE owner = :o AND confidence >= :c ORDER BY confidence DESC, updated_at DESC LIMIT :n",
        {"o": owner, "c": min_confidence, "n": max(1, min(limit, 200))},
    )
    out = []
    for row in rows:
        sources = r.rows(
            "SELECT source FROM concept_observations WHERE concept_id = :c ORDER BY observed_at DESC LIMIT 5",
            {"c": row["id"]},
        )
        out.append(dict(row) | {"sources": [s["source"] for s in sources]})
    return out
