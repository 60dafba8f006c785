"""The search engine: one index for every content kind; full-text, vectors and graph, fused."""
