"""The observation miner on a real SQLite store: the labelled multilingual fixture, the cursor (a re-run adds
nothing, a late backfill is read once), contradictions, what is never read (assistant turns, spawned children,
pasted code, another user's messages), memories, refusals, secrets, a dry run, two processes at once, and the
settings that keep it off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Backend
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.store import transcripts
from threadloom.store.base import Writer
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.store.transcripts import StoredMessage
from threadloom.usermodel import UserModel
from threadloom.usermodel.miner import Miner, last_run
from threadloom.usermodel.patterns import claim_text, normalise

FIXTURE = Path(__file__).parent / "data" / "usermodel_mining.jsonl"
ANA = Provenance(session_id="s1", vendor="claude", project="/repo", user="ana")


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def add_messages(
    store: SqliteStore, owner: str, turns: list[tuple[str, str]], session: str = "sess-1", source: str = "claude-code"
) -> list[int]:
    """Ingested messages (role, text) as the ingest service stores them; their row ids."""
    ids: list[int] = []

    def write(w: Writer) -> None:
        base = int(w.scalar("SELECT count(*) FROM transcript_messages"))
        for n, (role, text) in enumerate(turns):
            m = StoredMessage(source, session, f"{session}:{base + n}", role, text, "[]", 1_000 + n, None, None,
                              None, "t", "", n)  # fmt: skip
            written = transcripts.upsert_message(w, owner, m, False, 1)
            assert written is not None
            ids.append(written[0])

    store.write(write)
    return ids


def claims(store: SqliteStore, user: str = "ana") -> dict[str, dict[str, Any]]:
    """The user's current claims by text, each with its evidence (kind, source, ref, origin)."""
    out: dict[str, dict[str, Any]] = {}
    for row in store.read(lambda r: r.rows("SELECT * FROM user_claims WHERE owner = :u", {"u": user})):
        evidence = store.read(
            lambda r, c=row["id"]: r.tuples(
                "SELECT kind, source, ref, origin FROM user_evidence WHERE claim_id = :c ORDER BY id", {"c": c}
            )
        )
        out[row["text"]] = dict(row) | {"evidence": [tuple(e) for e in evidence]}
    return out


def table_counts(store: SqliteStore) -> tuple[int, int, int]:
    return tuple(  # type: ignore[return-value]
        int(store.read(lambda r, t=t: r.scalar(f"SELECT count(*) FROM {t}")))
        for t in ("user_claims", "user_evidence", "user_claim_tiers")
    )


def labelled() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fixture_mined_through_the_store(store: SqliteStore) -> None:
    """Every labelled message as an ingested user turn; each statement the fixture expects is a claim citing
    its message, and precision and recall over the whole fixture stay high (bench/usermodel.py prints them)."""
    cases = labelled()
    ids = add_messages(store, "ana", [("user", c["text"]) for c in cases])
    report = Miner(store, "ana").run()
    assert report.messages == len(cases) and not report.busy
    found = claims(store)
    by_ref: dict[str, set[str]] = {}
    for text, claim in found.items():
        for kind, source, ref, origin in claim["evidence"]:
            assert source == "message" and origin == "automated"
            by_ref.setdefault(ref, set()).add(f"{kind}:{normalise(text)}")
    tp = fp = fn = 0
    hit_langs: set[str] = set()
    for case, mid in zip(cases, ids, strict=True):
        expected = set()
        for stance, obj in case["expect"]:
            if stance.endswith("-"):  # a retraction: contradicts a claim (none here), proposes nothing
                continue
            expected.add(f"support:{normalise(claim_text(stance, case['lang'], obj))}")
        got = by_ref.get(str(mid), set())
        tp, fp, fn = tp + len(expected & got), fp + len(got - expected), fn + len(expected - got)
        if expected & got:
            hit_langs.add(case["lang"])
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    assert precision >= 0.9 and recall >= 0.9, (precision, recall)
    assert {"en", "es", "zh", "pt", "fr", "de", "it"} <= hit_langs
    for text, claim in found.items():  # every proposal is a hypothesis at half weight: nothing settled by a loop
        assert claim["tier"] == "hypothesis" and claim["support"] == 0.5, text
    assert not any(w in t.casefold() for t in found for w in ("adhd", "introvert", "焦虑", "diagnos"))


def test_rerun_adds_nothing_and_a_late_backfill_is_read_once(store: SqliteStore) -> None:
    add_messages(store, "ana", [("user", "I prefer tabs over spaces."), ("assistant", "I always use spaces.")])
    first = Miner(store, "ana").run()
    assert (first.proposed, first.supported) == (1, 1)
    after_first = table_counts(store)
    again = Miner(store, "ana").run()
    assert (again.messages, again.statements, again.proposed, again.supported) == (0, 0, 0, 0)
    assert table_counts(store) == after_first
    # An older conversation ingested late (a backfill): its rows come after the cursor in ingest order.
    add_messages(store, "ana", [("user", "Honestly I prefer tabs over spaces.")], session="old-session")
    late = Miner(store, "ana").run()
    assert (late.messages, late.proposed, late.supported) == (1, 0, 1)
    assert Miner(store, "ana").run().messages == 0
    claim = claims(store)["Prefers: tabs over spaces"]
    assert len(claim["evidence"]) == 2 and claim["support"] == 1.0
    # the assistant's "I always use spaces" was never read as the user's
    assert "Always: use spaces" not in claims(store)
    run = last_run(store, "ana")
    assert run is not None and run["outcome"]["messages"] == 0  # the last pass, as status shows it


def test_contradiction_and_retraction_hit_the_existing_claim(store: SqliteStore) -> None:
    model = UserModel(store)
    made = model.claim(ANA, "Prefers tabs over spaces", "technical", statement="I like tabs")  # the user's own
    add_messages(store, "ana", [("user", "I don't prefer tabs over spaces anymore."),
                                ("user", "I really don't want tabs over spaces.")])  # fmt: skip
    report = Miner(store, "ana").run()
    assert report.contradicted == 2 and report.proposed == 1  # "Does not want: …" is proposed beside it
    evidence = claims(store)["Prefers tabs over spaces"]["evidence"]
    assert [e[0] for e in evidence] == ["support", "contradict", "contradict"]
    review = model.review(ANA, made["claim"]["id"])
    assert review["claim"]["contradict"] == 1.0  # two automated pieces count half each


def test_what_is_never_read(store: SqliteStore) -> None:
    """A spawned child's conversation, pasted code and quotes, a client's injected wrapper, threadloom's own
    data fence, another user's messages, and sentences naming a diagnosis or identity."""

    def spawned(w: Writer) -> None:
        w.insert(
            "INSERT INTO events (at, kind, session_id, vendor, project, origin, detail) VALUES (1, "
            "'client.session_start', NULL, 'claude', NULL, 'hook', :d)",
            {"d": json.dumps({"client_session": "child-sess", "spawned_by": "parent-1"})},
        )

    store.write(spawned)
    add_messages(store, "ana", [("user", "I prefer short answers.")], session="child-sess")
    add_messages(store, "ana", [
        ("user", "```\nI always use global state\n```\n> I prefer the callback version\n    I never test"),
        ("user", "<system-reminder>I always obey the reminder</system-reminder>"),
        ("user", "⟪data⟫\n> Prefers: tabs\nI prefer what the brief says\n⟪/data⟫"),
        ("user", "I prefer short replies because of my ADHD."),
        ("user", "My name is Ana and I prefer vim."),
        ("tool", "I prefer JSON output"),
    ])  # fmt: skip
    add_messages(store, "ben", [("user", "I prefer emacs.")], session="ben-1")
    report = Miner(store, "ana").run()
    assert report.statements == 0 and table_counts(store) == (0, 0, 0)
    assert Miner(store, "ben").run().proposed == 1
    assert list(claims(store, "ben")) == ["Prefers: emacs"] and claims(store, "ana") == {}


def test_secrets_in_a_statement_are_scrubbed(store: SqliteStore) -> None:
    key = "ghp_" + "a1B2" * 9
    add_messages(store, "ana", [("user", f"I prefer the token {key} for the bot.")])  # stored verbatim (scrub off)
    Miner(store, "ana").run()
    texts = list(claims(store))
    assert texts and not any(key in t for t in texts) and any("[secret:" in t for t in texts)


def test_dry_run_writes_nothing(store: SqliteStore) -> None:
    add_messages(store, "ana", [("user", "I prefer tabs over spaces."), ("user", "Prefiero respuestas cortas.")])
    report = Miner(store, "ana").run(dry_run=True)
    assert report.proposed == 2 and [s["claim"] for s in report.samples] == [
        "Prefers: tabs over spaces",
        "Prefiere: respuestas cortas",
    ]
    assert table_counts(store) == (0, 0, 0) and last_run(store, "ana") is None
    assert Miner(store, "ana").run().proposed == 2  # the cursor did not move


@pytest.mark.slow
def test_memories_of_foreground_sessions_only(tmp_path: Path) -> None:
    runtime = open_runtime(Settings(home=tmp_path / "home", embedder="none"), "cli")
    try:
        fg = join(runtime, "fg-1", None)
        child = join(runtime, "child-1", "fg-1")
        runtime.memory.store(NewMemory("User prefers conclusions first, then details.", kind="preference"), fg)
        runtime.memory.store(NewMemory("User prefers YAML over JSON.", kind="preference"), child)
        report = Miner(runtime.store, "ana").run()
        assert report.memories == 1
        found = claims(runtime.store)  # type: ignore[arg-type]
        assert list(found) == ["Prefers: conclusions first"]
        assert found["Prefers: conclusions first"]["evidence"][0][1] == "memory"
        assert Miner(runtime.store, "ana").run().supported == 0  # the minute re-read adds nothing
        assert len(claims(runtime.store)["Prefers: conclusions first"]["evidence"]) == 1  # type: ignore[arg-type]
    finally:
        runtime.close()


def join(runtime: Runtime, sid: str, parent: str | None) -> Provenance:
    info = SessionInfo(sid, "claude", "stdio", None, None, 1, parent_id=parent, user="ana")
    runtime.sessions.open(info)
    return info.provenance()


MINE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from threadloom.store.sqlite import open_store
    from threadloom.usermodel.miner import Miner
    store = open_store(Path(sys.argv[1]), busy_timeout_ms=50, write_attempts=50)
    sys.stdin.readline()  # both start together
    report = Miner(store, "ana").run()
    print(json.dumps({"busy": report.busy, "proposed": report.proposed, "supported": report.supported}))
""")


@pytest.mark.slow
def test_two_processes_mining_at_once_double_nothing(tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    store = open_store(db)
    try:
        turns = [("user", f"I prefer option {i % 40} for job kind {i % 40}.") for i in range(400)]
        add_messages(store, "ana", turns)
    finally:
        store.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MINE, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    store = open_store(db)
    try:
        if any(r["busy"] for r in results):  # the loser found the lease held: a later pass finds nothing left
            assert Miner(store, "ana").run().statements == 0
        found = claims(store)
        assert len(found) == 40  # one claim per distinct statement, never two
        assert sum(len(c["evidence"]) for c in found.values()) == 400  # each message counted once
        assert sum(r["proposed"] for r in results) == 40
    finally:
        store.close()


def test_off_by_default() -> None:
    s = Settings()
    assert s.usermodel_mine is False and s.usermodel_validate is False


def test_one_message_is_at_most_a_few_observations(store: SqliteStore) -> None:
    """A list of fifty "I prefer …" lines, a tag soup and a megabyte of text: bounded work, bounded claims."""
    listing = "\n".join(f"I prefer option number {i}." for i in range(50))
    add_messages(store, "ana", [("user", listing), ("user", "<a " * 5000), ("user", "I prefer " + "x" * 1_000_000)])
    report = Miner(store, "ana").run()
    assert report.messages == 3 and report.proposed == 5 and len(claims(store)) == 5


def test_a_pass_that_dies_mid_batch_is_redone_without_doubles(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claims of a batch are written before its cursor: a crash between them re-reads the batch, which
    finds its claims by text and its evidence already counted."""
    add_messages(store, "ana", [("user", "I prefer tabs over spaces."), ("user", "Prefiero respuestas cortas.")])

    def crash(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("killed before the cursor was saved")

    with monkeypatch.context() as m:
        m.setattr(Miner, "_advance", crash)
        with pytest.raises(RuntimeError):
            Miner(store, "ana").run()
    assert len(claims(store)) == 2 and last_run(store, "ana") is None  # written, cursor not moved, no run
    redo = Miner(store, "ana").run()  # the lease was released on the way out: no wait
    assert (redo.messages, redo.proposed, redo.supported, redo.repeated) == (2, 0, 0, 2)
    assert len(claims(store)) == 2 and sum(len(c["evidence"]) for c in claims(store).values()) == 2


def test_a_backlog_is_read_in_capped_passes_without_a_gap(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threadloom.usermodel.miner.MAX_ROWS", 600)
    add_messages(
        store, "ana", [("user", f"I prefer option {i}.") if i % 10 == 0 else ("assistant", "ok") for i in range(1200)]
    )
    first = Miner(store, "ana").run()
    assert first.messages == 1000 and first.left_over  # two batches of 500, then the cap
    second = Miner(store, "ana").run()
    assert second.messages == 200 and not second.left_over
    assert first.proposed + second.proposed == 120 and len(claims(store)) == 120
