"""`forget` over the learning loops' data (store/erasure_learning.py, erasure/learning.py): a real store, real
skill folders and a temp home with two CLI skills folders. A word forgotten leaves no candidate, concept,
insight, snapshot or trash copy, loop-written skill or lesson (nor its copies), exported line or report line
holding it; a forgotten session takes the candidates quoted from it and what loops wrote from them; what a
person wrote stays and is named; another user's data is neither counted nor touched. On both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import learning_fixtures
from tests.conftest import Backend
from tests.store_scan import holding
from tests.test_learning_extract import seed
from threadloom.config import Settings
from threadloom.erasure.learning import LearningFiles
from threadloom.erasure.service import Eraser
from threadloom.learning.candidates import Candidates, into_library
from threadloom.learning.concepts import Concepts
from threadloom.learning.curator import Curator
from threadloom.learning.harvest import Extractor
from threadloom.learning.insights import Insights
from threadloom.learning.library import Library
from threadloom.learning.snapshots import Snapshots
from threadloom.runtime import Runtime, open_runtime
from threadloom.store.erasure import Selector


@pytest.fixture
def runtime(tmp_path: Path, backend: Backend) -> Iterator[Runtime]:
    """learning_fixtures.runtime, on each backend."""
    url = None
    if backend.name == "postgresql":
        backend.open().close()
        url = backend.url
    rt = open_runtime(Settings(home=tmp_path / "home", embedder="none", store_url=url), "cli")
    yield rt
    rt.close()


user_home = learning_fixtures.user_home
lib = learning_fixtures.lib

WORD = "zebrafish"
MARK = "qxvmarker"  # only in ana's words: its bytes must leave the database file
ANA = [
    ("user", f"We decided to always feed the {WORD} at noon, {MARK} style."),
    ("user", "Next time, run the linter before pushing."),
]
BEN = [("user", f"We decided to always feed the {WORD} at dawn.")]


def world(runtime: Runtime, lib: Library) -> dict[str, int]:
    seed(runtime.store, "ana", "s-ana", ANA)
    seed(runtime.store, "ben", "s-ben", BEN, at=2_000)
    Extractor(runtime.store).run()
    queue = Candidates(runtime.store)
    found = {c["text"]: c["id"] for c in queue.listing("ana")["candidates"]}
    fish = next(i for t, i in found.items() if WORD in t)
    lint = next(i for t, i in found.items() if "linter" in t)
    write = into_library(lib)
    queue.accept("ana", fish, write, "skill", "feeding-rules", "When to feed the fish.", None, "loop")
    queue.accept("ana", lint, write, "lesson", origin="loop")
    lib.write_skill("ana", "tank-notes", "Tank notes.", f"The {WORD} tank is on the left.", "person", "me")
    lib.write_skill("ana", "old-fish", "Old.", f"Old {WORD} rule, {MARK}.", "loop", "task:t1")
    snaps = Snapshots(lib)
    snaps.take("ana", "before the test")
    snaps.trash("ana", "skill", "old-fish", "stale", None)
    Concepts(runtime.store).observe("ana", f"The {WORD} eat at fixed hours {MARK}", "session:s-ana", "s-ana")
    Concepts(runtime.store).observe("ana", "Flaky tests touch the clock", "session:s-ana", "s-ana")
    Concepts(runtime.store).observe("ben", f"The {WORD} eat at dawn", "session:s-ben", "s-ben")
    insights = Insights(runtime.store, runtime.settings.layout.home / "insights", threshold=1)
    kept = insights.distill("ana", f"Feed the {WORD} twice {MARK}", "s-ana")
    insights.vote("ana", kept["id"], "s-other", "up")
    other = insights.distill("ana", "Pin the toolchain", "s-ana")
    insights.vote("ana", other["id"], "s-other", "up")
    Curator(lib, runtime.settings.layout.home / "curator").run("ana")
    return {"fish": fish, "lint": lint}


def eraser(runtime: Runtime, lib: Library) -> Eraser:
    return Eraser(runtime.store, LearningFiles.of(lib, runtime.settings.layout.home))


def everything(runtime: Runtime, user_home: Path) -> bytes:
    """Every byte threadloom keeps: the store's file and log (PostgreSQL: MARK once if any column of any table
    holds it), the home's files and the CLIs' folders."""
    home = runtime.settings.layout.home
    runtime.store.read(lambda r: r.scalar("SELECT 1"))
    held = MARK.encode() if runtime.store.dialect == "postgresql" and holding(runtime.store, MARK) else b""
    return (
        b"".join(learning_fixtures.tree(home, user_home).values())
        + b"".join(p.read_bytes() for p in home.glob("threadloom.db*") if p.is_file())
        + held
    )


def test_a_forgotten_word_leaves_no_learning_copy_and_a_persons_skill_is_named(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    world(runtime, lib)
    mirrored = [
        user_home / ".claude/skills/feeding-rules/SKILL.md",
        user_home / ".agents/skills/feeding-rules/SKILL.md",
    ]
    assert all(p.is_file() for p in mirrored)
    export = runtime.settings.layout.home / "insights" / "ana.jsonl"
    assert WORD in export.read_text() and "toolchain" in export.read_text()
    assert MARK.encode() in everything(runtime, user_home)
    sel = Selector(text=WORD)

    plan = eraser(runtime, lib).forget("ana", sel, ["learning"], dry_run=True)
    found = plan["would_erase"]["learning"]
    assert found["count"] == 1 and WORD in found["sample"][0]["text"]
    assert (found["concepts"], found["insights"], found["skills"], found["lessons"]) == (1, 1, 1, 0)
    assert found["trash"] == 1 and found["snapshot_copies"] >= 2 and found["mirror_copies"] == 2
    assert found["exported_lines"] == 1 and found["report_lines"] >= 1
    assert found["kept_protected"] == [{"kind": "skill", "name": "tank-notes", "why": "written by a person"}]
    assert all(p.is_file() for p in mirrored)  # a dry run changes nothing

    done = eraser(runtime, lib).forget("ana", sel, ["learning"], dry_run=False)
    erased, files = done["erased"], done["learning_files"]
    assert (erased["learning"], erased["concepts"], erased["insights"], erased["skills"]) == (1, 1, 1, 1)
    assert files["skill_folders"] == 1 and files["mirror_copies"] == 2 and files["exported_lines"] == 1
    assert done["kept_protected"][0]["name"] == "tank-notes"
    assert not any(p.exists() for p in mirrored)
    assert not (runtime.settings.layout.skills / "ana" / "feeding-rules").exists()
    assert [e["name"] for e in lib.listing("ana")] == [
        "tank-notes",
        next(e["name"] for e in lib.listing("ana", "lesson")),
    ]
    assert export.read_text().count("\n") == 1 and "toolchain" in export.read_text()
    assert not any(MARK.encode() in b for b in learning_fixtures.tree(runtime.settings.layout.home, user_home).values())
    for snap in Snapshots(lib).listing("ana")["snapshots"]:  # what is left of each snapshot holds no word
        payload = runtime.store.read(
            lambda r, s=snap: r.scalar("SELECT payload FROM learning_snapshots WHERE id = :i", {"i": int(s["id"][1:])})
        )
        assert WORD not in payload
    assert Snapshots(lib).listing("ana")["trash"] == []
    assert [c["text"] for c in Concepts(runtime.store).listing("ana")] == ["Flaky tests touch the clock"]

    # ben's words are his: counted nowhere above, all still there.
    assert [c["text"] for c in Candidates(runtime.store).listing("ben")["candidates"]] == [BEN[0][1]]
    assert len(Concepts(runtime.store).listing("ben")) == 1
    again = eraser(runtime, lib).forget("ana", sel, ["learning"], dry_run=True)
    assert again["total"] == 0


def test_a_forgotten_session_takes_its_candidates_and_what_loops_wrote_from_them(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    ids = world(runtime, lib)
    lesson = next(e["name"] for e in lib.listing("ana", "lesson"))
    sel = Selector(session="s-ana")
    plan = eraser(runtime, lib).forget("ana", sel, ["transcripts"], dry_run=True)
    said = plan["would_erase"]["transcripts"]
    assert said["count"] == 2 and said["learning_candidates"] == 2 and (said["skills"], said["lessons"]) == (1, 1)

    done = eraser(runtime, lib).forget("ana", sel, ["transcripts"], dry_run=False)
    assert done["erased"]["learning_from_transcripts"] == 2 and done["erased"]["skills"] == 1
    assert done["learning_files"]["mirror_copies"] == 2
    queue = Candidates(runtime.store)
    for status in ("pending", "accepted", "merged", "rejected"):
        left = {c["id"] for c in queue.listing("ana", status)["candidates"]}
        assert not left & set(ids.values())
    names = {e["name"] for e in lib.listing("ana")}
    assert "feeding-rules" not in names and lesson not in names and "tank-notes" in names
    assert lesson not in (runtime.settings.layout.lessons / "ana.md").read_text()
    for snap in Snapshots(lib).listing("ana")["snapshots"]:
        payload = json.loads(
            runtime.store.read(
                lambda r, s=snap: r.scalar(
                    "SELECT payload FROM learning_snapshots WHERE id = :i", {"i": int(s["id"][1:])}
                )
            )
        )
        assert not {e["name"] for e in payload["entries"]} & {"feeding-rules", lesson}
    assert [c["text"] for c in queue.listing("ben")["candidates"]] == [BEN[0][1]]


def test_another_user_forgetting_the_same_word_touches_nothing_of_anas(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    world(runtime, lib)
    before = learning_fixtures.tree(runtime.settings.layout.home, user_home)
    counts = runtime.store.read(
        lambda r: [
            r.scalar(f"SELECT COUNT(*) FROM {t} WHERE owner = 'ana'")
            for t in ("learning_candidates", "learning_entries", "concepts", "insights", "learning_snapshots")
        ]
    )
    done = eraser(runtime, lib).forget("ben", Selector(text=WORD), ["learning"], dry_run=False)
    assert done["erased"]["learning"] == 1 and done["erased"]["skills"] == 0
    after = learning_fixtures.tree(runtime.settings.layout.home, user_home)
    assert {k: v for k, v in after.items() if "/curator/" not in k} == {
        k: v for k, v in before.items() if "/curator/" not in k
    }
    assert counts == runtime.store.read(
        lambda r: [
            r.scalar(f"SELECT COUNT(*) FROM {t} WHERE owner = 'ana'")
            for t in ("learning_candidates", "learning_entries", "concepts", "insights", "learning_snapshots")
        ]
    )


def test_forgetting_the_word_in_transcripts_and_learning_leaves_no_byte_of_it_in_the_home(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    world(runtime, lib)
    done = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["transcripts", "learning"], dry_run=False)
    assert done["erased"]["transcripts"] == 1 and done["erased"]["learning_from_transcripts"] == 1
    assert done["compaction"]["complete"] is True
    assert MARK.encode() not in everything(runtime, user_home)


def test_what_a_loops_child_printed_is_blanked_where_it_holds_the_word(
    runtime: Runtime, lib: Library, user_home: Path
) -> None:
    from tests.spawning import FAKE
    from tests.test_learning_review import finished
    from threadloom.coordination.spawn import SpawnConfig
    from threadloom.learning.evolve import EvolveJob
    from threadloom.learning.reviewer import REVIEW, candidates

    world(runtime, lib)
    seed(runtime.store, "ana", "s-more", [("user", "Always water the plants on mondays.")], at=5_000)
    Extractor(runtime.store).run()  # a pending candidate: the reviewer has something to look at
    home = runtime.settings.layout.home
    script = f'say "reviewing: feed the {WORD} at noon\\nnothing else"'
    extra = {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "FAKE_AGENT_SCRIPT": script}
    job = EvolveJob(runtime.store, home, SpawnConfig(command=FAKE, grace_s=1.0, extra_env=extra), "ana", REVIEW,
                    candidates, agent="custom")  # fmt: skip
    task = finished(job, str(job.run().task))
    log = Path(task["log_path"])
    assert WORD in log.read_text() and "nothing else" in log.read_text()
    plan = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["learning"], dry_run=True)
    assert plan["would_erase"]["learning"]["loop_log_lines"] >= 1
    done = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["learning"], dry_run=False)
    assert done["learning_files"]["loop_log_lines"] >= 1
    assert WORD not in log.read_text() and "nothing else" in log.read_text()
    ben = eraser(runtime, lib).forget("ben", Selector(text="nothing else"), ["learning"], dry_run=True)
    assert "loop_log_lines" not in ben["would_erase"]["learning"]  # ana's child's log is not ben's


def test_links_planted_where_forget_rewrites_files_are_not_followed(
    runtime: Runtime, lib: Library, user_home: Path, tmp_path: Path
) -> None:
    world(runtime, lib)
    home = runtime.settings.layout.home
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text(f'{{"id": 1, "text": "{WORD}", "up": 1, "down": 0, "at": 1}}\nkeep me\n')
    export = home / "insights" / "ana.jsonl"
    export.unlink()
    export.symlink_to(victim)  # the export file swapped for a link out
    reports = home / "curator" / "ana"
    for f in reports.iterdir():
        f.unlink()
    reports.rmdir()
    reports.symlink_to(outside)  # the reports folder too
    (outside / "r.md").write_text(f"| skill | {WORD} |\n")
    before = learning_fixtures.tree(outside)
    done = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["learning"], dry_run=False)
    assert done["learning_files"]["exported_lines"] == 0 and done["learning_files"]["report_lines"] == 0
    assert learning_fixtures.tree(outside) == before
    assert done["erased"]["learning"] == 1  # the rows went all the same


def test_the_learning_jobs_records_holding_the_word_are_blanked(runtime: Runtime, lib: Library) -> None:
    world(runtime, lib)
    lib.write_skill("ana", "fish-links", "Links.", f"See [the notes](references/{WORD}.md).", "loop", "task:t2")
    Curator(lib, runtime.settings.layout.home / "curator").run("ana")  # its findings quote the broken link

    def held(owner: str) -> int:
        return int(
            runtime.store.read(
                lambda r: r.scalar(
                    "SELECT COUNT(*) FROM job_runs WHERE name LIKE 'learning.%' AND name LIKE :o "
                    "AND instr(outcome, :w) > 0",
                    {"o": f"%:{owner}", "w": WORD},
                )
            )
        )

    assert held("ana") >= 1
    plan = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["learning"], dry_run=True)
    assert plan["would_erase"]["learning"]["job_records"] == held("ana")
    done = eraser(runtime, lib).forget("ana", Selector(text=WORD), ["learning"], dry_run=False)
    assert done["erased"]["job_records"] >= 1 and held("ana") == 0
