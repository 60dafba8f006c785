"""The transcript tables (m019) and their store functions: keys unique per owner, revisions replace,
cursors per file, coverage per source, and the owner-only visibility rule on the search documents. On both
backends, but the batch-counting comparison (two SQLite files)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from tests.conftest import Backend
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document, Filters, MemoryScope, Viewer
from threadloom.store import transcripts
from threadloom.store.base import Writer
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.store.transcripts import StoredMessage


def _message(key: str, text: str, at: int = 1_700_000_000_000) -> StoredMessage:
    return StoredMessage(
        source="claude-code",
        session_id="s1",
        key=key,
        role="user",
        text=text,
        tools="[]",
        at=at,
        cwd="/repo",
        project="/repo",
        model=None,
        format="claude-code/jsonl",
        path="/t.jsonl",
        offset=0,
    )


def _put(w: Writer, owner: str, m: StoredMessage, revises: bool = False) -> tuple[int, bool] | None:
    written = transcripts.upsert_message(w, owner, m, revises, now=1)
    if written is not None:
        SearchEngine.index(
            w, Document(kind="transcript", ref=str(written[0]), body=m.text, thread=m.session_id, source=m.role)
        )
    return written


def test_a_key_is_stored_once_per_owner_and_a_revision_replaces_it(backend: Backend) -> None:
    store = backend.open()
    first = store.write(lambda w: _put(w, "ann", _message("k1", "the lighthouse keeper")))
    assert first is not None and first[1]
    assert store.write(lambda w: _put(w, "ann", _message("k1", "the lighthouse keeper"))) is None
    assert store.write(lambda w: _put(w, "bob", _message("k1", "the lighthouse keeper"))) is not None
    revised = store.write(lambda w: _put(w, "ann", _message("k1", "the revised keeper"), revises=True))
    assert revised == (first[0], False)
    # Other content under a held key is the client's rewrite even unflagged (a whole file read again).
    assert store.write(lambda w: _put(w, "ann", _message("k1", "the keeper, again"))) == (first[0], False)
    texts = store.read(lambda r: r.tuples("SELECT owner, text FROM transcript_messages ORDER BY owner"))
    assert texts == [("ann", "the keeper, again"), ("bob", "the lighthouse keeper")]
    # An erased message stays erased when its file is read again, unless the client revised it since.
    store.write(lambda w: w.execute("UPDATE transcript_messages SET role = 'erased', text = '' WHERE owner = 'ann'"))
    assert store.write(lambda w: _put(w, "ann", _message("k1", "the keeper, again"))) is None
    assert store.write(lambda w: _put(w, "ann", _message("k1", "a new turn"), revises=True)) == (first[0], False)
    cover = store.read(lambda r: transcripts.coverage(r, "ann"))
    assert [(c["source"], c["messages"], c["sessions"]) for c in cover] == [("claude-code", 1, 1)]


def test_cursors_are_per_owner_and_file(backend: Backend) -> None:
    store = backend.open()
    store.write(lambda w: transcripts.save_file(w, "ann", "codex", "/a.jsonl", '{"x":1}', {"records": 3}, None, 5))
    store.write(lambda w: transcripts.save_file(w, "ann", "codex", "/a.jsonl", '{"x":2}', {"records": 4}, "cut", 6))
    assert store.read(lambda r: transcripts.file_cursors(r, "ann", "codex")) == {"/a.jsonl": '{"x":2}'}
    assert store.read(lambda r: transcripts.file_cursors(r, "bob", "codex")) == {}
    assert store.read(lambda r: transcripts.file_stats(r, "ann", "codex")) == [{"records": 4}]


def test_only_the_owner_finds_a_transcript_message(backend: Backend) -> None:
    store = backend.open()
    store.write(lambda w: _put(w, "ann", _message("k1", "the lighthouse keeper")))
    engine = SearchEngine(store)

    def found(user: str) -> int:
        scope = MemoryScope(viewer=Viewer(user=user, project=None, org=user))
        return len(engine.search("lighthouse", Filters(kinds=("transcript",), memory=scope)).hits)

    assert found("ann") == 1
    assert found("bob") == 0


def test_a_batch_counts_terms_as_documents_one_by_one_do(tmp_path: Path) -> None:
    texts = ["the keeper lit the lamp", "the lamp went out", "a keeper's log, keepers' logs", "the lamp went out"]
    docs = [Document(kind="transcript", ref=str(n), body=t) for n, t in enumerate(texts)]
    one, many = open_store(tmp_path / "one.db"), open_store(tmp_path / "many.db")
    for doc in docs:
        one.write(partial(SearchEngine.index, doc=doc))
    many.write(lambda w: SearchEngine.index_many(w, docs))
    many.write(lambda w: SearchEngine.index_many(w, [Document(kind="transcript", ref="0", body="the lamp only")]))
    one.write(lambda w: SearchEngine.index(w, Document(kind="transcript", ref="0", body="the lamp only")))

    def terms(store: SqliteStore) -> list[tuple[Any, ...]]:
        return store.read(lambda r: r.tuples("SELECT term, df FROM document_terms WHERE df <> 0 ORDER BY term"))

    assert terms(one) == terms(many)
    assert ("lamp", 3) in terms(many) and ("", 4) in terms(many)


def test_a_batch_of_messages_ends_as_one_by_one_upserts_do(tmp_path: Path) -> None:
    """The bulk path (new keys by one prepared statement) against `upsert_message` per message: held keys,
    a key twice in one batch, an erased row and another owner's key give the same rows, ids and results."""
    held = [_message("k1", "the keeper"), _message("k2", "the lamp"), _message("k3", "erased later")]
    batch = [
        (_message("k4", "a new turn"), False),
        (_message("k1", "the keeper"), False),  # unchanged: nothing written
        (_message("k2", "the lamp, revised"), True),
        (_message("k5", "first take"), False),
        (_message("k5", "second take"), True),  # the same key again, later in the batch
        (_message("k3", "erased later"), False),  # erased stays erased
        (_message("k6", "last turn"), False),
    ]

    def seeded(name: str) -> SqliteStore:
        store = open_store(tmp_path / name)
        store.write(lambda w: [transcripts.upsert_message(w, "ann", m, False, now=1) for m in held])
        store.write(lambda w: transcripts.upsert_message(w, "bob", _message("k4", "bob's own"), False, now=1))
        store.write(lambda w: w.execute("UPDATE transcript_messages SET role = 'erased', text = '' WHERE key = 'k3'"))
        return store

    one, many = seeded("one.db"), seeded("many.db")
    expected = one.write(lambda w: [transcripts.upsert_message(w, "ann", m, r, now=2) for m, r in batch])
    got = many.write(lambda w: transcripts.upsert_messages(w, "ann", batch, now=2))
    assert got == expected
    assert [g is None for g in got] == [False, True, False, False, False, True, False]

    def rows(store: SqliteStore) -> list[tuple[Any, ...]]:
        return store.read(lambda r: r.tuples("SELECT id, owner, key, role, text FROM transcript_messages ORDER BY id"))

    assert rows(one) == rows(many)
    assert ("second take" in [t[4] for t in rows(many)]) and ("first take" not in [t[4] for t in rows(many)])


def test_a_batch_of_documents_is_searchable_and_a_ref_twice_keeps_the_last(tmp_path: Path) -> None:
    store = open_store(tmp_path / "db.sqlite")
    store.write(lambda w: SearchEngine.index(w, Document(kind="transcript", ref="1", body="an old lighthouse")))
    docs = [
        Document(kind="transcript", ref="1", body="the harbour master"),  # held: rewritten
        Document(kind="transcript", ref="2", body="a copper kettle"),
        Document(kind="transcript", ref="2", body="a brass kettle"),  # twice in the batch: the last wins
        Document(kind="transcript", ref="3", body="the tide tables"),
    ]
    ids = store.write(lambda w: SearchEngine.index_many(w, docs))
    assert ids[1] == ids[2] and len(set(ids)) == 3
    bodies = dict(store.read(lambda r: r.tuples("SELECT ref, body FROM documents")))
    assert bodies == {"1": "the harbour master", "2": "a brass kettle", "3": "the tide tables"}

    def matching(word: str) -> list[Any]:
        found = store.read(
            lambda r: r.tuples(
                "SELECT d.ref FROM documents_fts JOIN documents d ON d.id = documents_fts.rowid "
                "WHERE documents_fts MATCH :w ORDER BY d.ref",
                {"w": word},
            )
        )
        return [ref for (ref,) in found]

    assert matching("harbour") == ["1"] and matching("lighthouse") == []
    assert matching("brass") == ["2"] and matching("copper") == [] and matching("tide") == ["3"]
    assert store.read(lambda r: r.scalar("SELECT df FROM document_terms WHERE term = 'kettl'")) == 1
    assert store.read(lambda r: r.scalar("SELECT df FROM document_terms WHERE term = ''")) == 3
    # FTS5's own check that the index matches the rows' content (raises when it does not)
    store.write(lambda w: w.execute("INSERT INTO documents_fts (documents_fts) VALUES ('integrity-check')"))
