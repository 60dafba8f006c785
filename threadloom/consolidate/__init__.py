"""Consolidation (issue 20): near-duplicate memories, notes and quotes merged into a survivor that keeps
every edge and source, stale threads idled, claims and tasks of gone holders released."""
