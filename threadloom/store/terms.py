"""Document frequencies of the full-text index's terms, kept beside it.

BM25 in FTS5 scores every document that matches any query term, so a term found in a large
share of the store costs a lot and tells little (its IDF is near zero). With each stem's
document frequency at hand, a query keeps its informative terms within a budget of postings
(bench/memory.py measured ~1.5 µs per posting). The frequencies follow every write of the
documents table, in the same transaction; stems come from the index's own tokenizer, so they
are exactly the index's terms.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, cast

import apsw

from threadloom.store.base import Reader, Writer

TOKENIZER_ARGS: Final = ["unicode61", "remove_diacritics", "2"]  # as documents_fts: porter over these
TOTAL: Final = ""  # the row holding the number of documents (no stem is empty)
_lock = threading.Lock()
_tokenizer: apsw.FTS5Tokenizer | None = None
_BATCH: ContextVar[list[tuple[str | frozenset[str], int]] | None] = ContextVar("threadloom_term_batch", default=None)


def stems(text: str) -> list[str]:
    """The index's terms for `text`, in order, repeats kept."""
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            _tokenizer = apsw.Connection(":memory:").fts5_tokenizer("porter", TOKENIZER_ARGS)
        tokens = _tokenizer(
            text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False, include_colocated=False
        )
    return [token for token in cast(list[str], tokens) if token]  # without offsets or synonyms: strings


def distinct(text: str) -> frozenset[str]:
    """The distinct terms a document with this text counts for (computable ahead of its write)."""
    return frozenset(stems(text)) | {TOTAL}


def count(w: Writer, text: str | frozenset[str], delta: int) -> None:
    """Add (delta 1) or take away (-1) one document with this text, or with these `distinct` terms (at the
    end of `batched`, inside one)."""
    pending = _BATCH.get()
    if pending is not None:
        pending.append((text, delta))
    else:
        count_many(w, [(text, delta)])


@contextmanager
def batched(w: Writer) -> Iterator[None]:
    """Count the documents written inside once, when it ends without an error (same transaction)."""
    pending: list[tuple[str | frozenset[str], int]] = []
    token = _BATCH.set(pending)
    try:
        yield
    finally:
        _BATCH.reset(token)
    count_many(w, pending)


def count_many(w: Writer, changes: Sequence[tuple[str | frozenset[str], int]]) -> None:
    """`count` for many documents at once, in one statement (a batch of transcript turns shares most of
    its words, and one upsert per stem cost more than the batch's full-text indexing)."""
    deltas: Counter[str] = Counter()
    for text, delta in changes:
        terms = distinct(text) if isinstance(text, str) else text
        if delta == 1:
            deltas.update(terms)  # counted in C
        elif delta == -1:
            deltas.subtract(terms)
        else:
            deltas.update(dict.fromkeys(terms, delta))
    changed = {stem: delta for stem, delta in deltas.items() if delta}
    if changed:  # one statement however many stems (`WHERE true`: SQLite's upsert-from-select rule)
        w.execute(
            "INSERT INTO document_terms (term, df) SELECT key, CAST(value AS INTEGER) FROM json_each(:deltas) "
            "WHERE true ON CONFLICT (term) DO UPDATE SET df = document_terms.df + excluded.df",
            {"deltas": json.dumps(changed)},
        )


def frequencies(r: Reader, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The number of documents, and each query term's document frequency (0 when unseen)."""
    stem_of = {t: (stems(t) or [t])[0] for t in terms}
    keys = {f"s{n}": s for n, s in enumerate({*stem_of.values(), TOTAL})}
    found = dict(
        r.tuples(f"SELECT term, df FROM document_terms WHERE term IN ({', '.join(':' + k for k in keys)})", keys)
    )
    return int(found.get(TOTAL, 0)), {t: int(found.get(s, 0)) for t, s in stem_of.items()}


def informative(r: Reader, terms: Sequence[str], postings_budget: int, max_terms: int | None = None) -> list[str]:
    """The query terms worth scoring: rarest first, within a budget of postings (the rarest is always
    kept), at most `max_terms` of them. Dropping common terms was measured to cost recall on LoCoMo
    while its stores are small, so nothing is dropped until the budget binds."""
    return choose(r, terms, postings_budget, max_terms)[0]


def choose(
    r: Reader, terms: Sequence[str], postings_budget: int, max_terms: int | None = None
) -> tuple[list[str], int, dict[str, int]]:
    """`informative`'s terms, with the number of documents and each term's document frequency (what a
    BM25 ceiling needs) from the same statement."""
    total, df = frequencies(r, terms)
    ranked = sorted(terms, key=lambda t: df[t])
    kept: list[str] = []
    spent = 0
    for term in ranked:
        if kept and spent + df[term] > postings_budget:
            break
        if max_terms is not None and len(kept) == max_terms:
            break
        kept.append(term)
        spent += df[term]
    return [t for t in terms if t in kept], total, df  # the caller's order
