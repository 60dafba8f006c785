"""The filters of a transcript search, answered in memory beside the sign codes (vector_index.py).

Listing every message that passes a filter (one vendor's, a month's) and looking each up took SQLite
~5 µs a document: 120 ms for a quarter of 100k messages, most of a dialog search. The columns a dialog
filter reads never change once a message is ingested (erasure deletes the row, and the exact re-scoring
in SQL still checks every filter), so each coded document keeps them here as small integers, and a filter
becomes a NumPy mask over the codes: well under a millisecond at 100k documents. Only filters made wholly
of those columns, over transcripts alone, are answered here; anything else (a memory's scope, its status)
goes to SQL as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from threadloom.search.model import Filters
from threadloom.store.vector_facets import FacetRow

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

TRANSCRIPT: Final = "transcript"
_NAMES: Final = ("kind", "project", "thread", "source", "owner", "vendor")


class Facets:
    """Per coded document, in code order: its time and each named column as an index into that column's
    distinct values."""

    def __init__(self) -> None:
        import numpy as np

        self._values: dict[str, dict[str | None, int]] = {name: {} for name in _NAMES}
        self._columns: dict[str, npt.NDArray[np.int32]] = {name: np.zeros(0, dtype=np.int32) for name in _NAMES}
        self._at: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def add(self, rows: list[FacetRow]) -> None:
        import numpy as np

        self._at = np.concatenate([self._at, np.asarray([row[3] for row in rows], dtype=np.int64)])
        for position, name in zip((2, 4, 5, 6, 7, 8), _NAMES, strict=True):
            known = self._values[name]
            coded = [known.setdefault(row[position], len(known)) for row in rows]  # type: ignore[arg-type]
            self._columns[name] = np.concatenate([self._columns[name], np.asarray(coded, dtype=np.int32)])

    def mask(self, filters: Filters) -> npt.NDArray[np.bool_] | None:
        """Which coded documents pass `filters`, exactly; None when the filters read anything kept only in
        SQL (then SQL decides)."""
        import numpy as np

        owner: str | None = None
        scope = filters.memory
        if filters.kinds != (TRANSCRIPT,) or filters.statuses:
            return None
        if scope is not None:
            if scope != type(scope)(viewer=scope.viewer, project=scope.project):
                return None  # a memory-only condition, or one on when it was written: SQL's
            owner = scope.viewer.user if scope.viewer is not None else None
        keep = self._is("kind", (TRANSCRIPT,))
        for name, values in (
            ("project", (filters.project,) if filters.project is not None else ()),
            ("project", (scope.project,) if scope is not None and scope.project is not None else ()),
            ("thread", (filters.thread,) if filters.thread is not None else ()),
            ("source", filters.sources),
            ("vendor", filters.vendors),
            ("owner", (owner,) if owner is not None else ()),
        ):
            if values:
                keep &= self._is(name, values)
        if filters.since is not None:
            keep &= self._at >= filters.since
        if filters.until is not None:
            keep &= self._at < filters.until
        return np.asarray(keep, dtype=np.bool_)

    def _is(self, name: str, values: tuple[str | None, ...]) -> npt.NDArray[np.bool_]:
        import numpy as np

        known = self._values[name]
        column = self._columns[name]
        keep = np.zeros(len(column), dtype=np.bool_)
        for value in {known[v] for v in values if v in known}:
            keep |= column == value
        return keep
