"""Erasure in the store: what `forget` picks, what it leaves, and the database file's bytes afterwards.

Transcripts are ingested from real Claude Code JSONL files by the real ingester, memories and notes are
written by their services, vectors by the engine's embedding pass (a hashing embedder); the store is a
real SQLite file whose bytes (and its write-ahead log's) are read back, and a real PostgreSQL database (the
`backend` fixture) whose every text column is searched afterwards (tests/store_scan.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.fakes import HashingEmbedder
from tests.store_scan import holding
from threadloom.dialog.model import DialogFilters
from threadloom.dialog.search import DialogSearch
from threadloom.erasure.service import Eraser
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.ingest.service import IngestConfig, Ingester
from threadloom.memory.model import NewMemory
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store.base import Store
from threadloom.store.erasure import Selector
from threadloom.store.sqlite import SqliteStore
from threadloom.store.terms import stems

MARKER = "zqxvelmorant"  # in one message, one memory and their full-text rows
DAY = 86_400_000
NOV_1 = 1_793_491_200_000  # 2026-11-01T00:00:00Z
ANA = Provenance(session_id="t1", vendor="claude", project="/repo/shop", user="ana")
BEN = Provenance(session_id="t2", vendor="codex", project="/repo/shop", user="ben")


def _line(uuid: str, session: str, at: int, cwd: str, text: str, kind: str = "user") -> str:
    """One Claude Code line (threadloom/transcripts/claude_code.py cites the format)."""
    when = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    envelope = {"type": kind, "uuid": uuid, "sessionId": session, "timestamp": when, "cwd": cwd}
    return json.dumps(envelope | {"message": {"role": kind, "content": text}})


def _session_file(home: Path, session: str, lines: list[str]) -> Path:
    folder = home / ".claude" / "projects" / "-repo"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class World:
    store: Store
    engine: SearchEngine
    memory: MemoryService
    eraser: Eraser
    ana_home: Path
    ben_home: Path

    def ingest(self, owner: str) -> None:
        home = self.ana_home if owner == "ana" else self.ben_home
        Ingester(self.store, IngestConfig(owner, home, {})).run()

    def count(self, sql: str, params: dict[str, object] | None = None) -> int:
        return int(self.store.read(lambda r: r.scalar(sql, params)))

    def holds(self, text: str) -> bool:
        """SQLite: whether the file or its log holds `text`. PostgreSQL: whether any column of any table does."""
        if isinstance(self.store, SqliteStore):
            return text.encode() in self.file_bytes()
        return bool(holding(self.store, text))

    def file_bytes(self) -> bytes:
        assert isinstance(self.store, SqliteStore)
        path = self.store.path
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
def world(tmp_path: Path, backend: Backend) -> World:
    store = backend.open()
    engine = SearchEngine(store, HashingEmbedder())
    w = World(store, engine, MemoryService(store, engine), Eraser(store), tmp_path / "ana", tmp_path / "ben")
    _session_file(
        w.ana_home,
        "s-shop",
        [
            _line("a1", "s-shop", NOV_1 + 9 * 3600_000, "/repo/shop", f"please keep {MARKER} out of the logs"),
            _line("a2", "s-shop", NOV_1 + 10 * 3600_000, "/repo/shop", "the cart total is wrong", "assistant"),
        ],
    )
    _session_file(
        w.ana_home,
        "s-blog",
        [_line("b1", "s-blog", NOV_1 + 3 * DAY, "/repo/blog", "draft the release notes for the blog")],
    )
    _session_file(
        w.ben_home, "s-ben", [_line("c1", "s-ben", NOV_1 + 9 * 3600_000, "/repo/shop", "ben also checks the cart")]
    )
    w.ingest("ana")
    w.ingest("ben")
    w.memory.store(NewMemory(content=f"the deploy token lives in {MARKER} vault"), ANA)
    w.memory.store(NewMemory(content="the cart total is computed server side"), ANA)
    w.memory.store(NewMemory(content="ben prefers tabs over spaces in the cart code"), BEN)
    engine.embed_pending()
    return w


def _dialog_hits(world: World, query: str) -> list[str]:
    found = DialogSearch(world.store, world.engine).search(query, ANA, DialogFilters(), limit=10, window=1)
    texts = [h["text"] for h in found["hits"]]
    return texts + [t["text"] for h in found["hits"] for t in (*h["before"], *h["after"])]


def test_forget_by_text_erases_rows_index_vectors_and_the_bytes(world: World) -> None:
    stem = MARKER[:7]  # in the text and in its porter stem (a PostgreSQL document's tsvector holds the stems)
    assert world.holds(MARKER) and world.holds(stem)  # the checks below can fail: the marker was there
    assert any(MARKER in t for t in _dialog_hits(world, MARKER))
    docs_before = world.count("SELECT COUNT(*) FROM documents")
    vectors_before = world.count("SELECT COUNT(*) FROM document_vectors")

    done = world.eraser.forget("ana", Selector(text=MARKER), kinds=("transcripts", "memories"), dry_run=False)

    assert done["erased"]["transcripts"] == 1 and done["erased"]["memories"] == 1
    assert done["erased"]["documents"] == 2 and done["erased"]["vectors"] == 2
    assert world.count("SELECT COUNT(*) FROM documents") == docs_before - 2
    assert world.count("SELECT COUNT(*) FROM document_vectors") == vectors_before - 2
    assert world.count("SELECT COUNT(*) FROM document_terms WHERE term LIKE 'zqx%'") == 0
    compaction = done["compaction"]
    if isinstance(world.store, SqliteStore):
        assert world.count("SELECT COUNT(*) FROM documents_fts WHERE documents_fts MATCH :m", {"m": MARKER}) == 0
        assert compaction["complete"] is True and compaction["wal_bytes"] == 0
        assert b"keep" in world.file_bytes() or b"cart" in world.file_bytes()  # the rest is still there
    else:
        assert {"transcript_messages", "memories", "documents", "document_vectors"} <= set(compaction["vacuumed"])
        assert compaction["dead_rows_removed"] > 0 and compaction["complete"] is True
        assert "VACUUM FULL" in compaction["kept_by_postgresql"] and "WAL" in compaction["kept_by_postgresql"]
        assert holding(world.store, "cart total") != []  # the scan finds what is still there
        assert "pg_dump archive" in done["backups"]["note"] and "archived WAL" in done["backups"]["note"]
    assert not world.holds(MARKER) and not world.holds(stem)
    assert not any(MARKER in t for t in _dialog_hits(world, MARKER))  # a neighbouring turn's window too
    assert any("cart total" in t for t in _dialog_hits(world, "cart total"))
    # the tombstone keeps the key, not the text
    row = world.store.read(lambda r: r.one("SELECT role, text, tools FROM transcript_messages WHERE key = 'a1'"))
    assert row == {"role": "erased", "text": "", "tools": "[]"}
    assert "backup create" in done["backups"]["note"]


def test_a_dry_run_lists_what_would_go_and_changes_nothing(world: World) -> None:
    before = world.file_bytes() if isinstance(world.store, SqliteStore) else b""
    tables = ("transcript_messages WHERE role <> 'erased'", "memories", "documents", "document_vectors")
    counts = [world.count(f"SELECT COUNT(*) FROM {t}") for t in tables]

    plan = world.eraser.forget("ana", Selector(session="s-shop"), kinds=("transcripts", "memories", "notes"))

    assert plan["dry_run"] is True and plan["total"] == 2
    found = plan["would_erase"]["transcripts"]
    assert found["count"] == 2 and [s["text"][:11] for s in found["sample"]] == ["please keep", "the cart to"]
    assert plan["would_erase"]["memories"]["count"] == 0  # the memories were written in session t1
    assert [world.count(f"SELECT COUNT(*) FROM {t}") for t in tables] == counts
    if isinstance(world.store, SqliteStore):
        assert world.file_bytes() == before
    assert world.holds(MARKER)


@pytest.mark.parametrize(
    ("selector", "kinds", "expected"),
    [
        (Selector(session="s-blog"), ("transcripts",), {"b1"}),
        (Selector(project="/repo/blog"), ("transcripts",), {"b1"}),
        (Selector(project="/repo/shop"), ("transcripts",), {"a1", "a2"}),
        (Selector(source="claude-code", session="s-shop"), ("transcripts",), {"a1", "a2"}),
        (Selector(source="codex"), ("transcripts",), set()),
        (Selector(since=NOV_1 + 2 * DAY), ("transcripts",), {"b1"}),
        (Selector(since=NOV_1, until=NOV_1 + 9 * 3600_000 + 1), ("transcripts",), {"a1"}),
        (Selector(text="CART TOTAL"), ("transcripts",), {"a2"}),
    ],
)
def test_each_selector_picks_exactly_its_rows(
    world: World, selector: Selector, kinds: tuple[str, ...], expected: set[str]
) -> None:
    plan = world.eraser.forget("ana", selector, kinds)
    assert plan["would_erase"]["transcripts"]["count"] == len(expected)
    world.eraser.forget("ana", selector, kinds, dry_run=False)
    gone = world.store.read(
        lambda r: {k for (k,) in r.tuples("SELECT key FROM transcript_messages WHERE role = 'erased'")}
    )
    assert gone == expected
    assert world.count("SELECT COUNT(*) FROM transcript_messages WHERE owner = 'ben' AND role <> 'erased'") == 1


def test_memories_by_text_and_time_only_the_callers(world: World) -> None:
    plan = world.eraser.forget("ana", Selector(text="cart"), kinds=("memories",))
    assert plan["would_erase"]["memories"]["count"] == 1  # ben's cart memory is neither counted nor shown
    assert all("ben" not in s["text"] for s in plan["would_erase"]["memories"]["sample"])
    done = world.eraser.forget("ana", Selector(text="cart"), kinds=("memories",), dry_run=False)
    assert done["erased"]["memories"] == 1
    assert world.count("SELECT COUNT(*) FROM memories WHERE owner = 'ben'") == 1
    assert world.count("SELECT COUNT(*) FROM memories WHERE owner = 'ana'") == 1  # the marker memory stays


def test_another_user_can_neither_erase_nor_count_the_callers_rows(world: World) -> None:
    plan = world.eraser.forget("ben", Selector(text=MARKER), kinds=("transcripts", "memories", "notes"))
    assert plan["total"] == 0 and all(f["count"] == 0 for f in plan["would_erase"].values())
    plan = world.eraser.forget("ben", Selector(session="s-shop"))
    assert plan["total"] == 0
    done = world.eraser.forget("ben", Selector(project="/repo/shop"), kinds=("transcripts", "memories"), dry_run=False)
    assert done["erased"]["transcripts"] == 1 and done["erased"]["memories"] == 1  # ben's own only
    assert world.count("SELECT COUNT(*) FROM transcript_messages WHERE owner = 'ana' AND role <> 'erased'") == 3
    assert world.count("SELECT COUNT(*) FROM memories WHERE owner = 'ana'") == 2
    assert world.holds(MARKER)


def test_an_erased_message_is_not_ingested_again(world: World) -> None:
    world.eraser.forget("ana", Selector(session="s-shop"), dry_run=False)
    path = world.ana_home / ".claude" / "projects" / "-repo" / "s-shop.jsonl"
    # Replaced (a new inode: the cursor restarts at 0) and grown by one message.
    more = _line("a3", "s-shop", NOV_1 + 11 * 3600_000, "/repo/shop", "one more about the shipping page")
    lines = [*path.read_text().splitlines(), more]
    path.unlink()
    path.write_text("\n".join(lines) + "\n")
    world.ingest("ana")
    rows = world.store.read(
        lambda r: r.tuples("SELECT key, role, text FROM transcript_messages WHERE session_id = 's-shop' ORDER BY key")
    )
    assert rows == [("a1", "erased", ""), ("a2", "erased", ""), ("a3", "user", "one more about the shipping page")]
    assert _indexed(world, MARKER) == 0 and _indexed(world, "shipping") == 1


def _indexed(world: World, word: str) -> int:
    """Transcript documents whose full-text entry has `word`: FTS5's on SQLite, the `tsvector` on PostgreSQL."""
    if isinstance(world.store, SqliteStore):
        sql = "SELECT COUNT(*) FROM documents_fts f JOIN documents d ON d.id = f.rowid WHERE d.kind = 'transcript' "
        return world.count(sql + "AND documents_fts MATCH :m", {"m": word})
    sql = "SELECT COUNT(*) FROM documents WHERE kind = 'transcript' AND fts @@ CAST(:q AS tsquery)"
    return world.count(sql, {"q": " & ".join(f"'{s}'" for s in stems(word))})


@pytest.mark.parametrize(
    ("selector", "kinds", "message"),
    [
        (Selector(), ("transcripts",), "needs a selector"),
        (Selector(text="a"), ("transcripts",), "text: 3-"),
        (Selector(text="x" * 5_000), ("transcripts",), "text: 3-"),
        (Selector(session="s"), ("everything",), "not one of"),
        (Selector(session="s"), (), "at least one"),
        (Selector(since=NOV_1 + DAY, until=NOV_1), ("transcripts",), "since must be before until"),
    ],
)
def test_a_clumsy_call_is_refused_before_anything_is_read(
    world: World, selector: Selector, kinds: tuple[str, ...], message: str
) -> None:
    before = world.count("SELECT COUNT(*) FROM transcript_messages WHERE role <> 'erased'")
    with pytest.raises(InvalidInput, match=message):
        world.eraser.forget("ana", selector, kinds, dry_run=False)
    assert world.count("SELECT COUNT(*) FROM transcript_messages WHERE role <> 'erased'") == before


@pytest.mark.slow
def test_on_postgresql_an_older_snapshot_keeps_the_old_rows_and_the_answer_says_so(postgres_url: str) -> None:
    """VACUUM removes no row version a transaction begun before the erasure can still see: `complete` is
    false with the reason, and a VACUUM after that transaction ends removes them."""
    import psycopg

    from threadloom.store.postgres import open_postgres
    from threadloom.store.postgres_vacuum import vacuum

    store = open_postgres(postgres_url)
    try:
        MemoryService(store, SearchEngine(store, HashingEmbedder())).store(NewMemory(content=f"{MARKER} mat"), ANA)
        with psycopg.connect(postgres_url, autocommit=True) as old:
            old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            assert old.execute("SELECT COUNT(*) FROM memories").fetchone() == (1,)  # its snapshot is taken
            done = Eraser(store).forget("ana", Selector(text=MARKER), ("memories",), dry_run=False)
            kept = done["compaction"]
            assert kept["complete"] is False and kept["kept_in"]["memories"] > 0 and "could still see" in kept["reason"]
            assert old.execute("SELECT COUNT(*) FROM memories").fetchone() == (1,)  # what it keeps them for
            old.execute("COMMIT")
        again = vacuum(store, kept["vacuumed"])
        assert again["complete"] is True and again["dead_rows_kept"] == 0 and again["dead_rows_removed"] > 0
        assert not holding(store, MARKER)
    finally:
        store.close()
