"""`forget` over the user model (kinds `claims` and `style`): claims, their evidence and tier history, style
habits and the profile, picked by session, source, time or text; a dry run counts and changes nothing; after a
real run the text is gone from the database file (PostgreSQL: from every column of every table); a second user
can neither count nor erase the first's. A real SQLite file and a real PostgreSQL database, the real services."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.helpers import cli
from tests.store_scan import holding
from threadloom.erasure.service import Eraser
from threadloom.identity import Provenance
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.base import Store
from threadloom.store.erasure import KINDS, Selector
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.usermodel import UserModel

MARKER = "quorvantile"  # in one claim's text
SAID = "plinthwerber"  # in one statement, on another claim


def session(store: Store, sid: str, user: str, vendor: str = "claude") -> Provenance:
    info = SessionInfo(id=sid, vendor=vendor, transport="stdio", project="/repo", cwd="/repo", pid=1, user=user)
    SessionService(store).open(info)
    return info.provenance()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def holds(store: Store, text: str) -> bool:
    """SQLite: whether the file or its log holds `text`. PostgreSQL: whether any column of any table does."""
    if not isinstance(store, SqliteStore):
        return bool(holding(store, text))
    wal = store.path.with_name(store.path.name + "-wal")
    return text.encode() in store.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def count(store: Store, sql: str, params: dict[str, object] | None = None) -> int:
    return int(store.read(lambda r: r.scalar(sql, params)))


def test_claims_are_a_kind_of_forget() -> None:
    assert "claims" in KINDS


def test_by_text_a_claim_goes_with_its_evidence_and_tiers_and_its_bytes(store: Store) -> None:
    ana = session(store, "s1", "ana")
    model = UserModel(store)
    gone = model.claim(ana, f"prefers {MARKER} branches", "workflow", statement="I always rebase")["claim"]["id"]
    kept = model.claim(ana, "writes tests first", "workflow", statement=f"tests first, {SAID}")["claim"]["id"]
    model.add_evidence(ana, gone, "support", "statement", "rebase keeps history flat")
    assert holds(store, MARKER)  # the check below can fail: the text is there

    plan = Eraser(store).forget("ana", Selector(text=MARKER), ["claims"])
    assert plan["would_erase"]["claims"]["count"] == 1
    assert plan["would_erase"]["claims"]["evidence"] == 2
    assert plan["would_erase"]["claims"]["sample"][0]["id"] == gone
    assert plan["total"] == 3
    assert count(store, "SELECT count(*) FROM user_claims") == 2  # a dry run changes nothing

    done = Eraser(store).forget("ana", Selector(text=MARKER), ["claims"], dry_run=False)
    assert done["erased"]["claims"] == 1 and done["erased"]["claim_evidence"] == 2
    assert done["erased"]["claim_tiers"] >= 1
    for table in ("user_claims", "user_evidence", "user_claim_tiers"):
        column = "id" if table == "user_claims" else "claim_id"
        assert count(store, f"SELECT count(*) FROM {table} WHERE {column} = :c", {"c": gone}) == 0
    assert done["compaction"]["complete"] is True
    assert not holds(store, MARKER) and not holds(store, "I always rebase")
    assert holds(store, SAID)  # the other claim and its statement stay
    assert UserModel(store).review(ana, kept)["claim"]["id"] == kept


def test_a_statement_alone_goes_and_its_claim_is_counted_again(store: Store) -> None:
    ana = session(store, "s1", "ana")
    model = UserModel(store)
    claim = model.claim(ana, "writes tests first", "workflow", statement="tests before code")["claim"]
    model.add_evidence(ana, claim["id"], "support", "statement", f"red then green, {SAID}")
    before = model.review(ana, claim["id"])["claim"]["support"]

    done = Eraser(store).forget("ana", Selector(text=SAID), ["claims"], dry_run=False)
    assert done["erased"] == done["erased"] | {"claims": 0, "claim_evidence": 1}
    after = model.review(ana, claim["id"])
    assert after["claim"]["support"] == pytest.approx(before - 1.0)
    assert [e["ref"] for e in after["evidence"]] == ["tests before code"]
    assert not holds(store, SAID)


def test_by_session_the_claims_and_evidence_recorded_there(store: Store) -> None:
    first, second = session(store, "s1", "ana"), session(store, "s2", "ana", "codex")
    model = UserModel(store)
    old = model.claim(first, "likes small commits", "workflow")["claim"]["id"]
    model.add_evidence(second, old, "support", "statement", "one change per commit please")
    new = model.claim(second, "asks for a plan first", "communication")["claim"]["id"]

    plan = Eraser(store).forget("ana", Selector(session="s2"), ["claims"])
    assert plan["would_erase"]["claims"]["count"] == 1 and plan["would_erase"]["claims"]["evidence"] == 1
    by_source = Eraser(store).forget("ana", Selector(source="codex"), ["claims"])
    assert by_source["would_erase"]["claims"]["count"] == 1
    Eraser(store).forget("ana", Selector(session="s2"), ["claims"], dry_run=False)
    assert count(store, "SELECT count(*) FROM user_claims WHERE id = :c", {"c": new}) == 0
    left = model.review(first, old)
    assert left["evidence_total"] == 0 and left["claim"]["support"] == 0


def test_a_project_names_no_claim_and_a_time_range_does(store: Store) -> None:
    ana = session(store, "s1", "ana")
    claim = UserModel(store).claim(ana, "prefers tabs", "style")["claim"]
    assert Eraser(store).forget("ana", Selector(project="/repo"), ["claims"])["total"] == 0
    at = claim["created_at"]
    assert Eraser(store).forget("ana", Selector(since=at + 1), ["claims"])["total"] == 0
    assert Eraser(store).forget("ana", Selector(since=at, until=at + 1), ["claims"])["total"] == 1


def test_erasing_a_replacement_makes_the_old_claim_hold_again(store: Store) -> None:
    ana = session(store, "s1", "ana")
    model = UserModel(store)
    old = model.claim(ana, "prefers spaces", "style")["claim"]["id"]
    new = model.supersede(ana, old, f"prefers tabs now {MARKER}")["claim"]["id"]
    Eraser(store).forget("ana", Selector(text=MARKER), ["claims"], dry_run=False)
    again = model.review(ana, old)["claim"]
    assert again["superseded_by"] is None and again["valid_until"] is None
    assert [c["id"] for c in model.claims(ana)["claims"]] == [old]
    assert count(store, "SELECT count(*) FROM user_claims WHERE id = :c", {"c": new}) == 0


def test_erasing_the_old_claim_keeps_its_replacement(store: Store) -> None:
    ana = session(store, "s1", "ana")
    model = UserModel(store)
    old = model.claim(ana, f"prefers spaces {MARKER}", "style")["claim"]["id"]
    new = model.supersede(ana, old, "prefers tabs now")["claim"]["id"]
    Eraser(store).forget("ana", Selector(text=MARKER), ["claims"], dry_run=False)
    assert model.review(ana, new)["claim"]["supersedes"] is None
    assert model.review(ana, new)["supersedes_chain"] == []


def test_another_user_can_neither_count_nor_erase_the_first_users_claims(store: Store) -> None:
    ana, bob = session(store, "s1", "ana"), session(store, "s9", "bob")
    UserModel(store).claim(ana, f"prefers {MARKER} branches", "workflow", statement=f"say {SAID}")
    for sel in (Selector(text=MARKER), Selector(text=SAID), Selector(session="s1"), Selector(source="claude")):
        assert Eraser(store).forget("bob", sel, ["claims"])["total"] == 0
        assert Eraser(store).forget("bob", sel, ["claims"], dry_run=False)["erased"]["claims"] == 0
    assert count(store, "SELECT count(*) FROM user_evidence") == 1
    assert holds(store, MARKER)
    assert UserModel(store).claims(bob)["claims"] == []


# -- style memory: the same hook (store/erasure.py OTHER_KINDS) --------------------------------------------

HABIT = {"kind": "idiolect", "text": "snorkelwise done", "example": "snorkelwise done, ship it"}


def test_style_habits_profile_and_capsule_snapshots_go_by_text_and_the_capsule_moves_on(store: Store) -> None:
    from threadloom.style import StyleMemory

    first, second = session(store, "s1", "ana"), session(store, "s2", "ana")
    memory = StyleMemory(store)
    memory.hint(first, [HABIT])
    memory.hint(second, [HABIT], profile=["plan first, then implement"])
    before = memory.view(first, None, "all")
    assert "snorkelwise" in str(before) and holds(store, "snorkelwise")

    plan = Eraser(store).forget("ana", Selector(text="snorkelwise"), ["style"])
    assert plan["would_erase"]["style"]["count"] == 1 and plan["would_erase"]["style"]["profile"] == 0
    assert Eraser(store).forget("bob", Selector(text="snorkelwise"), ["style"])["total"] == 0  # nor can bob
    done = Eraser(store).forget("ana", Selector(text="snorkelwise"), ["style"], dry_run=False)
    assert done["erased"]["style_habits"] == 1 and done["erased"]["style_sightings"] == 2
    after = memory.view(first, None, "all")
    assert "snorkelwise" not in str(after) and after["revision"] > before["revision"]
    assert memory.view(first, before["revision"], "all")["mode"] != "ack"  # an old copy is not "unchanged"
    assert not holds(store, "snorkelwise")
    assert count(store, "SELECT count(*) FROM style_profile WHERE owner = 'ana'") == 1  # the rest stays


def test_style_by_source_takes_the_profile_too_and_a_session_only_habits_sighted_there(store: Store) -> None:
    from threadloom.style import StyleMemory

    first, second = session(store, "s1", "ana"), session(store, "s2", "ana")
    memory = StyleMemory(store)
    memory.hint(first, [HABIT], profile=["plan first, then implement"])
    assert Eraser(store).forget("ana", Selector(session="s2"), ["style"])["total"] == 0
    memory.hint(second, [HABIT])
    assert Eraser(store).forget("ana", Selector(session="s2"), ["style"])["would_erase"]["style"]["count"] == 1
    done = Eraser(store).forget("ana", Selector(source="claude"), ["style"], dry_run=False)
    assert done["erased"]["style_habits"] == 1 and done["erased"]["style_profile"] == 1
    assert memory.view(first, None, "all")["revision"] >= 1
    for table in ("style_habits", "style_observations", "style_profile"):
        assert count(store, f"SELECT count(*) FROM {table} WHERE owner = 'ana'") == 0


def test_the_cli_lists_claims_with_their_evidence_then_erases_them(home: Path) -> None:
    store = open_store(home / "threadloom.db")
    try:
        UserModel(store).claim(session(store, "s1", "ana"), f"prefers {MARKER} branches", statement="I rebase")
    finally:
        store.close()
    listed = cli(home, "forget", "--kind", "claims", "--text", MARKER, "--dry-run", THREADLOOM_USER="ana")
    assert listed.returncode == 0, listed.stderr
    assert "would erase 2 rows" in listed.stdout and "claims: 1 (+1 evidence)" in listed.stdout
    as_bob = cli(home, "forget", "--kind", "claims", "--text", MARKER, "--dry-run", THREADLOOM_USER="bob")
    assert "would erase 0 rows" in as_bob.stdout
    done = cli(home, "forget", "--kind", "claims", "--text", MARKER, "--yes", THREADLOOM_USER="ana")
    assert done.returncode == 0, done.stderr
    assert "claims 1" in done.stdout and "claim_evidence 1" in done.stdout
    data = b"".join(p.read_bytes() for p in home.glob("threadloom.db*"))
    assert MARKER.encode() not in data
