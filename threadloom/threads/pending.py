"""Repository files a keyed call wrote before the transaction that indexes them (and claims its key).

A thread's file is written first, then indexed: a process killed in between leaves the file unindexed and the
key free, and the retry used to write a second file under the next name (`x-2.md`) beside the first. So the
call records each file it is about to write (its real path and the sha256 of its text, in the store, under
the call's key: `requests.record_files`) before writing it; the claim drops the record in the index's
transaction. A retry with the key takes over a file the record names only while the file still holds exactly
the text recorded, so a file typed by hand (or changed since) is never taken for the call's own. Taking it
over writes no file: it reads through `Repository`, which refuses a link out of the repository.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from threadloom import requests
from threadloom.errors import InvalidInput
from threadloom.store.base import Store
from threadloom.threads.repository import Repository


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record(store: Store, repo: Repository, rel: str, text: str) -> None:
    """Before `rel` is written with `text` (a no-op for a call without a key)."""
    requests.record_files(store, {_where(repo, rel): digest(text)})


def left(store: Store, repo: Repository, rels: Iterable[str]) -> dict[str, str]:
    """Those of `rels` an earlier call with the current key wrote and never indexed, still byte for byte as it
    wrote them: {rel: text}. Empty without a key, or when nothing was left."""
    recorded = requests.unfinished_files(store)
    if not recorded:
        return {}
    found: dict[str, str] = {}
    for rel in rels:
        expected = recorded.get(_where(repo, rel))
        if expected is None:
            continue
        try:
            text = repo.read_text(rel)
        except InvalidInput:  # unreadable, or a link out of the repository: not the call's file
            continue
        if text is not None and digest(text) == expected:
            found[rel] = text
    return found


def _where(repo: Repository, rel: str) -> str:
    return f"{repo.root}/{rel}"
