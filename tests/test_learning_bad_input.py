"""The issue's bad input, each refused or contained, said in `status` (harvest.learning_status, the `learning`
section of the status tool), and nothing outside the skills folders touched: a 1 MB candidate, a skill name
with `../`, a SKILL.md with broken front matter in a mirrored folder. (A reviewer child that never answers or
writes garbage: tests/test_learning_review.py, whose status says timeout and writes 0.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import learning_fixtures
from tests.test_learning_extract import seed
from threadloom.errors import InvalidInput
from threadloom.learning.candidates import MAX_EDIT_CHARS, Candidates, into_library
from threadloom.learning.extract import MAX_CANDIDATE_CHARS
from threadloom.learning.harvest import Extractor, learning_status
from threadloom.learning.library import Library
from threadloom.runtime import Runtime

runtime = learning_fixtures.runtime
user_home = learning_fixtures.user_home
lib = learning_fixtures.lib


def outside(tmp_path: Path, runtime: Runtime, user_home: Path) -> dict[str, bytes]:
    """Every file of the test's folder but the skills folders, the lessons file and the store."""
    keep = (runtime.settings.layout.skills, user_home / ".claude" / "skills", user_home / ".agents" / "skills")
    return {
        k: v for k, v in learning_fixtures.tree(tmp_path).items()
        if not any(Path(k).is_relative_to(root) for root in keep)
    }  # fmt: skip


def test_a_megabyte_candidate_is_contained_and_said_in_status(runtime: Runtime) -> None:
    paste = "Always run the tests before pushing. " + "x" * (1 << 20)
    seed(runtime.store, "alice", "s1", [("user", paste), ("user", "We decided to keep the queue in Redis.")])
    report = Extractor(runtime.store).run()
    assert report.queued == 2  # the rule at the paste's start and the decision
    said = learning_status(runtime.store, "alice", True, 600)["extract"]["last_pass"]["did"]
    assert said["skipped"]["read only the first 64,000 characters"] == 1
    found = Candidates(runtime.store).listing("alice")["candidates"]
    assert all(len(c["text"]) <= MAX_CANDIDATE_CHARS for c in found)
    with pytest.raises(InvalidInput, match="at most"):
        Candidates(runtime.store).accept(
            "alice", found[0]["id"], into_library(Library(runtime)), text="y" * (MAX_EDIT_CHARS + 1)
        )


@pytest.mark.parametrize("name", ["../evil", "../../etc/passwd", "a/../../b", "..", "/abs", "UPPER", "x" * 65])
def test_a_skill_name_that_leaves_its_folder_is_refused_and_nothing_is_written(
    runtime: Runtime, lib: Library, user_home: Path, tmp_path: Path, name: str
) -> None:
    seed(runtime.store, "alice", "s1", [("user", "Next time, ask before you delete a branch.")])
    Extractor(runtime.store).run()
    before = outside(tmp_path, runtime, user_home)
    candidate = Candidates(runtime.store).listing("alice")["candidates"][0]["id"]
    for write in (
        lambda: lib.write_skill("alice", name, "d", "b", "loop", "t"),
        lambda: Candidates(runtime.store).accept("alice", candidate, into_library(lib), "skill", name, "d"),
    ):
        with pytest.raises(InvalidInput, match="not valid"):
            write()
    assert lib.listing("alice") == []
    assert Candidates(runtime.store).get("alice", candidate)["status"] == "pending"
    assert not list(user_home.rglob("SKILL.md")) and not list(runtime.settings.layout.skills.rglob("SKILL.md"))
    now = outside(tmp_path, runtime, user_home)
    assert {k: v for k, v in now.items() if not k.endswith(".lock")} == {
        k: v for k, v in before.items() if not k.endswith(".lock")
    }


def test_a_broken_copy_in_a_mirrored_folder_is_reported_in_status_and_writes_go_on(
    runtime: Runtime, lib: Library, user_home: Path, tmp_path: Path
) -> None:
    lib.write_skill("alice", "run-tests", "Run the tests.", "Run `pytest -q`.", "loop", "t")
    lib.write_skill("bob", "bobs-skill", "Bob's.", "Bob's text.", "loop", "t")
    copy = user_home / ".claude" / "skills" / "run-tests" / "SKILL.md"
    copy.write_text("---\nname: run-tests\ndescription: [unclosed\n---\nbody\n")  # broken by hand
    (user_home / ".claude" / "skills" / "bobs-skill" / "SKILL.md").write_text("no front matter at all\n")
    foreign = user_home / ".agents" / "skills" / "made-by-hand"
    foreign.mkdir(parents=True)
    (foreign / "SKILL.md").write_text("---\nname: wrong-name\ndescription: d\n---\n")
    before = outside(tmp_path, runtime, user_home)

    written = lib.write_skill("alice", "lint-first", "Lint first.", "Run `ruff check .`.", "loop", "t")
    assert {o["status"] for o in written["mirrors"]} == {"written"}
    said = learning_status(runtime.store, "alice", False, 600)["skills_mirror"]
    assert [b["path"] for b in said["broken"]] == [str(copy)] and "front matter" in said["broken"][0]["error"]
    # bob's broken copy and the folder a person made are not alice's to be told about
    assert "bobs-skill" not in str(said) and "made-by-hand" not in str(said)
    assert {b["path"] for b in lib.report("alice")["broken_skill_files"]} >= {str(copy), str(foreign / "SKILL.md")}
    mirrored = lib.mirror_all("alice")  # the copy edited by hand is left as the person made it
    assert [o["status"] for o in mirrored["skills"]["run-tests"]] == ["edited", "unchanged"]
    assert copy.read_text().startswith("---\nname: run-tests\ndescription: [unclosed")
    assert learning_status(runtime.store, "alice", False, 600)["skills_mirror"]["problems"]
    assert outside(tmp_path, runtime, user_home) == before
