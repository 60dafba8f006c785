"""Export and import facing bad input: unknown versions, duplicate ids, edges to nothing, a 1 GB file, lines
too long, NUL bytes, wrong types, duplicate keys, links: each refused with a clear InvalidInput before any
write, so nothing is half-imported; secrets in an import are scrubbed like any other write."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, new_home
from tests.portable_world import World, build, runtime, session
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.memory.model import NewMemory
from threadloom.portable import format as f
from threadloom.portable.export import export_to
from threadloom.portable.importer import import_from
from threadloom.runtime import Runtime
from threadloom.scrub import Scrubber

SCRUB = Scrubber(True)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Runtime]:
    rt = runtime(tmp_path / "home-fresh")
    yield rt
    rt.close()


def memory(n: int, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": "memory",
        "id": f"m_{n:016x}",
        "content": f"fact number {n}",
        "summary": None,
        "category": None,
        "kind": "fact",
        "entities": [],
        "project": "/repo",
        "visibility": "private",
        "status": "active",
        "pinned": False,
        "core_key": None,
        "core_priority": None,
        "session_id": None,
        "vendor": "claude",
        "origin": "foreground",
        "created_at": 1_700_000_000_000,
        "valid_from": 1_700_000_000_000,
        "valid_to": None,
        "superseded_by": None,
    }
    return record | changes


def edge(source: str, target: str) -> dict[str, Any]:
    return {
        "type": "edge",
        "source": source,
        "target": target,
        "edge_type": "related_to",
        "weight": 0.5,
        "made_by": "explicit",
        "reason": None,
        "session_id": None,
        "created_at": 1_700_000_000_000,
    }


def write(folder: Path, kind: str, lines: list[Any], head: dict[str, Any] | None = None) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{kind}.jsonl"
    with path.open("w") as fh:
        fh.write(json.dumps(head or f.header(kind)) + "\n")
        fh.writelines((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return path


def refused(rt: Runtime, path: Path, needle: str, **options: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        import_from(rt.store, "alice", "", SCRUB, path, **options)
    assert needle in str(caught.value)
    assert rt.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM memories")) == 0  # nothing half-imported


def test_a_valid_file_imports(fresh: Runtime, tmp_path: Path) -> None:
    """The control for every refusal below: the same records, well formed, go in."""
    path = write(tmp_path / "ok", "memories", [memory(1), memory(2), edge(memory(1)["id"], memory(2)["id"])])
    assert import_from(fresh.store, "alice", "", SCRUB, path).counts["memories_added"] == 2


def test_unknown_versions_and_foreign_headers(fresh: Runtime, tmp_path: Path) -> None:
    newer = write(tmp_path / "v", "memories", [memory(1)], f.header("memories") | {"version": 99})
    refused(fresh, newer, "format version 99 is newer")
    other = write(tmp_path / "o", "memories", [memory(1)], {"format": "someone-else", "version": 1})
    refused(fresh, other, "not a threadloom export")
    wrong = write(tmp_path / "w", "memories", [memory(1)], f.header("notes"))
    refused(fresh, wrong, "the header names kind 'notes'")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "memories.jsonl").write_text("")
    refused(fresh, tmp_path / "e", "is empty")


def test_duplicate_ids_and_edges_to_nothing(fresh: Runtime, tmp_path: Path) -> None:
    twice = write(tmp_path / "d", "memories", [memory(1), memory(1, content="other text")])
    refused(fresh, twice, "appears twice")
    dangling = write(tmp_path / "n", "memories", [memory(1), memory(2), edge(memory(1)["id"], "m_" + "f" * 16)])
    refused(fresh, dangling, "in neither the file nor your store")


def test_a_bad_line_late_in_the_file_stops_everything_before_it(fresh: Runtime, tmp_path: Path) -> None:
    good = [memory(n) for n in range(1, 50)]
    refused(fresh, write(tmp_path / "late", "memories", [*good, "{not json"]), "memories.jsonl:51: not a JSON line")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"content": "a\x00b"}, "contains a NUL"),
        ({"content": "x" * 20_001}, "over 20,000"),
        ({"content": 7}, "content must be a string"),
        ({"entities": "not a list"}, "entities must be a list"),
        ({"entities": ["x"] * 33}, "at most 32"),
        ({"created_at": "yesterday"}, "created_at must be an integer"),
        ({"created_at": True}, "created_at must be an integer"),
        ({"pinned": 1}, "pinned must be true or false"),
        ({"visibility": "public"}, "visibility must be one of"),
        ({"core_key": "../etc"}, "core key"),
        ({"type": "virus"}, "type must be one of"),
    ],
)
def test_malicious_or_wrong_typed_fields(fresh: Runtime, tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    refused(fresh, write(tmp_path / "m", "memories", [memory(1), memory(2, **changes)]), needle)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"type": "memory", "type": "edge"}', "appears twice"),
        ("[1, 2, 3]", "a record is a JSON object"),
        ('{"weight": NaN}', "not a JSON line"),
        ("\xff\xfe", "not a JSON line"),
    ],
)
def test_lines_that_are_not_records(fresh: Runtime, tmp_path: Path, line: str, needle: str) -> None:
    refused(fresh, write(tmp_path / "l", "memories", [memory(1), line]), needle)


def test_a_1_gb_file_is_refused_before_it_is_read(fresh: Runtime, tmp_path: Path) -> None:
    path = write(tmp_path / "big", "memories", [memory(1)])
    with path.open("r+b") as fh:
        fh.truncate(1 << 30)  # sparse: a gigabyte that costs no disk
    refused(fresh, path, "over the import cap")


def test_a_line_longer_than_the_cap_is_refused(fresh: Runtime, tmp_path: Path) -> None:
    path = write(tmp_path / "long", "memories", [memory(1), memory(2, content="y" * (f.MAX_LINE_BYTES + 10))])
    refused(fresh, path, "a line is longer than")


def test_links_are_refused_at_the_path_and_inside_the_folder(fresh: Runtime, tmp_path: Path) -> None:
    real = write(tmp_path / "real", "memories", [memory(1)])
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    refused(fresh, tmp_path / "linked", "is a symbolic link")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "memories.jsonl").symlink_to(real)
    refused(fresh, tmp_path / "inner", "is a symbolic link")
    (tmp_path / "real" / "notes.md").write_text("# notes\n")
    refused(fresh, tmp_path / "real" / "notes.md", "not an export file")
    (tmp_path / "real" / "stranger.jsonl").write_text("{}\n")
    refused(fresh, tmp_path / "real", "stranger.jsonl is no kind")


def test_export_refuses_a_link_or_a_folder_with_an_export(tmp_path: Path) -> None:
    world: World = build(tmp_path)
    try:
        (tmp_path / "target").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "target")
        with pytest.raises(InvalidInput, match="symbolic link"):
            export_to(world.rt.store, "alice", tmp_path / "link")
        export_to(world.rt.store, "alice", tmp_path / "done")
        with pytest.raises(InvalidInput, match="already holds"):
            export_to(world.rt.store, "alice", tmp_path / "done")
        with pytest.raises(InvalidInput, match="unknown kind"):
            export_to(world.rt.store, "alice", tmp_path / "x", ["passwords"])
        assert not list((tmp_path / "target").iterdir())
    finally:
        world.rt.close()


def test_secrets_in_an_import_are_scrubbed(fresh: Runtime, tmp_path: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    path = write(tmp_path / "s", "memories", [memory(1, content=f"the token is {token}")])
    import_from(fresh.store, "alice", "", SCRUB, path)
    stored = fresh.store.read(lambda r: r.scalar("SELECT content FROM memories"))
    assert token not in stored and "[secret:" in stored


def test_imported_items_belong_to_the_importer_and_ids_never_collide(fresh: Runtime, tmp_path: Path) -> None:
    """ben's store already has alice's id for another text: the import gets a derived id, the edge follows."""
    path = write(tmp_path / "c", "memories", [memory(1), memory(2), edge(memory(1)["id"], memory(2)["id"])])
    import_from(fresh.store, "ben", "", SCRUB, write(tmp_path / "b", "memories", [memory(1, content="ben's own")]))
    done = import_from(fresh.store, "alice", "", SCRUB, path)
    assert done.counts["memories_added"] == 2 and done.counts["edges_added"] == 1
    owners = fresh.store.read(lambda r: r.tuples("SELECT owner, COUNT(*) FROM memories GROUP BY owner ORDER BY 1"))
    assert [tuple(t) for t in owners] == [("alice", 2), ("ben", 1)]
    taken = fresh.store.read(lambda r: r.scalar("SELECT content FROM memories WHERE id = :i", {"i": memory(1)["id"]}))
    assert taken == "ben's own"


@pytest.mark.slow
def test_the_cli_exports_and_imports_with_a_dry_run(tmp_path: Path) -> None:
    home, other = new_home(), new_home()
    path = write(tmp_path / "cli", "memories", [memory(1), memory(2)])
    dry = cli(home, "import", str(path.parent), "--dry-run", "--json", THREADLOOM_USER="carol")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["counts"]["memories_added"] == 2 and json.loads(dry.stdout)["dry_run"]
    done = cli(home, "import", str(path.parent), THREADLOOM_USER="carol")
    assert done.returncode == 0 and "imported as carol" in done.stdout
    out = tmp_path / "carol-out"
    exported = cli(home, "export", "--out", str(out), THREADLOOM_USER="carol")
    assert exported.returncode == 0, exported.stderr
    assert (out / "memories.jsonl").read_text().count('"type":"memory"') == 2
    nobody = cli(home, "export", "--out", str(tmp_path / "dave"), THREADLOOM_USER="dave")
    assert (tmp_path / "dave" / "memories.jsonl").read_text().count("\n") == 1 and nobody.returncode == 0
    bad = cli(other, "import", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_style_text_passes_the_same_guard_as_a_hint(fresh: Runtime, tmp_path: Path) -> None:
    habit = {
        "type": "habit", "kind": "catchphrase", "key": "my name is ana", "text": "my name is Ana", "locale": "",
        "origin": "hint", "status": "active", "pinned": False, "seen": 2, "sessions": 2, "example": None,
        "vendor": "claude", "first_at": 1, "last_at": 2, "activated_at": 2,
    }  # fmt: skip
    with pytest.raises(InvalidInput, match="refused, it would store a name"):
        import_from(fresh.store, "alice", "", SCRUB, write(tmp_path / "st", "style", [habit]))
    ok = habit | {"key": "righto", "text": "righto"}
    assert import_from(fresh.store, "alice", "", SCRUB, write(tmp_path / "ok", "style", [ok])).counts == {
        "style_added": 1,
        "style_present": 0,
    }


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"text": "no front matter"}, "does not start with a front matter"),
        ({"references": {"../../escape.md": "x"}}, "reference"),
        ({"name": "other-name"}, "the SKILL.md names"),
        ({"origin": "root"}, "origin must be one of"),
    ],
)
def test_a_skill_that_is_not_one_is_refused_before_any_file_is_written(
    fresh: Runtime, tmp_path: Path, changes: dict[str, Any], needle: str
) -> None:
    skill = {
        "kind": "skill", "name": "ship-it", "origin": "person", "source": "cli", "pinned": False,
        "text": '---\nname: "ship-it"\ndescription: "How we release"\n---\n\n1. tag\n', "references": {},
    }  # fmt: skip
    lib = Library(fresh)
    path = write(tmp_path / "sk", "skills", [skill | changes])
    with pytest.raises(InvalidInput, match=needle):
        import_from(fresh.store, "alice", "", SCRUB, path, library=lib)
    assert lib.listing("alice") == []
    assert not (fresh.settings.layout.skills / "alice").exists() or not any(
        (fresh.settings.layout.skills / "alice").iterdir()
    )
    ok = write(tmp_path / "ok", "skills", [skill])
    assert import_from(fresh.store, "alice", "", SCRUB, ok, library=lib).counts["skills_added"] == 1


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"tools": "rm -rf /"}, "tools must be a list"),
        ({"tools": [{"args": "no name"}]}, "each with a name"),
        ({"role": "erased"}, "an erased message is not imported"),
        ({"offset": -1}, "offset must be an integer"),
    ],
)
def test_a_transcript_message_that_is_not_one_is_refused(
    fresh: Runtime, tmp_path: Path, changes: dict[str, Any], needle: str
) -> None:
    message = {
        "source": "claude-code", "session_id": "s", "key": "k", "role": "user", "text": "hi", "tools": [],
        "at": 1, "cwd": None, "project": None, "model": None, "format": "claude-jsonl", "path": "/x", "offset": 0,
    }  # fmt: skip
    with pytest.raises(InvalidInput, match=needle):
        import_from(fresh.store, "alice", "", SCRUB, write(tmp_path / "t", "transcripts", [message, message | changes]))
    assert fresh.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM transcript_messages")) == 0


def test_a_fifo_under_an_exports_name_is_refused_without_hanging(fresh: Runtime, tmp_path: Path) -> None:
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "memories.jsonl")
    refused(fresh, tmp_path / "fifo", "not a regular file")


def test_an_import_beside_a_writer_loses_nothing_of_either(fresh: Runtime, tmp_path: Path) -> None:
    """A session keeps storing memories while a 400-memory import runs: both sets are whole afterwards."""
    path = write(tmp_path / "many", "memories", [memory(n) for n in range(1, 401)])
    prov = session(fresh, "alice", tmp_path)
    stored: list[str] = []

    def writer() -> None:
        for n in range(30):
            stored.append(fresh.memory.store(NewMemory(content=f"written meanwhile {n}"), prov).memory.id)

    thread = threading.Thread(target=writer)
    thread.start()
    done = import_from(fresh.store, "alice", "", SCRUB, path)
    thread.join(timeout=120)
    assert done.counts["memories_added"] == 400 and len(stored) == 30
    assert fresh.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM memories WHERE owner = 'alice'")) == 430
