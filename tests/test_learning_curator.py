"""The curator (threadloom/learning/curator.py): a real store, real canonical folders and a temp folder standing
in for the user's home with Claude Code and Codex installed, so merges, trash and restore touch real files."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests import learning_fixtures
from tests.fakes import HashingEmbedder
from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.learning.curator import Curator, curator_status
from threadloom.learning.curator_audit import DUPLICATE, _duplicates
from threadloom.learning.library import Library
from threadloom.learning.snapshots import Snapshots
from threadloom.runtime import Runtime

runtime = learning_fixtures.runtime
user_home = learning_fixtures.user_home
lib = learning_fixtures.lib
tree = learning_fixtures.tree

DAY = 86_400_000
DEPLOY = "Deploy with the release script.\n\nRun `make release` from a clean tree, then tag the commit."
DEPLOY_TOO = "Deploy with the release script.\n\nRun `make release` from a clean tree then tag the commit!\n\nCheck CI."


def curator(runtime: Runtime, lib: Library, budget: int = 5) -> Curator:
    return Curator(lib, runtime.settings.layout.home / "curator", delete_budget=budget)


def rows(runtime: Runtime, owner: str = "alice") -> list[dict[str, object]]:
    return runtime.store.read(
        lambda r: r.rows("SELECT * FROM learning_entries WHERE owner = :o ORDER BY kind, name", {"o": owner})
    )


def test_a_pass_merges_two_duplicates_under_a_snapshot_and_restore_brings_them_back_byte_identical(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1", {"tags.md": "v1.2"})
    lib.write_skill("alice", "deploy-steps", "How to deploy.", DEPLOY_TOO, "loop", "review:2", {"ci.md": "CI"})
    lib.mark_used("alice", "deploy")
    skills = runtime.settings.layout.skills
    before, before_rows = tree(skills, user_home), rows(runtime)

    dry = curator(runtime, lib).run("alice", dry_run=True)
    assert dry["counts"] == {"keep": 1, "merge": 1} and dry["snapshot"] is None and dry["report"] is None
    assert tree(skills, user_home) == before  # a dry run writes nothing

    done = curator(runtime, lib).run("alice")
    assert done["done"]["merged"] == 1 and done["snapshot"] == "s1"
    merged = {v["name"]: v for v in done["verdicts"]}["deploy-steps"]
    assert merged["verdict"] == "merge" and merged["into"] == "deploy" and "trash" in merged["action"]
    survivor = lib.show("alice", "deploy", mark=False)
    assert "Check CI." in survivor["text"] and survivor["references"] == ["ci.md", "tags.md"]
    assert [r["name"] for r in rows(runtime)] == ["deploy"]
    assert not (user_home / ".claude/skills/deploy-steps").exists()
    report = Path(done["report"])
    assert report.is_relative_to(runtime.settings.layout.home / "curator" / "alice")
    assert "| skill | deploy-steps | merge into deploy |" in report.read_text()

    listed = Snapshots(lib).listing("alice")
    assert [s["id"] for s in listed["snapshots"]] == ["s1"] and listed["trash"][0]["name"] == "deploy-steps"
    restored = Snapshots(lib).restore("alice", "s1")
    assert {r["name"] for r in restored["restored"]} == {"deploy", "deploy-steps"}
    after = tree(skills, user_home)
    assert after == before  # canonical folders and both CLIs' copies, byte for byte
    assert rows(runtime) == before_rows  # provenance, usage counts and times too


def test_restore_from_the_trash_puts_back_one_entry_and_keeps_the_rest(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    lib.write_skill("alice", "deploy-steps", "How to deploy.", DEPLOY_TOO, "loop", "review:2")
    curator(runtime, lib).run("alice")
    lib.write_skill("alice", "later", "Made after the pass.", "Step.", "person", "cli")
    trash = Snapshots(lib).listing("alice")["trash"]
    out = Snapshots(lib).restore("alice", trash[0]["id"])
    assert out["restored"] == [{"kind": "skill", "name": "deploy-steps"}]
    assert {r["name"] for r in rows(runtime)} == {"deploy", "deploy-steps", "later"}
    assert Snapshots(lib).listing("alice")["trash"] == []  # restored: no longer in the trash
    with pytest.raises(NotFound):
        Snapshots(lib).restore("alice", trash[0]["id"])


def test_the_delete_budget_caps_what_leaves_a_pass_and_the_rest_waits(runtime: Runtime, lib: Library) -> None:
    topics = ("git rebase onto main", "pytest fixtures scope", "docker layer cache", "sql index order")
    for i, topic in enumerate(topics):
        body = f"When working on {topic}, read the notes about {topic} first and keep them current."
        lib.write_skill("alice", f"topic-{i}-a", f"Topic {i}.", body, "loop", "review:1")
        lib.write_skill("alice", f"topic-{i}-b", f"Topic {i}.", body + " Mu.", "loop", "review:1")
    first = curator(runtime, lib, budget=2).run("alice")
    assert first["done"]["merged"] == 2 and first["done"]["deferred"] == 2
    assert len(rows(runtime)) == 6
    second = curator(runtime, lib, budget=2).run("alice")
    assert second["done"]["merged"] == 2 and len(rows(runtime)) == 4
    assert second["snapshot"] == "s2"  # each destructive pass snapshots first


def test_protected_entries_are_never_changed_or_removed(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "mine", "How to deploy.", DEPLOY, "person", "cli")
    lib.write_skill("alice", "mine-too", "How to deploy.", DEPLOY, "person", "cli")
    lib.write_skill("alice", "loopy", "How to deploy.", DEPLOY_TOO, "loop", "review:1")
    lib.write_skill("alice", "pinned-old", "Old pinned.", "Something rarely needed.", "loop", "review:1")
    lib.pin("alice", "pinned-old")
    lib.add_lesson("alice", "Never push on Fridays.", "person", "cli")
    old = now_ms() - 400 * DAY
    runtime.store.write(lambda w: w.execute("UPDATE learning_entries SET created_at = :t, updated_at = :t", {"t": old}))
    skills = runtime.settings.layout.skills / "alice"
    mine_before = tree(skills / "mine", skills / "mine-too", skills / "pinned-old")

    out = curator(runtime, lib).run("alice")
    verdicts = {v["name"]: v for v in out["verdicts"]}
    assert verdicts["loopy"]["verdict"] == "merge" and verdicts["loopy"]["into"] in ("mine", "mine-too")
    for name in ("mine", "mine-too", "pinned-old"):
        assert verdicts[name]["verdict"] == "human review" and verdicts[name]["protected"] is True
    assert tree(skills / "mine", skills / "mine-too", skills / "pinned-old") == mine_before
    assert {r["name"] for r in rows(runtime)} >= {"mine", "mine-too", "pinned-old"}
    lessons = [v for v in out["verdicts"] if v["kind"] == "lesson"]
    assert lessons[0]["verdict"] == "human review"  # stale, but a person wrote it
    # even a direct request to the trash, as a loop, is refused for a protected entry
    with pytest.raises(InvalidInput, match="protected"):
        Snapshots(lib).trash("alice", "skill", "mine", "test", None)
    assert "mine" in {r["name"] for r in rows(runtime)}


def test_stale_loop_entries_are_deprecated_then_deleted_after_the_grace_and_revived_when_used(
    runtime: Runtime, lib: Library
) -> None:
    lib.write_skill("alice", "old-one", "Rarely used.", "Old steps here.", "loop", "review:1")
    lib.write_skill("alice", "old-two", "Rarely used either.", "Other old text.", "loop", "review:1")
    old = now_ms() - 200 * DAY
    runtime.store.write(lambda w: w.execute("UPDATE learning_entries SET created_at = :t, updated_at = :t", {"t": old}))
    first = curator(runtime, lib).run("alice")
    assert first["done"]["deprecated"] == 2 and first["snapshot"] is None  # nothing removed, no snapshot
    within_grace = curator(runtime, lib).run("alice")  # still deprecated, not deleted, not revived
    assert within_grace["done"] == first["done"] | {"deprecated": 0}
    assert within_grace["counts"] == {"deprecate": 2}
    lib.mark_used("alice", "old-two")
    runtime.store.write(lambda w: w.execute("UPDATE learning_curation SET since = :t", {"t": now_ms() - 30 * DAY}))
    second = curator(runtime, lib).run("alice")
    assert second["done"]["deleted"] == 1 and second["done"]["revived"] == 1
    assert [r["name"] for r in rows(runtime)] == ["old-two"]


def test_a_broken_canonical_skill_is_reported_for_repair_and_nothing_outside_the_folders_is_touched(
    runtime: Runtime, lib: Library, tmp_path: Path
) -> None:
    lib.write_skill("alice", "links", "Has links.", "See [the guide](references/guide.md).", "loop", "review:1")
    lib.write_skill("alice", "broken", "Will break.", "Fine for now.", "loop", "review:1")
    folder = runtime.settings.layout.skills / "alice"
    (folder / "broken" / "SKILL.md").write_text("---\nname: [unclosed\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    out = curator(runtime, lib).run("alice")
    verdicts = {v["name"]: v for v in out["verdicts"]}
    assert verdicts["links"]["verdict"] == "repair" and "references/guide.md" in verdicts["links"]["reasons"][0]
    assert verdicts["broken"]["verdict"] == "human review"  # edited by hand: the person's to fix
    assert (folder / "broken" / "SKILL.md").read_text() == "---\nname: [unclosed\n"
    assert outside.read_text() == "keep"


def test_another_user_sees_and_changes_nothing(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    lib.write_skill("alice", "deploy-steps", "How to deploy.", DEPLOY_TOO, "loop", "review:2")
    bob = curator(runtime, lib).run("bob")
    assert bob["verdicts"] == [] and len(rows(runtime)) == 2
    curator(runtime, lib).run("alice")
    assert Snapshots(lib).listing("bob") == {"snapshots": [], "trash": []}
    with pytest.raises(NotFound):
        Snapshots(lib).restore("bob", "s1")
    assert len(rows(runtime)) == 1


@pytest.mark.parametrize("ref", ["../s1", "s", "x1", "s1; DROP TABLE", ""])
def test_restore_refuses_what_is_not_a_snapshot_or_trash_id(lib: Library, ref: str) -> None:
    with pytest.raises(InvalidInput):
        Snapshots(lib).restore("alice", ref)


def test_a_tampered_snapshot_cannot_write_outside_the_skill_folder(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    sid = Snapshots(lib).take("alice", "test")
    runtime.store.write(
        lambda w: w.execute(
            "UPDATE learning_snapshots SET payload = replace(payload, '\"references/', '\"../../') WHERE id = :i",
            {"i": sid},
        )
    )
    lib.write_skill("alice", "deploy", "How to deploy.", "Changed.", "loop", "review:1", {"x.md": "x"})
    runtime.store.write(
        lambda w: w.execute(
            "UPDATE learning_snapshots SET payload = replace(payload, '\"SKILL.md\"', '\"../evil.md\"') WHERE id = :i",
            {"i": sid},
        )
    )
    with pytest.raises(InvalidInput, match="not a skill's file"):
        Snapshots(lib).restore("alice", f"s{sid}")
    assert not (runtime.settings.layout.skills / "evil.md").exists()
    assert "Changed." in lib.show("alice", "deploy", mark=False)["text"]


def test_two_curators_racing_one_user_make_one_pass(runtime: Runtime, lib: Library) -> None:
    from threadloom.store import jobs

    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    first, second = curator(runtime, lib), curator(runtime, lib)
    runtime.store.write(lambda w: jobs.acquire(w, "learning.curate:alice", first._holder, now_ms(), 60_000))
    assert second.run("alice") == {"busy": True}
    runtime.store.write(lambda w: jobs.release(w, "learning.curate:alice", first._holder))
    assert "busy" not in second.run("alice")


def test_the_scheduled_pass_runs_once_a_day_per_user_whatever_restarts(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    lib.add_lesson("bob", "Never force-push main.", "person", "cli")
    first = curator(runtime, lib).run_due()
    assert sorted(first) == ["alice", "bob"] and all("counts" in r for r in first.values())
    assert curator(runtime, lib).run_due() == {}  # a new curator (a restarted daemon) finds both done today
    curator(runtime, lib).run("alice", dry_run=True)  # a dry run is not a pass
    status = runtime.store.read(lambda r: curator_status(r, "alice", False))
    assert status["enabled"] is False and status["last_pass"]["dry_run"] is False
    assert status["last_pass"]["counts"] == {"keep": 1}


@pytest.mark.parametrize("name", ["../escape", "a/../../b", "..", "x" * 200])
def test_trash_refuses_a_name_that_is_not_a_skill_name(lib: Library, name: str) -> None:
    with pytest.raises((InvalidInput, NotFound)):
        Snapshots(lib).trash("alice", "skill", name, "test", None)


def test_an_entry_a_duplicate_merges_into_is_not_deleted_in_the_same_pass(runtime: Runtime, lib: Library) -> None:
    lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
    lib.write_skill("alice", "deploy-steps", "How to deploy.", DEPLOY_TOO, "loop", "review:2")
    lib.mark_used("alice", "deploy")
    old = now_ms() - 400 * DAY
    runtime.store.write(
        lambda w: w.execute(
            "UPDATE learning_entries SET created_at = :t, updated_at = :t, last_used_at = :t, last_viewed_at = :t",
            {"t": old},
        )
    )
    runtime.store.write(
        lambda w: w.execute(
            "INSERT INTO learning_curation VALUES ('alice', 'skill', 'deploy', 'deprecated', :t)", {"t": old}
        )
    )
    out = curator(runtime, lib).run("alice")
    verdicts = {v["name"]: v for v in out["verdicts"]}
    assert verdicts["deploy-steps"]["into"] == "deploy" and verdicts["deploy"]["verdict"] == "delete"
    assert [r["name"] for r in rows(runtime)] == ["deploy"] and out["done"]["deferred"] == 1


def test_with_an_embedder_restatements_are_duplicates_and_unrelated_entries_are_not(
    runtime: Runtime, lib: Library
) -> None:
    lib.write_skill("alice", "car-wash", "Wash.", "Wash the automobile on Sunday.", "loop", "review:1")
    lib.write_skill("alice", "car-clean", "Wash.", "Wash the car on Sunday.", "loop", "review:2")
    lib.write_skill("alice", "dog-walk", "Walk.", "Walk the dog at noon before lunch.", "loop", "review:3")
    words_only = curator(runtime, lib).preview("alice")
    assert words_only["counts"] == {"keep": 3}  # "automobile" and "car" share no letters
    with_model = Curator(lib, runtime.settings.layout.home / "curator", embedder=HashingEmbedder()).preview("alice")
    verdicts = {v["name"]: v for v in with_model["verdicts"]}
    assert {verdicts["car-wash"]["verdict"], verdicts["car-clean"]["verdict"]} == {"keep", "merge"}
    assert verdicts["dog-walk"]["verdict"] == "keep"


def test_word_overlap_finds_every_duplicate_pair_a_full_comparison_finds(runtime: Runtime, lib: Library) -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.sample(vocab, rng.randint(3, 12))) for _ in range(300)]
    texts += [t + " extra" for t in texts[:50]]
    entries = [{"kind": "skill"} for _ in texts]
    words = [set(t.split()) for t in texts]
    full = {
        (i, j)
        for i in range(len(texts))
        for j in range(i + 1, len(texts))
        if len(words[i] & words[j]) / len(words[i] | words[j]) >= DUPLICATE
    }
    assert len(full) >= 40
    assert {(i, j) for i, j, _ in _duplicates(entries, texts, None, 1.0)} == full
