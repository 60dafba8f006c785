"""`threadloom skills ...` as a person uses it, in a real process whose HOME is a temp folder with Claude Code
and Gemini CLI installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import cli
from threadloom.config import Settings
from threadloom.errors import InvalidInput
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime


def test_a_person_adds_pins_mirrors_and_removes_a_skill(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".gemini").mkdir()
    source = tmp_path / "review-prs"
    (source / "references").mkdir(parents=True)
    (source / "SKILL.md").write_text("---\nname: review-prs\ndescription: >\n  How we review.\n---\nRead the diff.\n")
    (source / "references" / "checklist.md").write_text("- tests\n")
    env = {"HOME": str(user_home), "THREADLOOM_USER": "alice"}

    added = cli(home, "skills", "add", str(source), **env)
    assert added.returncode == 0, added.stderr
    assert [m["status"] for m in json.loads(added.stdout)["mirrors"]] == ["written", "written"]
    for folder in (".claude/skills", ".agents/skills"):
        assert (user_home / folder / "review-prs/references/checklist.md").read_text() == "- tests\n"
    assert cli(home, "skills", "lesson", "Always squash fixups.", **env).returncode == 0

    listed = cli(home, "skills", "list", **env)
    assert "review-prs" in listed.stdout and "person" in listed.stdout and "Always squash fixups." in listed.stdout
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        with pytest.raises(InvalidInput, match="a person wrote it"):
            Library(rt).delete("alice", "review-prs", origin="loop")
    finally:
        rt.close()

    broken = user_home / ".claude/skills/someone-elses"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter\n")
    mirrored = json.loads(cli(home, "skills", "mirror", **env).stdout)
    assert [m["status"] for m in mirrored["skills"]["review-prs"]] == ["unchanged", "unchanged"]
    assert [Path(b["path"]).parent.name for b in mirrored["broken"]] == ["someone-elses"]

    status = json.loads(cli(home, "skills", "status", **env).stdout)
    assert status["entries"] == {"skills_person": 1, "lessons_person": 1}
    assert [Path(b["path"]).parent.name for b in status["broken_skill_files"]] == ["someone-elses"]
    assert json.loads(cli(home, "skills", "pin", "review-prs", **env).stdout)["pinned"] is True
    assert cli(home, "skills", "show", "review-prs", **(env | {"THREADLOOM_USER": "bob"})).returncode == 2
    removed = cli(home, "skills", "rm", "review-prs", "--yes", **env)
    assert [m["status"] for m in json.loads(removed.stdout)["mirrors"]] == ["removed", "removed"]
    assert not (user_home / ".claude/skills/review-prs").exists()
    assert (broken / "SKILL.md").exists()


def test_add_refuses_a_broken_skill_md(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "SKILL.md"
    bad.write_text("---\nname: ../../escape\ndescription: x\n---\nbody\n")
    result = cli(home, "skills", "add", str(bad), HOME=str(tmp_path), THREADLOOM_USER="alice")
    assert result.returncode == 2 and "skill name" in result.stderr
