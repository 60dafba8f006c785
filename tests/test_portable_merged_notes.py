"""Export and import of notes consolidation merged (issue 20): a merged note travels superseded, naming its
survivor by key, so a round trip neither resurrects it in the fresh store's search nor changes a byte; a
reference to no note is refused, naming the line. A real SQLite store, the real consolidation pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.portable_world import World, build, runtime
from threadloom.consolidate.service import Options, for_runtime
from threadloom.errors import InvalidInput
from threadloom.portable.export import export_to
from threadloom.portable.importer import import_from
from threadloom.runtime import Runtime
from threadloom.scrub import Scrubber

SCRUB = Scrubber(True)
TWIN = "Stripe webhooks retry for three days before giving up"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = build(tmp_path)
    w.rt.notes.add_note(w.alice, TWIN, kind="insight")
    w.rt.notes.add_note(w.alice, TWIN.replace("days before", "days, before"), kind="insight")
    merged = for_runtime(w.rt).run(Options(apply=True, owner="alice", release=False))
    assert merged["merged"]["note"] == 1
    yield w
    w.rt.close()


def live_note_documents(rt: Runtime) -> int:
    return int(rt.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM documents WHERE kind = 'note'")))


def superseded(rt: Runtime) -> int:
    sql = "SELECT COUNT(*) FROM thread_notes WHERE owner = 'alice' AND superseded_by IS NOT NULL"
    return int(rt.store.read(lambda r: r.scalar(sql)))


def test_a_merged_note_round_trips_superseded_and_byte_identical(world: World, tmp_path: Path) -> None:
    export_to(world.rt.store, "alice", tmp_path / "one")
    lines = [json.loads(x) for x in (tmp_path / "one" / "notes.jsonl").read_text().splitlines()[1:]]
    assert sum(1 for x in lines if x.get("superseded_by")) == 1
    fresh = runtime(tmp_path / "home-b")
    try:
        import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
        assert superseded(fresh) == 1
        assert live_note_documents(fresh) == live_note_documents(world.rt)
        export_to(fresh.store, "alice", tmp_path / "two")
        one, two = (sorted(p.name for p in (tmp_path / d).iterdir()) for d in ("one", "two"))
        assert one == two
        for name in one:
            assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
        again = import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one")
        assert again.counts["notes_added"] == 0 and superseded(fresh) == 1
    finally:
        fresh.close()


def test_a_survivor_named_nowhere_is_refused_with_its_line(world: World, tmp_path: Path) -> None:
    export_to(world.rt.store, "alice", tmp_path / "one")
    path = tmp_path / "one" / "notes.jsonl"
    forged = [
        json.dumps(dict(json.loads(line), superseded_by="0" * 64)) if '"superseded_by"' in line else line
        for line in path.read_text().splitlines()
    ]
    path.write_text("\n".join(forged) + "\n")
    fresh = runtime(tmp_path / "home-b")
    try:
        for dry_run in (True, False):
            with pytest.raises(InvalidInput, match=r"notes\.jsonl:\d+: superseded_by names no note"):
                import_from(fresh.store, "alice", "", SCRUB, tmp_path / "one", dry_run=dry_run)
        assert int(fresh.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM thread_notes"))) == 0
    finally:
        fresh.close()
