"""The SQL of `m025_probes`: one row per probe category per self-test run (threadloom/health/probes.py)."""

from __future__ import annotations

M025_PROBES_SQL = """
CREATE TABLE probe_results (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    category TEXT NOT NULL,
    ok INTEGER NOT NULL,
    ms REAL NOT NULL,
    error TEXT,
    trigger TEXT NOT NULL
);
CREATE INDEX probe_results_category ON probe_results (category, at);
CREATE INDEX probe_results_at ON probe_results (at);
"""
