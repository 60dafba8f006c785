"""Keeping a long-running store small and fast: retention per kind and compaction while it serves."""
