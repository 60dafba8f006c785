"""Dialog search: the search engine over the caller's transcript messages, filters inside its queries.

Each filter (vendor, project, session, role, time range) is a condition of every retriever's SQL
(`search/model.Filters`), so the ranking only ever sees messages that pass it: a better match outside
the filter cannot push one inside it out of the results. Each hit comes with a short window of the
turns around it in its session; caveats say what an empty or out-of-range answer means.
"""

from __future__ import annotations

from typing import Any

from threadloom.clock import iso
from threadloom.dialog.model import HIT_CHARS, MAX_WINDOW, WINDOW_CHARS, DialogFilters, turn
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters, MemoryScope, SearchResult
from threadloom.store import dialog
from threadloom.store.base import Reader, Store
from threadloom.store.transcripts import DOCUMENT_KIND

MAX_HITS = 50


class DialogSearch:
    def __init__(self, store: Store, engine: SearchEngine) -> None:
        self._store = store
        self._engine = engine

    def search(
        self, query: str, prov: Provenance, f: DialogFilters, limit: int = 10, window: int = 1
    ) -> dict[str, Any]:
        if not 1 <= limit <= MAX_HITS:
            raise InvalidInput(f"limit must be between 1 and {MAX_HITS}")
        if not 0 <= window <= MAX_WINDOW:
            raise InvalidInput(f"window must be between 0 and {MAX_WINDOW}")
        viewer = prov.viewer()
        filters = Filters(
            kinds=(DOCUMENT_KIND,),
            project=f.project,
            thread=f.session,
            sources=f.roles,
            since=f.since,
            until=f.until,
            vendors=f.vendors,
            memory=MemoryScope(viewer=viewer),  # the owner rule (store/visibility.transcripts_sql)
        )
        result = self._engine.search(query, filters, limit)
        return self._store.read(lambda r: _render(r, viewer.user, result, f, window))


def _render(r: Reader, owner: str, result: SearchResult, f: DialogFilters, window: int) -> dict[str, Any]:
    rows = dialog.messages(r, owner, [int(h.ref) for h in result.hits])
    hits = []
    for h in result.hits:
        row = rows.get(int(h.ref))
        if row is None:  # removed since it was ranked
            continue
        hit = turn(row, HIT_CHARS) | {
            "session": row["session_id"],
            "vendor": row["source"],
            "project": row["project"],
            "score": h.score,
        }
        if window:
            args = (owner, row["source"], row["session_id"], row["at"], int(row["id"]), window)
            hit["before"] = [turn(x, WINDOW_CHARS) for x in dialog.before(r, *args)]
            hit["after"] = [turn(x, WINDOW_CHARS) for x in dialog.after(r, *args)]
        hits.append(hit)
    caveats = [c for c in result.caveats if not c.startswith("nothing matched")]
    caveats += caveats_for(r, owner, f, found=bool(hits))
    return {"hits": hits, "caveats": caveats, "signals": list(result.signals)}


def caveats_for(r: Reader, owner: str, f: DialogFilters, found: bool) -> list[str]:
    """What an answer does not say by itself: nothing ingested, a range outside what was captured, no hits."""
    first, last = dialog.span(r, owner)
    if first is None or last is None:
        return ["no transcripts of yours are ingested yet ('threadloom ingest' reads the agent CLIs' files)"]
    out = []
    covered = f"your transcripts cover {iso(first)} to {iso(last)}"
    if (f.until is not None and f.until <= first) or (f.since is not None and f.since > last):
        out.append(f"the time range asked is outside what was captured: {covered}")
    if not found:
        narrowed = [
            name
            for name, value in (
                ("vendors", f.vendors),
                ("project", f.project),
                ("session", f.session),
                ("roles", f.roles),
                ("since/until", f.since or f.until),
            )
            if value
        ]
        hint = f"drop a filter ({', '.join(narrowed)}), " if narrowed else ""
        out.append(
            f"no message matched; try other words, {hint}memory_recall for what was stored, or dialog_day for what "
            f"happened on a day ({covered})"
        )
    return out
