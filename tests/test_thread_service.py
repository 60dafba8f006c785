"""The thread service over a real git repository and a real store."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.errors import InvalidInput, NotFound, StoreFull
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Filters
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import SqliteStore
from threadloom.threads.files import ThreadFiles
from threadloom.threads.hygiene import ThreadHygiene
from threadloom.threads.notes import NoteService
from threadloom.threads.service import ThreadService


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "ana.lima@example.com")
    git(path, "config", "user.name", "Ana")
    (path / "src").mkdir()
    (path / "src/api.py").write_text("v = 1\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "start")
    return path


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def service(store: SqliteStore) -> ThreadService:
    return ThreadService(store, SearchEngine(store))


def prov(repo: Path, session: str = "s1") -> Provenance:
    return Provenance(session_id=session, vendor="claude", project=str(repo), user="ana")


def test_a_project_starts_with_a_root_thread_and_is_selected_by_itself(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    with pytest.raises(NotFound, match="no threadloom project"):
        threads.tree(prov(repo))
    project = threads.create_project(prov(repo), "My Shop", "You build a shop.")
    assert project.id == "my-shop"
    view = threads.tree(prov(repo, "another-session"))
    assert view["tree"] == "main  <- active" and view["problems"] == []
    md = (repo / ".threadloom/threads/my-shop/main.md").read_text()
    assert "author: ana-" in md and "title: My Shop" in md


def test_threads_branch_summarise_and_build_the_context(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.update_summary(p, "## Decisions\n- Postgres\n## State\n- root state")
    auth = threads.create(p, "Auth")
    threads.update_summary(p, "- JWT", section="Decisions")
    threads.update_summary(p, "- tokens expire in 15 min", section="constraints")
    threads.create(p, "Auth UI")
    threads.update_summary(p, "- login form", section="State")
    threads.create(p, "Dashboard", parent="main")
    ctx = threads.switch(p, "auth-ui")
    for wanted in ("- Postgres", "- JWT", "- tokens expire in 15 min", "- login form"):
        assert wanted in ctx.text
    assert "root state" not in ctx.text and "Dashboard" not in ctx.text
    assert ctx.threads == ("auth-ui", "auth", "main")
    assert auth.branch is None  # made on main: no feature branch to link
    hits = store.read(lambda r: r.scalar("SELECT count(*) FROM documents WHERE kind = 'thread'"))
    assert hits == 4
    found = SearchEngine(store).search("JWT", Filters(kinds=("thread",))).hits
    assert [h.ref for h in found] == ["shop/auth"]


def test_a_new_session_starts_on_the_thread_of_the_checked_out_branch(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    threads.create_project(prov(repo), "Shop")
    git(repo, "checkout", "-qb", "feature/search")
    made = threads.create(prov(repo), "Search box")
    assert made.branch == "feature/search"
    git(repo, "checkout", "-q", "main")
    assert threads.tree(prov(repo, "fresh-1"))["active"] == "main"
    git(repo, "checkout", "-q", "feature/search")
    assert threads.tree(prov(repo, "fresh-2"))["active"] == "search-box"


def test_the_context_warns_when_commits_changed_the_watched_paths(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.update_summary(p, "## State\n- api v1", paths=["src"])
    assert "commit" not in threads.context(p).text
    for n in (2, 3):
        (repo / "src/api.py").write_text(f"v = {n}\n")
        git(repo, "commit", "-qam", f"v{n}")
    (repo / "README").write_text("x")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "docs")
    assert "2 commit(s) changed src since this summary was written" in threads.context(p).text
    with pytest.raises(InvalidInput, match="relative"):
        threads.update_summary(p, "x", paths=["../etc"])


def test_status_merge_rebase_and_delete(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.create(p, "Try Redis")
    abandoned = threads.set_status(p, "abandoned", "too much ops work")
    assert (
        abandoned.status == "abandoned" and "- Abandoned: too much ops work" in abandoned.summary.sections["Decisions"]
    )
    threads.create(p, "Try SQLite cache", parent="main")
    parent = threads.merge(p, "## Decisions\n- cache in SQLite, Redis abandoned")
    assert parent.id == "main" and parent.status == "active" and threads.tree(p)["active"] == "main"
    tree = threads.tree(p)["tree"]
    assert "try-sqlite-cache [done]" in tree and "try-redis [abandoned]" in tree
    threads.create(p, "Later", parent="try-redis")
    with pytest.raises(InvalidInput, match="cycle"):
        threads.rebase(p, "try-redis", "later")
    threads.rebase(p, "later", "try-sqlite-cache")
    assert threads.delete(p, "try-sqlite-cache") == ["try-sqlite-cache", "later"]
    with pytest.raises(InvalidInput, match="root"):
        threads.delete(p, "main")
    assert sorted(path.stem for path in (repo / ".threadloom/threads/shop").glob("*.md")) == ["main", "try-redis"]


def test_a_broken_file_is_reported_and_the_rest_still_works(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.create(p, "Auth")
    (repo / ".threadloom/threads/shop/auth.md").write_text("---\nid: auth\ntitle: [broken\n---\n")
    view = threads.tree(p)
    assert view["tree"] == "main  <- active" and view["problems"][0]["path"].endswith("auth.md")


def test_notes_and_quotes_live_in_the_store_and_a_note_reopens_a_finished_thread(
    repo: Path, store: SqliteStore
) -> None:
    threads = service(store)
    notes = NoteService(store, SearchEngine(store), threads)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.create(p, "Payments")
    threads.set_status(p, "done", "shipped")
    added = notes.add_note(p, "Stripe webhooks retry for 3 days", kind="insight")
    assert added["reopened"] and threads.thread(p).status == "active"
    notes.add_quote(p, "never store card numbers, not even masked")
    notes.add_quote(p, "we ship on Tuesdays", project_wide=True)
    listed = [(n.kind, n.text) for n in notes.notes(p)]
    assert listed == [
        ("quote", "we ship on Tuesdays"),
        ("quote", "never store card numbers, not even masked"),
        ("insight", "Stripe webhooks retry for 3 days"),
    ]
    with pytest.raises(InvalidInput, match="note kind"):
        notes.add_note(p, "x", kind="gossip")
    found = SearchEngine(store).search("card numbers", Filters(kinds=("quote",))).hits
    assert [h.body for h in found] == ["never store card numbers, not even masked"]
    assert not (repo / ".threadloom/threads/shop/payments.md").read_text().count("Stripe")  # not in git


def open_session(store: SqliteStore, repo: Path, sid: str) -> SessionInfo:
    info = SessionInfo(id=sid, vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1, user="ana")
    SessionService(store).open(info)
    return info


def test_claims_keep_peers_apart_and_orphaned_claims_are_released(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    hygiene = ThreadHygiene(store, threads)
    a, b = open_session(store, repo, "a"), open_session(store, repo, "b")
    threads.create_project(prov(repo, "a"), "Shop")
    threads.create(prov(repo, "a"), "Billing")
    assert hygiene.claim(prov(repo, "a"), "billing")["session"] == "a"
    with pytest.raises(InvalidInput, match="claimed by session a"):
        hygiene.claim(prov(repo, "b"), "billing")
    with pytest.raises(InvalidInput, match="not this one"):
        hygiene.release(prov(repo, "b"), "billing")
    assert [(c["thread"], c["session_id"], c["live"]) for c in hygiene.claims(prov(repo, "b"))] == [
        ("billing", "a", True)
    ]
    assert [t["id"] for t in hygiene.pickup(prov(repo, "b"))] == []
    SessionService(store).close(a)
    assert [t["id"] for t in hygiene.pickup(prov(repo, "b"))] == ["billing"]
    assert hygiene.release_orphans() == 1 and hygiene.claims(prov(repo, "b")) == []
    hygiene.claim(prov(repo, "b"), "billing")
    assert hygiene.release(prov(repo, "b"), "billing") == {"thread": "billing", "released": True}
    SessionService(store).close(b)


def test_the_janitor_proposes_by_category_and_applies_only_when_asked(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    hygiene = ThreadHygiene(store, threads)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.create(p, "Empty idea", parent="main")
    threads.create(p, "Old work", parent="main")
    threads.update_summary(p, "## State\n- half done")
    threads.create(p, "Parked", parent="main")
    threads.update_summary(p, "## State\n- waiting")
    threads.set_status(p, "idle")
    later = threads.thread(p, "parked").updated_at + 90 * 86_400_000
    proposals = {x["id"]: (x["category"], x["propose"]) for x in hygiene.janitor(p, now=later)}
    assert proposals == {
        "empty-idea": ("empty", "abandoned"),
        "old-work": ("stale", "idle"),
        "parked": ("long idle", "done"),
    }
    assert threads.thread(p, "old-work").status == "active"  # a dry run changes nothing
    hygiene.janitor(p, apply=True, now=later)
    assert threads.thread(p, "old-work").status == "idle" and threads.thread(p, "parked").status == "done"
    assert [t["id"] for t in hygiene.compost(p, count=5, seed=1)] == ["old-work"]


def test_in_a_team_project_only_the_author_changes_a_thread(repo: Path, store: SqliteStore) -> None:
    ana = ThreadService(store, SearchEngine(store))
    ben = ThreadService(store, SearchEngine(store), author="ben")
    p_ana, p_ben = prov(repo, "ana"), prov(repo, "ben")
    ana.create_project(p_ana, "Team", mode="team")
    ana.create(p_ana, "Auth")
    ben.create(p_ben, "Auth tests", parent="auth")  # anyone may add a child
    ben.update_summary(p_ben, "- flaky login test", section="State")
    with pytest.raises(InvalidInput, match="only the author"):
        ben.update_summary(p_ben, "- mine now", section="State", thread_id="auth")
    with pytest.raises(InvalidInput, match="only the author"):
        ben.set_status(p_ben, "done", thread_id="auth")
    with pytest.raises(InvalidInput, match="only the author"):
        ben.merge(p_ben, "## Decisions\n- x")  # the parent is ana's
    with pytest.raises(InvalidInput, match="every descendant"):
        ana.delete(p_ana, "auth")  # a descendant is ben's
    assert "ben" in ben.thread(p_ben).author and ana.thread(p_ana, "auth").author.startswith("ana-")
    assert ben.delete(p_ben, "auth-tests") == ["auth-tests"]
    assert ana.delete(p_ana, "auth") == ["auth"]


def test_a_spawned_child_may_release_its_parents_claim(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    hygiene = ThreadHygiene(store, threads)
    open_session(store, repo, "parent")
    child = SessionInfo(
        id="child",
        vendor="codex",
        transport="bridge",
        project=str(repo),
        cwd=None,
        pid=2,
        parent_id="parent",
        user="ana",
    )
    SessionService(store).open(child)
    open_session(store, repo, "stranger")
    threads.create_project(prov(repo, "parent"), "Shop")
    threads.create(prov(repo, "parent"), "Billing")
    hygiene.claim(prov(repo, "parent"), "billing")
    with pytest.raises(InvalidInput, match="not this one or its parent"):
        hygiene.release(prov(repo, "stranger"), "billing")
    assert hygiene.release(prov(repo, "child"), "billing")["released"]


def test_a_change_that_fails_midway_puts_back_every_file_it_wrote(
    repo: Path, store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.create(p, "Cache")
    folder = repo / ".threadloom/threads/shop"
    before = {f.name: f.read_bytes() for f in folder.glob("*.md")}
    real_put = ThreadFiles.put

    def put(self: ThreadFiles, thread_id: str, text: str, replace: bool = True) -> bool:
        if thread_id == "cache" and "merged into" in text:
            raise InvalidInput("the disk said no")
        return real_put(self, thread_id, text, replace)

    with monkeypatch.context() as m:  # the child's status is written last: the parent, first, goes back
        m.setattr(ThreadFiles, "put", put)
        with pytest.raises(InvalidInput, match="the disk said no"):
            threads.merge(p, "## Decisions\n- cache in SQLite")
    assert {f.name: f.read_bytes() for f in folder.glob("*.md")} == before

    def full(*_: object) -> None:
        raise StoreFull("database or disk is full")

    with monkeypatch.context() as m:  # the index fails after the file was written: the file goes back
        m.setattr(SearchEngine, "index", staticmethod(full))
        with pytest.raises(StoreFull):
            threads.update_summary(p, "- never kept", section="State")
        with pytest.raises(StoreFull):
            threads.create(p, "Never made")
    assert {f.name: f.read_bytes() for f in folder.glob("*.md")} == before
    assert threads.thread(p, "cache").status == "active"


def test_a_project_never_takes_over_threads_whose_project_file_is_missing(repo: Path, store: SqliteStore) -> None:
    threads = service(store)
    p = prov(repo)
    threads.create_project(p, "Shop")
    threads.update_summary(p, "- Postgres", section="Decisions")
    (repo / ".threadloom/projects/shop.yaml").unlink()
    main = (repo / ".threadloom/threads/shop/main.md").read_bytes()
    with pytest.raises(InvalidInput, match=r"\.threadloom/threads/shop already holds threads \(main\)"):
        threads.create_project(p, "Shop")
    assert not (repo / ".threadloom/projects/shop.yaml").exists()
    assert (repo / ".threadloom/threads/shop/main.md").read_bytes() == main
    with pytest.raises(InvalidInput, match="system_context is at most 8,000"):
        threads.create_project(p, "Other", "x" * 8_001)
    assert not (repo / ".threadloom/projects/other.yaml").exists()
