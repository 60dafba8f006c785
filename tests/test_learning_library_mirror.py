"""Mirroring skills into the CLIs' folders under stress: racing writers, a crash midway, a canonical copy
broken by hand. Real store, real folders in a temp dir (tests/learning_fixtures.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests import learning_fixtures
from threadloom.config import Settings
from threadloom.learning.library import Library
from threadloom.learning.mirror import MANIFEST
from threadloom.runtime import Mode, Runtime, open_runtime

runtime = learning_fixtures.runtime
user_home = learning_fixtures.user_home


def test_racing_writers_of_one_skill_leave_whole_copies(runtime: Runtime, user_home: Path) -> None:
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        lib = Library(runtime, client_home=user_home)
        try:
            for i in range(15):
                refs = {f"{tag}.md": f"{tag} {i}"} if i % 2 else None
                lib.write_skill("alice", "shared", f"From {tag}.", f"{tag} step {i}\n", "loop", f"{tag}:{i}", refs)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    lib = Library(runtime, client_home=user_home)
    report = lib.mirror_all("alice")
    assert [m["status"] for m in report["skills"]["shared"]] == ["unchanged", "unchanged"]
    canonical = Path(lib.show("alice", "shared", mark=False)["path"]).parent
    for folder in (user_home / ".claude/skills/shared", user_home / ".agents/skills/shared"):
        assert (folder / "SKILL.md").read_text() == (canonical / "SKILL.md").read_text()
        assert sorted(p.name for p in (folder / "references").glob("*")) == sorted(
            p.name for p in (canonical / "references").glob("*")
        )


def test_a_write_cut_short_is_completed_by_the_next(runtime: Runtime, user_home: Path) -> None:
    lib = Library(runtime, client_home=user_home)
    lib.write_skill("alice", "deploy", "How to deploy.", "Step one.\n", "loop", "r:1")
    folder = user_home / ".claude/skills/deploy"
    manifest = json.loads((folder / MANIFEST).read_text())
    # As a crash leaves it: the manifest says a write began, SKILL.md is half the new text.
    (folder / MANIFEST).write_text(json.dumps(manifest | {"writing": True, "digest": "0" * 32}))
    (folder / "SKILL.md").write_text("---\nname: deplo")
    result = lib.write_skill("alice", "deploy", "How to deploy.", "Step two.\n", "loop", "r:2")
    assert [m["status"] for m in result["mirrors"]] == ["written", "written"]
    assert "Step two." in (folder / "SKILL.md").read_text()
    assert json.loads((folder / MANIFEST).read_text())["writing"] is False


def test_a_canonical_skill_broken_by_hand_is_not_copied_and_is_reported(runtime: Runtime, user_home: Path) -> None:
    lib = Library(runtime, client_home=user_home)
    path = Path(lib.write_skill("alice", "deploy", "How to deploy.", "Step one.\n", "person", "cli")["path"])
    path.write_text("---\nname: deploy\n")  # no description, never closed
    report = lib.mirror_all("alice")
    assert report["skills"]["deploy"][0]["status"] == "broken"
    assert "Step one." in (user_home / ".claude/skills/deploy/SKILL.md").read_text()  # the last good copy stays
    (user_home / ".claude/skills/hand-made").mkdir()
    (user_home / ".claude/skills/hand-made/SKILL.md").write_text("---\nname: other-name\ndescription: d\n---\n")
    status = lib.report("alice")
    assert status["entries"] == {"skills_person": 1} and status["pinned"] == 0
    assert [Path(b["path"]).parent.name for b in status["broken_skill_files"]] == ["hand-made"]
    assert "its folder is 'hand-made'" in status["broken_skill_files"][0]["error"]


MODES: list[tuple[Mode, bool]] = [("daemon", True), ("in-process", True), ("http", False), ("cli", False)]


@pytest.mark.parametrize(("mode", "mirrored"), MODES)
def test_only_the_local_servers_mirror_into_their_users_home(
    mode: Mode, mirrored: bool, tmp_path: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(user_home))
    rt = open_runtime(Settings(home=tmp_path / "home", embedder="none"), mode)
    try:
        result = Library(rt).write_skill("alice", "deploy", "How to deploy.", "Step one.\n", "loop", "r:1")
    finally:
        rt.close()
    assert bool(result["mirrors"]) is mirrored
    assert (user_home / ".claude/skills/deploy/SKILL.md").exists() is mirrored
