"""Threads: a git-friendly tree of thread summaries (files, tree, context)."""
