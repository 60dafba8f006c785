"""`threadloom reindex`: give every document a current vector of the configured embedder."""

from __future__ import annotations

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from threadloom.cli.app import out, settings
from threadloom.runtime import open_settings_store
from threadloom.search.embedders import configured_embedder
from threadloom.search.engine import SearchEngine


def reindex() -> None:
    """Embed every document that has no vector of the configured embedder, or a stale one.

    Safe to stop at any time: the next run resumes with what is still missing. Servers may
    keep running meanwhile.
    """
    s = settings()
    embedder = configured_embedder(s)
    if embedder is None:
        out.print("no embedder configured (THREADLOOM_EMBEDDER); full-text search needs no reindex")
        raise typer.Exit(0)
    store = open_settings_store(s)
    try:
        engine = SearchEngine(store, embedder)
        done, total = engine.coverage() or (0, 0)
        out.print(f"embedder {embedder.fingerprint}: {done:,} of {total:,} documents current")
        with Progress(
            TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=out
        ) as progress:
            task = progress.add_task("embed", total=total, completed=done)
            count = engine.embed_pending(lambda d, t: progress.update(task, completed=d, total=t))
    finally:
        store.close()
    out.print(f"embedded {count:,} document(s)")
