"""The memory graph: memories, typed edges, scoring, lifecycle and forgetting."""
