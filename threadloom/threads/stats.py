"""Sizes of a project's threads: summaries by status and tokens, and the contexts sessions loaded
(journaled as `thread.context` events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from threadloom.store.base import Store
from threadloom.threads.files import ThreadFiles
from threadloom.threads.tree import estimate_tokens


def thread_stats(store: Store, repo: Path, project: str) -> dict[str, Any]:
    """Summary sizes, and the context sessions loaded (conversation sizes come with transcripts)."""
    threads, problems = ThreadFiles(repo, project).load()
    sizes = sorted(estimate_tokens(t.summary.render()) for t in threads.values())
    loads = store.read(
        lambda r: r.tuples(
            "SELECT detail FROM events WHERE kind = 'thread.context' AND project = :repo ORDER BY id DESC LIMIT 500",
            {"repo": str(repo)},
        )
    )
    loaded = [int(json.loads(d).get("tokens", 0)) for (d,) in loads if json.loads(d).get("project") == project]
    by_status: dict[str, int] = {}
    for t in threads.values():
        by_status[t.status] = by_status.get(t.status, 0) + 1
    return {
        "project": project,
        "threads": len(threads),
        "by_status": by_status,
        "broken_files": len(problems),
        "summary_tokens": {
            "total": sum(sizes),
            "mean": round(sum(sizes) / len(sizes), 1) if sizes else 0,
            "max": sizes[-1] if sizes else 0,
        },
        "context_loads": {
            "count": len(loaded),
            "mean_tokens": round(sum(loaded) / len(loaded), 1) if loaded else None,
            "max_tokens": max(loaded) if loaded else None,
        },
        "conversation_tokens": None,
        "caveats": ["conversation sizes are not known yet: they come from transcript ingestion"],
    }
