"""SQL of `m028_consolidation` (threadloom/consolidate/): one row per merge, and a note's supersession.

Kept beside `migrations.py` (which names and orders them) so neither file outgrows the module cap.
"""

from __future__ import annotations

from typing import Final

M028_CONSOLIDATION_SQL: Final = """
    -- A near-duplicate merged into its survivor: `kind` memory, note or quote; `merged` and `survivor` are a
    -- memory id or a thread_notes id. The merged row stays (superseded, out of the search index); this row
    -- keeps what it brought: its provenance (`source`, JSON) and the edges moved to the survivor (`edges`).
    CREATE TABLE consolidation_merges (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        survivor TEXT NOT NULL,
        merged TEXT NOT NULL,
        owner TEXT NOT NULL,
        similarity REAL,
        words REAL NOT NULL,
        why TEXT NOT NULL,
        source TEXT NOT NULL,
        edges TEXT NOT NULL DEFAULT '[]',
        merged_at INTEGER NOT NULL,
        UNIQUE (kind, merged)
    );
    CREATE INDEX consolidation_merges_survivor ON consolidation_merges (kind, survivor);

    -- A note or quote merged into another: still there, explainable, no longer listed or searched.
    ALTER TABLE thread_notes ADD COLUMN superseded_by INTEGER;
"""
