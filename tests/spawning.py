"""What the spawn and supervision tests share: the fake agent CLI, a parent session, a spawner."""

from __future__ import annotations

import sys
from pathlib import Path

from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.identity import Provenance
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.base import Store
from threadloom.store.sqlite import SqliteStore

FAKE = f"{sys.executable} {Path(__file__).parent / 'fake_agent.py'}"


def parent(store: Store, repo: Path) -> Provenance:
    info = SessionInfo(
        id="parent-1", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1, user="ana"
    )
    SessionService(store).open(info)
    return info.provenance()


def spawner(store: SqliteStore, home: Path, **kw: object) -> SpawnService:
    return SpawnService(store, home, SpawnConfig(command=FAKE, grace_s=1.0, **kw))  # type: ignore[arg-type]
