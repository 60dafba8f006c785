"""Export and import (issue 20): the round trip is byte-identical, importing twice changes nothing, only the
caller's own items leave, and another store's ids (even ones taken here) merge without collisions, edges
following. A real SQLite store, the real services."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.portable_world import BOB_SECRET, World, build, runtime, session
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.portable.export import export_to
from threadloom.portable.importer import import_from
from threadloom.runtime import Runtime
from threadloom.scrub import Scrubber
from threadloom.store import transcripts
from threadloom.store.base import Writer
from threadloom.store.transcripts import StoredMessage
from threadloom.style import StyleMemory
from threadloom.usermodel import UserModel

SCRUB = Scrubber(True)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = build(tmp_path)
    yield w
    w.rt.close()


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def rows(rt: Runtime, table: str) -> int:
    return int(rt.store.read(lambda r: r.scalar(f"SELECT COUNT(*) FROM {table}")))


def test_export_holds_the_callers_items_and_nobody_elses(world: World, tmp_path: Path) -> None:
    done = export_to(world.rt.store, "alice", tmp_path / "out")
    # 4 stored + the amend and 2 edges; a note and a quote; a claim; a habit and a profile item
    assert done.counts == {"memories": 5 + 2, "notes": 2, "claims": 1, "style": 2}
    data = files(tmp_path / "out")
    assert set(data) == {f"{k}.{x}" for k in ("memories", "notes", "claims", "style") for x in ("jsonl", "md")}
    assert all(BOB_SECRET.encode() not in blob for blob in data.values())
    assert b"deploys go out on Wednesdays" in data["memories.jsonl"]
    assert b'"format":"threadloom-export"' in data["memories.jsonl"].splitlines()[0]
    md = data["memories.md"].decode()
    assert "````text\nrelease train\n```\n<script>" in md  # a fence longer than the text's own
    assert oct((tmp_path / "out" / "memories.jsonl").stat().st_mode & 0o777) == "0o600"


def test_round_trip_into_a_fresh_store_gives_the_same_bytes(world: World, tmp_path: Path) -> None:
    export_to(world.rt.store, "alice", tmp_path / "one")
    fresh = runtime(tmp_path / "home-b")
    try:
        done = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
        assert done.counts["memories_added"] == 5 and done.counts["edges_added"] == 2
        assert done.counts["notes_added"] == 2 and done.counts["claims_added"] == 1
        assert done.counts["style_added"] == 2
        export_to(fresh.store, "alice", tmp_path / "two")
        assert files(tmp_path / "one") == files(tmp_path / "two")
        # Imported memories are searchable: their documents were written with them.
        hits = fresh.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM documents WHERE kind = 'memory'"))
        assert hits == 5
        # The style capsule moved with the import, as after any style write.
        alice = session(fresh, "alice", world.repo)
        view = StyleMemory(fresh.store).view(alice, None, "all")
        assert view["revision"] == 1 and "plan, then implement" in view["text"]
    finally:
        fresh.close()


def test_importing_twice_changes_nothing(world: World, tmp_path: Path) -> None:
    export_to(world.rt.store, "alice", tmp_path / "one")
    fresh = runtime(tmp_path / "home-b")
    try:
        import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
        tables = ("memories", "memory_edges", "thread_notes", "user_claims", "user_evidence", "documents")
        tables += ("style_habits", "style_profile", "style_revisions")
        before = {t: rows(fresh, t) for t in tables}
        again = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
        assert {t: rows(fresh, t) for t in tables} == before
        assert again.counts["memories_added"] == again.counts["edges_added"] == 0
        assert again.counts["memories_merged"] == 5 and again.counts["edges_present"] == 2
        assert again.counts["notes_added"] == again.counts["claims_added"] == again.counts["style_added"] == 0
    finally:
        fresh.close()


def test_a_dry_run_counts_what_a_real_run_does_and_writes_nothing(world: World, tmp_path: Path) -> None:
    export_to(world.rt.store, "alice", tmp_path / "one")
    fresh = runtime(tmp_path / "home-b")
    try:
        plan = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one", dry_run=True)
        assert rows(fresh, "memories") == rows(fresh, "thread_notes") == rows(fresh, "user_claims") == 0
        assert plan.counts == import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one").counts
    finally:
        fresh.close()


def test_another_users_export_merges_as_the_importers_with_fresh_ids(world: World, tmp_path: Path) -> None:
    """bob imports alice's export into the very store it came from: every id is taken (alice's), so bob's
    copies get derived ids, the edges and the claim's memory evidence follow them, and alice's rows stay."""
    export_to(world.rt.store, "alice", tmp_path / "alice")
    alice_rows = world.count("SELECT COUNT(*) FROM memories WHERE owner = 'alice'")
    done = import_from(world.rt.store, "bob", "", SCRUB, tmp_path / "alice")
    assert done.counts["memories_added"] == 5 and done.counts["edges_added"] == 2
    assert world.count("SELECT COUNT(*) FROM memories WHERE owner = 'alice'") == alice_rows
    assert world.count("SELECT COUNT(*) FROM memories WHERE owner = 'bob'") == 2 + 5
    crossing = world.count(
        "SELECT COUNT(*) FROM memory_edges e JOIN memories s ON s.id = e.source JOIN memories t ON t.id = e.target "
        "WHERE s.owner <> t.owner"
    )
    assert crossing == 0  # bob's edges join bob's copies, never alice's originals
    evidence = world.rt.store.read(
        lambda r: r.scalar(
            "SELECT e.ref FROM user_evidence e JOIN user_claims c ON c.id = e.claim_id "
            "WHERE c.owner = 'bob' AND e.source = 'memory'"
        )
    )
    assert world.count("SELECT COUNT(*) FROM memories WHERE id = :i AND owner = 'bob'", {"i": evidence}) == 1
    again = import_from(world.rt.store, "bob", "", SCRUB, tmp_path / "alice")
    assert again.counts["memories_added"] == again.counts["claims_added"] == again.counts["notes_added"] == 0
    # bob's own export now carries what he knows and what he took in, and round-trips like any other.
    export_to(world.rt.store, "bob", tmp_path / "bob")
    fresh = runtime(tmp_path / "home-c")
    try:
        import_from(fresh.store, "bob", "", SCRUB, tmp_path / "bob")
        export_to(fresh.store, "bob", tmp_path / "bob2")
        assert files(tmp_path / "bob") == files(tmp_path / "bob2")
    finally:
        fresh.close()


def test_one_kind_alone_exports_and_imports(world: World, tmp_path: Path) -> None:
    done = export_to(world.rt.store, "alice", tmp_path / "only", ["notes"])
    assert done.files == ("notes.jsonl", "notes.md")
    fresh = runtime(tmp_path / "home-b")
    try:
        assert import_from(fresh.store, "alice", "", SCRUB, tmp_path / "only" / "notes.jsonl").counts == {
            "notes_added": 2,
            "notes_present": 0,
        }
        found = fresh.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM documents WHERE kind IN ('note', 'quote')"))
        assert found == 2
    finally:
        fresh.close()


def test_skills_and_lessons_travel_with_their_files_and_merge_by_name(world: World, tmp_path: Path) -> None:
    lib = Library(world.rt)
    lib.write_skill("alice", "ship-it", "How we release", "1. tag\n2. push", "person", "cli", {"steps.md": "more"})
    lib.add_lesson("alice", "never force-push main", "person", "cli")
    lib.pin("alice", "ship-it")
    lib.write_skill("bob", "bob-skill", f"bob's {BOB_SECRET}", f"{BOB_SECRET} body", "person", "cli")
    done = export_to(world.rt.store, "alice", tmp_path / "one", ["skills"], lib)
    assert done.counts == {"skills": 2}
    assert BOB_SECRET.encode() not in (tmp_path / "one" / "skills.jsonl").read_bytes()
    fresh = runtime(tmp_path / "home-b")
    try:
        flib = Library(fresh)
        counts = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one", library=flib).counts
        assert counts == {"skills_added": 2, "skills_present": 0, "skills_kept": 0}
        shown = flib.show("alice", "ship-it", mark=False)
        assert "1. tag" in shown["text"] and shown["pinned"] and shown["references"] == ["steps.md"]
        assert flib.reference("alice", "ship-it", "steps.md") == "more"
        again = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one", library=flib).counts
        assert again == {"skills_added": 0, "skills_present": 2, "skills_kept": 0}
        export_to(fresh.store, "alice", tmp_path / "two", ["skills"], flib)
        assert files(tmp_path / "one") == files(tmp_path / "two")
        # A skill of that name that says something else here stays as it is, and the count says so.
        flib.write_skill("alice", "ship-it", "How we release", "1. tag only", "person", "cli")
        kept = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one", library=flib).counts
        assert kept["skills_kept"] == 1 and "tag only" in flib.show("alice", "ship-it", mark=False)["text"]
        # Without the library (a bare store), a skills file is no kind this imports.
        with pytest.raises(InvalidInput, match="no kind this threadloom imports"):
            import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
    finally:
        fresh.close()


def _message(key: str, text: str, tools: str = "[]") -> StoredMessage:
    return StoredMessage("claude-code", "sess-1", key, "user", text, tools, 1_700_000_000_000, "/repo", "/repo", None,
                         "claude-jsonl", "/home/x/.claude/projects/a.jsonl", 0)  # fmt: skip


def test_transcripts_only_when_asked_and_by_their_clients_key(world: World, tmp_path: Path) -> None:
    def ingest(w: Writer) -> None:
        for owner, m in (
            ("alice", _message("k1", "how do I ship it")),
            ("alice", _message("k2", "", '[{"name":"Bash","args":"make ci"}]')),
            ("alice", _message("k3", "this one was erased")),
            ("bob", _message("k1", f"bob asks {BOB_SECRET}")),
        ):
            transcripts.upsert_message(w, owner, m, False, 1)
        w.execute("UPDATE transcript_messages SET role = 'erased', text = '' WHERE key = 'k3'")

    world.rt.store.write(ingest)
    assert "transcripts.jsonl" not in export_to(world.rt.store, "alice", tmp_path / "plain").files
    done = export_to(world.rt.store, "alice", tmp_path / "one", ["transcripts"])
    assert done.counts == {"transcripts": 2}  # the erased one stays erased
    assert BOB_SECRET.encode() not in (tmp_path / "one" / "transcripts.jsonl").read_bytes()
    fresh = runtime(tmp_path / "home-b")
    try:
        counts = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one").counts
        assert counts == {"messages_added": 2, "messages_present": 0}
        bodies = fresh.store.read(lambda r: r.rows("SELECT body FROM documents WHERE kind = 'transcript'"))
        assert sorted(b["body"] for b in bodies) == ["[Bash] make ci", "how do I ship it"]
        assert import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one").counts["messages_added"] == 0
        export_to(fresh.store, "alice", tmp_path / "two", with_transcripts=True)
        assert (tmp_path / "two" / "transcripts.jsonl").read_bytes() == (
            tmp_path / "one" / "transcripts.jsonl"
        ).read_bytes()
    finally:
        fresh.close()


def test_evidence_naming_a_note_or_a_message_follows_its_row_by_key(world: World, tmp_path: Path) -> None:
    world.rt.store.write(lambda w: transcripts.upsert_message(w, "alice", _message("k9", "I like small PRs"), False, 1))
    message = world.count("SELECT id FROM transcript_messages WHERE key = 'k9'")
    note = world.count("SELECT id FROM thread_notes WHERE owner = 'alice' AND kind = 'failed'")
    model = UserModel(world.rt.store)
    claim = model.claim(world.alice, "prefers reviewing in person", "workflow")["claim"]["id"]
    model.add_evidence(world.alice, claim, "support", "note", str(note))
    model.add_evidence(world.alice, claim, "support", "message", str(message))
    export_to(world.rt.store, "alice", tmp_path / "one", with_transcripts=True)
    assert f'"ref":"{note}"'.encode() not in (tmp_path / "one" / "claims.jsonl").read_bytes()
    fresh = runtime(tmp_path / "home-b")
    try:
        # A message already here under another row number: the evidence must name that row.
        fresh.store.write(lambda w: transcripts.upsert_message(w, "alice", _message("k0", "an earlier one"), False, 1))
        counts = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one").counts
        assert counts["evidence_unresolved"] == 0
        refs = fresh.store.read(
            lambda r: r.rows(
                "SELECT e.source, e.ref FROM user_evidence e JOIN user_claims c ON c.id = e.claim_id "
                "WHERE c.text = 'prefers reviewing in person'"
            )
        )
        by_source = {row["source"]: int(row["ref"]) for row in refs}
        text_of = {
            "note": fresh.store.read(
                lambda r: r.scalar("SELECT text FROM thread_notes WHERE id = :i", {"i": by_source["note"]})
            ),
            "message": fresh.store.read(
                lambda r: r.scalar("SELECT text FROM transcript_messages WHERE id = :i", {"i": by_source["message"]})
            ),
        }
        assert text_of == {"note": "tried the long fuse", "message": "I like small PRs"}
        export_to(fresh.store, "alice", tmp_path / "two", with_transcripts=True)
        one, two = files(tmp_path / "one"), files(tmp_path / "two")
        assert one["claims.jsonl"] == two["claims.jsonl"]  # the transcripts differ: "k0" was here already
    finally:
        fresh.close()
    # Without the transcripts, the message's evidence has nothing to name: left out and counted.
    (tmp_path / "one" / "transcripts.jsonl").unlink()
    other = runtime(tmp_path / "home-c")
    try:
        assert import_from(other.store, "alice", "", SCRUB, tmp_path / "one").counts["evidence_unresolved"] == 1
    finally:
        other.close()
