"""The user model's service on a real SQLite store: confidence, tiers and their history, the automated
discount, supersession and as_of, cycles, bad input, another user, secrets, and the brief's slot."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from threadloom.brief import render_brief
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.runtime import open_runtime
from threadloom.sessions import SessionInfo
from threadloom.store.sqlite import SqliteStore
from threadloom.usermodel import UserModel
from threadloom.usermodel.confidence import confidence

ANA = Provenance(session_id="s1", vendor="claude", project="/repo", user="ana")
BEN = Provenance(session_id="s2", vendor="codex", project="/repo", user="ben")
JOB = Provenance(session_id=None, vendor="other", project=None, origin="job:miner", user="ana")
TABLES = ("user_claims", "user_evidence", "user_claim_tiers")


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


@pytest.fixture
def model(store: SqliteStore) -> UserModel:
    return UserModel(store)


def counts(store: SqliteStore) -> tuple[int, ...]:
    return tuple(int(store.read(lambda r, t=t: r.scalar(f"SELECT count(*) FROM {t}"))) for t in TABLES)


def support(
    model: UserModel, claim_id: str, n: int, origin: str = "user", prov: Provenance = ANA, said: str = "said so"
) -> list[str]:
    """`n` distinct supporting statements; the tier after each."""
    return [
        model.add_evidence(prov, claim_id, "support", "statement", f"{said}, time {i}", origin=origin)["claim"]["tier"]
        for i in range(n)
    ]


def test_a_claim_climbs_the_tiers_one_recorded_step_at_a_time(model: UserModel) -> None:
    made = model.claim(ANA, "Wants conclusions first, details after", "communication", statement="lead with the answer")
    claim = made["claim"]
    assert claim["tier"] == "hypothesis" and claim["support"] == 1.0
    assert claim["confidence"] == round(confidence(1.0, 0.0), 3) == 0.667
    cid = claim["id"]
    assert support(model, cid, 3) == ["observed", "observed", "validated"]
    history = model.review(ANA, cid)["history"]
    assert [(h["from"], h["to"]) for h in history] == [
        (None, "hypothesis"),
        ("hypothesis", "observed"),
        ("observed", "validated"),
    ]
    assert all(h["at"] > 0 and h["reason"] for h in history) and history[2]["evidence"] is not None

    pushed = model.add_evidence(ANA, cid, "contradict", "statement", "actually, give me the details first")
    assert pushed["transitions"] == [
        {"from": "validated", "to": "observed", "reason": "contradicted in the last 14 days"}
    ]
    # Recent contradiction: more support keeps it observed, never straight back to validated.
    assert support(model, cid, 1, said="again") == ["observed"]
    for i in range(5):
        model.add_evidence(ANA, cid, "contradict", "statement", f"no, details first ({i})")
    disputed = model.review(ANA, cid)
    assert disputed["claim"]["tier"] == "disputed" and disputed["claim"]["band"] == "disputed"
    # Support 5 against 6: recovery goes through hypothesis once support overtakes, one step per piece.
    tiers = support(model, cid, 3, said="yes really")
    assert tiers == ["disputed", "hypothesis", "observed"]
    assert [h["to"] for h in model.review(ANA, cid)["history"]][-4:] == [
        "observed",
        "disputed",
        "hypothesis",
        "observed",
    ]


def test_automated_evidence_counts_half_and_a_loop_cannot_claim_the_users_voice(
    model: UserModel, store: SqliteStore
) -> None:
    by_user = model.claim(ANA, "Prefers small commits", "workflow")["claim"]["id"]
    by_loop = model.claim(ANA, "Prefers rebase over merge", "workflow")["claim"]["id"]
    assert support(model, by_user, 2) == ["hypothesis", "observed"]
    assert support(model, by_loop, 4, origin="automated") == ["hypothesis", "hypothesis", "hypothesis", "observed"]
    assert model.review(ANA, by_loop)["claim"]["support"] == 2.0

    # A background job says "user": it is stored as automated, at half weight.
    job = model.claim(ANA, "Writes tests first", "workflow")["claim"]["id"]
    added = model.add_evidence(JOB, job, "support", "statement", "test file written before code", origin="user")
    assert added["claim"]["support"] == 0.5
    # So is a child agent threadloom spawned (its session has a parent).
    runtime_child = SessionInfo("child-1", "codex", "stdio", "/repo", "/repo", 2, parent_id="s1", user="ana")
    store.write(
        lambda w: w.execute(
            "INSERT INTO sessions (id, vendor, transport, origin, started_at, last_seen_at, parent_id, user) "
            "VALUES (:id, :vendor, 'stdio', 'foreground', 1, 1, :parent, :user)",
            {"id": runtime_child.id, "vendor": "codex", "parent": "s1", "user": "ana"},
        )
    )
    child = runtime_child.provenance()
    model.add_evidence(child, job, "support", "statement", "asked for the failing test", origin="user")
    evidence = model.review(ANA, job)["evidence"]
    assert {e["origin"] for e in evidence} == {"automated"} and model.review(ANA, job)["claim"]["support"] == 1.0


def test_the_same_source_counts_once(model: UserModel) -> None:
    cid = model.claim(ANA, "Likes tables in answers", "style")["claim"]["id"]
    first = model.add_evidence(ANA, cid, "support", "statement", "put it in a table please")
    again = model.add_evidence(ANA, cid, "support", "statement", "put  it in a table   please")
    assert first["counted"] and not again["counted"] and again["evidence"] == first["evidence"]
    assert again["claim"]["support"] == 1.0


def test_supersede_keeps_the_old_claim_and_as_of_answers_what_was_believed_then(
    model: UserModel, store: SqliteStore
) -> None:
    old = model.claim(ANA, "Uses tabs", "technical", statement="tabs, always", valid_from=now_ms() - 10_000)
    old_id = old["claim"]["id"]
    before = now_ms()
    while now_ms() == before:  # a distinct instant between the two claims
        pass
    new = model.supersede(ANA, old_id, "Uses spaces (4)", statement="switched to spaces")
    new_id = new["claim"]["id"]
    assert (
        new["superseded"] == old_id and new["claim"]["supersedes"] == old_id and new["claim"]["domain"] == "technical"
    )

    reviewed = model.review(ANA, old_id)
    assert reviewed["claim"]["superseded_by"] == new_id and reviewed["claim"]["valid_until"] is not None
    assert reviewed["evidence_total"] == 1 and reviewed["evidence"][0]["ref"] == "tabs, always"
    assert model.review(ANA, new_id)["supersedes_chain"] == [old_id]

    now_texts = [c["text"] for c in model.claims(ANA)["claims"]]
    then_texts = [c["text"] for c in model.claims(ANA, as_of=before)["claims"]]
    assert now_texts == ["Uses spaces (4)"] and then_texts == ["Uses tabs"]
    assert model.review(ANA, old_id, as_of=before)["held_then"] is True
    assert model.review(ANA, new_id, as_of=before)["held_then"] is False
    assert counts(store)[0] == 2  # nothing deleted

    with pytest.raises(InvalidInput, match="already superseded"):
        model.supersede(ANA, old_id, "Uses tabs again")
    # A cycle: the old claim may not come back as its own successor's successor.
    with pytest.raises(InvalidInput, match="cycle"):
        model.supersede(ANA, new_id, by=old_id)
    with pytest.raises(InvalidInput, match="cycle"):
        model.supersede(ANA, new_id, by=new_id)
    with pytest.raises(InvalidInput, match="superseded"):
        model.add_evidence(ANA, old_id, "support", "statement", "tabs!")
    assert counts(store) == (2, 2, 2)


def test_supersede_by_an_existing_claim(model: UserModel) -> None:
    a = model.claim(ANA, "Likes long explanations", "communication")["claim"]["id"]
    b = model.claim(ANA, "Likes short answers", "communication")["claim"]["id"]
    linked = model.supersede(ANA, a, by=b)
    assert linked["claim"]["id"] == b and linked["claim"]["supersedes"] == a
    with pytest.raises(InvalidInput, match="cycle"):
        model.supersede(ANA, b, by=a)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda m: m.claim(ANA, "   "), "empty"),
        (lambda m: m.claim(ANA, "x" * 1_000_000), "at most 500"),
        (lambda m: m.claim(ANA, 42), "is a string"),  # type: ignore[arg-type]
        (lambda m: m.claim(ANA, "ok", "Not A Domain!"), "domain"),
        (lambda m: m.claim(ANA, "ok", statement="s" * 1_000_000), "at most 2,000"),
        (lambda m: m.claim(ANA, "ok", valid_from=now_ms() + 86_400_000), "future"),
        (lambda m: m.add_evidence(ANA, "uc_0000000000000000", "support", "statement", "x"), "no claim"),
        (lambda m: m.add_evidence(ANA, "../etc", "support", "statement", "x"), "not a claim id"),
        (lambda m: m.supersede(ANA, "uc_0000000000000000", "new"), "no claim"),
        (lambda m: m.claim(ANA, "ok", origin="me"), "origin"),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(
    model: UserModel, store: SqliteStore, call: object, error: str
) -> None:
    with pytest.raises(InvalidInput, match=error):
        call(model)  # type: ignore[operator]
    assert counts(store) == (0, 0, 0)


def test_bad_evidence_is_refused_and_stores_nothing(model: UserModel, store: SqliteStore) -> None:
    cid = model.claim(ANA, "Reviews diffs line by line", "workflow")["claim"]["id"]
    stored = counts(store)
    for kind, source, ref, weight, error in [
        ("maybe", "statement", "x", 1.0, "kind"),
        ("support", "email", "x", 1.0, "source"),
        ("support", "memory", "not-an-id", 1.0, "memory id"),
        ("support", "memory", "m_0123456789abcdef", 1.0, "no memory"),
        ("support", "message", "12", 1.0, "no message"),
        ("support", "note", "abc", 1.0, "number"),
        ("support", "statement", "x", 0.0, "weight"),
        ("support", "statement", "x", 7, "weight"),
        ("support", "statement", "", 1.0, "empty"),
        ("support", "statement", "y" * 1_000_000, 1.0, "at most 2,000"),
    ]:
        with pytest.raises(InvalidInput, match=error):
            model.add_evidence(ANA, cid, kind, source, ref, weight)
    assert counts(store) == stored


def test_another_user_sees_and_changes_nothing(model: UserModel, store: SqliteStore) -> None:
    cid = model.claim(ANA, "Works late at night", "context", statement="I code after midnight")["claim"]["id"]
    stored = counts(store)
    for attempt in (
        lambda: model.review(BEN, cid),
        lambda: model.add_evidence(BEN, cid, "contradict", "statement", "no she does not"),
        lambda: model.supersede(BEN, cid, "Works mornings"),
    ):
        with pytest.raises(NotFound, match=f"no claim {cid} of yours"):
            attempt()
    assert model.claims(BEN)["claims"] == [] and model.synthesis(BEN)["domains"] == {}
    assert counts(store) == stored


def test_secrets_in_claims_and_statements_are_scrubbed(model: UserModel, store: SqliteStore) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    made = model.claim(ANA, f"Keeps the token {token} in the shell", "technical", statement=f"export GH={token}")
    raw = store.read(
        lambda r: r.rows("SELECT c.text, e.ref FROM user_claims c JOIN user_evidence e ON e.claim_id = c.id")
    )
    assert token not in repr(raw) and token not in repr(made) and "[secret:" in raw[0]["text"]


def test_synthesis_groups_by_domain_and_leaves_out_hypotheses_low_and_disputed(model: UserModel) -> None:
    kept = model.claim(ANA, "Plan, implement, verify", "workflow")["claim"]["id"]
    support(model, kept, 4)
    style = model.claim(ANA, "No vague praise", "communication")["claim"]["id"]
    support(model, style, 2)
    model.claim(ANA, "Maybe likes emoji", "style")  # a hypothesis
    low = model.claim(ANA, "Prefers dark mode", "technical")["claim"]["id"]
    support(model, low, 2)
    for i in range(2):
        model.add_evidence(ANA, low, "contradict", "statement", f"light mode today {i}")  # observed, but 0.5
    disputed = model.claim(ANA, "Dislikes tests", "values")["claim"]["id"]
    model.add_evidence(ANA, disputed, "contradict", "statement", "tests are essential")

    synthesis = model.synthesis(ANA)
    assert {d: [c["id"] for c in cs] for d, cs in synthesis["domains"].items()} == {
        "communication": [style],
        "workflow": [kept],
    }
    assert synthesis["left_out"] == 3
    assert [c["tier"] for c in synthesis["domains"]["workflow"]] == ["validated"]
    assert model.synthesis(ANA, vendors=["codex"])["domains"] == {}  # every claim here came from claude


def test_the_brief_shows_validated_claims_and_not_hypotheses(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    runtime = open_runtime(Settings(home=tmp_path / "home", embedder="none"), "cli")
    try:
        info = SessionInfo("ana-1", "claude", "stdio", str(repo), str(repo), 1, user="ana")
        runtime.sessions.open(info)
        ana = info.provenance()
        model = UserModel(runtime.store)
        validated = model.claim(ana, "Wants the diff before the explanation", "communication")["claim"]["id"]
        support(model, validated, 4, prov=ana)
        model.claim(ana, "Might prefer Spanish replies", "communication", statement="gracias")
        text = render_brief(runtime, ana).text
        assert "Wants the diff before the explanation" in text and validated in text
        assert "Might prefer Spanish replies" not in text
        bob = SessionInfo("bob-1", "claude", "stdio", str(repo), str(repo), 1, user="bob")
        runtime.sessions.open(bob)
        assert "Wants the diff" not in render_brief(runtime, bob.provenance()).text
    finally:
        runtime.close()
