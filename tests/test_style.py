"""Style memory on a real SQLite store: the gate, revisions (capsule / ack / delta), the capsule's language,
refusals that store nothing, another user, pin / forget / pause, the TTLs, sanitised examples, the egress
policy, and the brief's slot."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.test_style_gate import add_message
from threadloom.brief import render_brief
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.runtime import open_runtime
from threadloom.sessions import SessionInfo
from threadloom.store.sqlite import SqliteStore
from threadloom.style import Learner, StyleMemory
from threadloom.style.dictionary import extract
from threadloom.style.model import DAY_MS, EXAMPLE_CHARS

ANA_1 = Provenance(session_id="a1", vendor="claude", project="/repo", user="ana")
ANA_2 = Provenance(session_id="a2", vendor="claude", project="/repo", user="ana")
BEN = Provenance(session_id="b1", vendor="claude", project="/repo", user="ben")
TABLES = ("style_habits", "style_observations", "style_profile", "style_revisions")
IDIOLECT = {"kind": "idiolect", "text": "tiny but mighty", "example": "tiny but mighty, ship it"}


@pytest.fixture
def store(backend: Backend) -> Iterator[SqliteStore]:
    s = backend.open()  # SQLite and PostgreSQL (tests/conftest.py)
    yield s
    s.close()


def rows_in(store: SqliteStore) -> tuple[int, ...]:
    return tuple(int(store.read(lambda r, t=t: r.scalar(f"SELECT count(*) FROM {t}"))) for t in TABLES)


def test_the_dictionary_sees_english_spanish_and_chinese_habits() -> None:
    def seen(text: str) -> set[tuple[str, str]]:
        return {(h.kind, h.text) for h in extract(text)}

    assert {("catchphrase", "ship it"), ("catchphrase", "lgtm"), ("emoji", "✨")} <= seen("LGTM, ship it ✨")
    assert {("catchphrase", "vale"), ("dialect", "órale"), ("punctuation", "¿¡")} <= seen("Vale, órale ¿listo?")
    assert {("catchphrase", "哈哈"), ("dialect", "巴适"), ("emoticon", "orz")} <= seen("哈哈 巴适 orz")
    assert {("emoticon", ":)"), ("punctuation", "!!")} <= seen("done :) thanks!!")
    assert seen("see http://x.io/a:/b and C:Program 10:30") == set()  # no emoticons inside links or times


def test_a_habit_activates_after_two_sightings_in_two_sessions_only(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    first = memory.hint(ANA_1, [IDIOLECT])
    assert first["observed"][0]["status"] == "candidate"
    again = memory.hint(ANA_1, [IDIOLECT])  # the same session: counted once, never enough
    assert again["observed"][0]["status"].startswith("not counted")
    assert memory.view(ANA_1, None, "all")["habits"] == []
    assert memory.hint(ANA_2, [IDIOLECT])["observed"][0]["status"] == "active"
    capsule = memory.view(ANA_1, None, "all")
    assert [h["text"] for h in capsule["habits"]] == ["tiny but mighty"]
    assert '"tiny but mighty"' in capsule["text"] and "tiny but mighty, ship it" in capsule["text"]


def test_a_hint_and_the_transcript_of_one_conversation_do_not_pass_the_gate_together(store: SqliteStore) -> None:
    memory, at = StyleMemory(store), now_ms() - 1000
    memory.hint(ANA_1, [{"kind": "catchphrase", "text": "ship it"}])  # the host saw it in this conversation
    add_message(store, "ana", "claude-code", "c1", "k1", "ok ship it", at)  # and its transcript has it too
    Learner(store).run("test")
    (habit,) = memory.habits(ANA_1, "all")["habits"]
    assert habit["sessions"] == 2 and habit["status"] == "candidate"  # two keys, one conversation
    add_message(store, "ana", "claude-code", "c2", "k2", "ship it again", at + 1)  # a second conversation
    Learner(store).run("test")
    assert memory.habits(ANA_1, "all")["habits"][0]["status"] == "active"


def test_the_conversations_of_spawned_agents_teach_nothing(store: SqliteStore) -> None:
    detail = '{"client_session": "child-1", "spawned_by": "parent-1"}'
    store.write(
        lambda w: w.execute(
            "INSERT INTO events (at, kind, session_id, vendor, origin, detail) "
            "VALUES (:at, 'client.session_started', NULL, 'claude', 'hook', :d)",
            {"at": now_ms(), "d": detail},
        )
    )
    at = now_ms() - 1000
    for i, session in enumerate(("child-1", "child-1", "own-1")):
        add_message(store, "ana", "claude-code", session, f"k{i}", "lgtm, ship it", at + i)
    report = Learner(store).run("test")
    assert report.messages == 3 and report.observations == 2  # lgtm and ship it, in the own session only
    assert {h["sessions"] for h in StyleMemory(store).habits(ANA_1, "all")["habits"]} == {1}


def test_the_revision_moves_with_the_content_only_and_answers_ack_or_delta(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    memory.hint(ANA_1, [IDIOLECT])
    assert memory.view(ANA_1, None, "all")["revision"] == 0  # a candidate is not content
    memory.hint(ANA_2, [IDIOLECT])
    first = memory.view(ANA_1, None, "all")
    revisions = {memory.view(ANA_1, None, "all")["revision"] for _ in range(100)}
    assert revisions == {first["revision"]} == {1}
    assert memory.view(ANA_1, 1, "all")["mode"] == "ack"
    memory.hint(ANA_2, [IDIOLECT])  # seen again: same content, same revision
    assert memory.view(ANA_1, 1, "all")["mode"] == "ack"
    memory.manage(ANA_1, "profile_set", "Conclusions first, please")
    delta = memory.view(ANA_1, 1, "all")
    assert delta["mode"] == "delta" and delta["revision"] == 2 and delta["from"] == 1
    assert delta["added"] == ["Lead with the conclusion, then the details."] and delta["removed"] == []
    assert memory.view(ANA_1, 999, "all")["mode"] == "capsule"  # a revision it never had: the whole capsule


@pytest.mark.parametrize(
    ("messages", "language", "phrase"),
    [
        (["Please plan first, then implement. lgtm", "lgtm, the build is green and it works"], "en", "How they write"),
        (["Vale, primero el plan y luego lo implementas", "vale, está bien, gracias por todo"], "es", "Cómo escribe"),
        (["好的，先做计划再实现，哈哈", "哈哈，这个方案可以，谢谢"], "zh", "说话习惯"),
    ],
)
def test_the_capsule_is_in_the_language_the_user_writes_in(
    store: SqliteStore, messages: list[str], language: str, phrase: str
) -> None:
    at = now_ms() - 60_000
    for i, text in enumerate(messages):
        add_message(store, "ana", "claude-code", f"s{i}", f"k{i}", text, at + i)
        add_message(
            store, "ana", "claude-code", f"s{i}", f"r{i}", "Sure! Here is the plan in English.", at, "assistant"
        )
    Learner(store).run("test")
    capsule = StyleMemory(store).view(ANA_1, None, "all")
    assert capsule["language"] == language and phrase in capsule["text"]
    assert capsule["habits"], capsule  # a habit shown in both sessions
    plan = {"en": "plan, then implement", "es": "planificar, implementar", "zh": "先计划，再实现"}[language]
    assert plan in capsule["text"]


@pytest.mark.parametrize(
    ("hint", "profile", "error"),
    [
        ({"kind": "idiolect", "text": "my name is Ana"}, [], "a name"),
        ({"kind": "idiolect", "text": "ok", "example": "ok, I live at 12 Baker Street"}, [], "an address"),
        ({"kind": "catchphrase", "text": "ya sabes", "example": "me llamo Ana, ya sabes"}, [], "a name"),
        ({"kind": "catchphrase", "text": "ok"}, ["The user was diagnosed with ADHD"], "health or a diagnosis"),
        ({"kind": "catchphrase", "text": "ok"}, ["Is an introvert, keep it short"], "a personality label"),
        ({"kind": "catchphrase", "text": "ok"}, ["用户有抑郁症"], "health or a diagnosis"),
        ({"kind": "catchphrase", "text": "ok", "example": "mail me at ana@example.com"}, [], "an email address"),
        ({"kind": "idiolect", "text": "x" * 1_000_000}, [], "at most 40 characters"),
        ({"kind": "idiolect", "text": "ok", "example": "y" * 1_000_000}, [], "at most 200 characters"),
        ({"kind": "personality", "text": "grumpy"}, [], "hint kind is one of"),
        ({"kind": "idiolect", "text": "   "}, [], "empty"),
    ],
)
def test_refused_hints_are_clear_errors_and_store_nothing(
    store: SqliteStore, hint: dict[str, str], profile: list[str], error: str
) -> None:
    memory = StyleMemory(store)
    memory.hint(ANA_1, [{"kind": "catchphrase", "text": "lgtm"}])
    before = rows_in(store)
    with pytest.raises(InvalidInput) as caught:
        memory.hint(ANA_2, [{"kind": "catchphrase", "text": "lgtm"}, hint], profile)
    assert error in caught.value.message
    assert rows_in(store) == before
    with pytest.raises(InvalidInput, match="a name"):
        memory.manage(ANA_1, "profile_set", "My name is Ana and I like plans")
    assert rows_in(store) == before


def test_another_user_sees_and_changes_nothing(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    memory.hint(ANA_1, [IDIOLECT], ["No vague praise"])
    memory.hint(ANA_2, [IDIOLECT])
    hid = memory.view(ANA_1, None, "all")["habits"][0]["id"]
    before = rows_in(store)
    for action in ("pin", "unpin", "forget"):
        with pytest.raises(NotFound) as caught:
            memory.manage(BEN, action, hid)
        assert caught.value.message == f"no habit {hid} of yours"
    with pytest.raises(NotFound, match="of yours"):
        memory.manage(BEN, "profile_clear", "sp_" + "0" * 16)
    ben = memory.view(BEN, None, "all")
    assert ben["revision"] == 0 and ben["habits"] == [] and ben["profile"] == []
    assert memory.habits(BEN, "all")["habits"] == []
    assert rows_in(store) == before
    memory.manage(BEN, "pause")  # ben's own switch leaves ana learning
    assert memory.hint(ANA_1, [{"kind": "catchphrase", "text": "lgtm"}])["learning"] is True


def test_pin_forget_and_pause(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    made = memory.hint(ANA_1, [{"kind": "catchphrase", "text": "cool cool"}])
    assert made["observed"][0]["status"] == "candidate"
    hid = memory.habits(ANA_1, "all")["habits"][0]["id"]
    memory.manage(ANA_1, "pin", hid)  # the user's own choice: active at once
    assert [h["id"] for h in memory.view(ANA_1, None, "all")["habits"]] == [hid]
    memory.manage(ANA_1, "forget", hid)
    assert memory.habits(ANA_1, "all")["habits"] == [] and memory.view(ANA_1, None, "all")["habits"] == []
    assert store.read(lambda r: r.scalar("SELECT count(*) FROM style_observations")) == 0
    again = memory.hint(ANA_2, [{"kind": "catchphrase", "text": "cool cool"}])  # not learned back
    assert again["observed"][0]["status"].startswith("not counted") and memory.habits(ANA_1, "all")["habits"] == []
    with pytest.raises(NotFound):
        memory.manage(ANA_1, "pin", hid)
    memory.manage(ANA_1, "pause")
    paused = memory.hint(ANA_1, [IDIOLECT])
    assert paused["learning"] is False and paused["observed"] == []
    add_message(store, "ana", "codex", "x", "k1", "lgtm lgtm", now_ms())
    Learner(store).run("test")  # skipped while paused, and not learned later either
    memory.manage(ANA_1, "resume")
    assert memory.habits(ANA_1, "all")["habits"] == [] and memory.view(ANA_1, None, "all")["learning"] is True


def test_candidates_expire_idle_habits_archive_and_pinned_ones_stay(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    old = now_ms() - 200 * DAY_MS
    for i, text in enumerate(["lgtm", "lgtm", "tbh", "ship it", "ship it"]):
        add_message(store, "ana", "claude-code", f"s{i}", f"k{i}", text, old + i)
    add_message(store, "ana", "claude-code", "s9", "k9", "ok, hmm", now_ms())
    Learner(store).run("test")
    habits = {h["text"]: h for h in memory.habits(ANA_1, "all")["habits"]}
    assert "tbh" not in habits  # a candidate unseen for 30 days
    assert habits["lgtm"]["status"] == "archived" and habits["ship it"]["status"] == "archived"
    memory.manage(ANA_1, "pin", habits["ship it"]["id"])
    memory.manage(ANA_1, "resume")  # any write runs the cleanup again
    after = {h["text"]: h for h in memory.habits(ANA_1, "all")["habits"]}
    assert after["ship it"]["status"] == "active" and after["ship it"]["pinned"] is True


def test_a_daily_sweep_archives_habits_the_user_stopped_showing_without_new_messages(store: SqliteStore) -> None:
    memory, learner = StyleMemory(store), Learner(store)
    memory.hint(ANA_1, [IDIOLECT])
    memory.hint(ANA_2, [IDIOLECT])
    before = memory.view(ANA_1, None, "all")["revision"]
    assert learner.run("test").swept == 0  # swept just now (the first pass of the day), nothing to archive
    later = now_ms() + 181 * DAY_MS
    assert learner.sweep(later) == 1 and learner.sweep(later + 1000) == 0  # once a day
    assert memory.habits(ANA_1, "all")["habits"][0]["status"] == "archived"
    assert memory.view(ANA_1, None, "all")["revision"] == before + 1


def test_examples_are_short_and_carry_no_names_emails_paths_or_secrets(store: SqliteStore) -> None:
    text = (
        "so I told Maria about /home/ana/secret/plan.txt and mail ana@corp.example with token "
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789 anyway lol, ship it"
    )
    for i in range(2):
        add_message(store, "ana", "claude-code", f"s{i}", f"k{i}", text, now_ms() - 10 + i)
    Learner(store).run("test")
    examples = [h["example"] for h in StyleMemory(store).habits(ANA_1, "all")["habits"]]
    assert examples and all(e is None or len(e) <= EXAMPLE_CHARS for e in examples)
    joined = " ".join(e or "" for e in examples)
    for leaked in ("Maria", "/home/ana", "ana@corp", "ghp_", "plan.txt"):
        assert leaked not in joined
    assert "ship it" in joined


def test_egress_same_vendor_withholds_what_another_company_recorded(store: SqliteStore) -> None:
    memory = StyleMemory(store)
    codex = [Provenance(session_id=f"c{i}", vendor="codex", project="/repo", user="ana") for i in range(2)]
    for prov in codex:
        memory.hint(prov, [IDIOLECT])
    memory.hint(ANA_1, [], ["Plan first, then implement and verify"])
    claude = memory.view(ANA_1, None, "same-vendor")
    assert claude["habits"] == [] and len(claude["profile"]) == 1
    assert "1 style habits" in claude["withheld"] and "anthropic" in claude["withheld"]
    assert [h["text"] for h in memory.view(codex[0], None, "same-vendor")["habits"]] == ["tiny but mighty"]
    nothing = memory.view(ANA_1, None, "none")
    assert nothing["habits"] == [] and nothing["profile"] == [] and "2 " not in nothing["withheld"]
    assert memory.habits(ANA_1, "none")["habits"] == []


def test_the_brief_shows_the_capsule_through_the_egress_policy(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for policy in ("all", "same-vendor"):
        runtime = open_runtime(Settings(home=tmp_path / "home", embedder="none", egress=policy), "cli")
        try:
            info = SessionInfo(f"ana-{policy}", "codex", "stdio", str(repo), str(repo), 1, user="ana")
            runtime.sessions.open(info)
            memory = StyleMemory(runtime.store)
            memory.hint(ANA_1, [IDIOLECT], ["Conclusions first"])
            memory.hint(ANA_2, [IDIOLECT])
            text = render_brief(runtime, info.provenance()).text
            if policy == "all":
                assert "tiny but mighty" in text and "Lead with the conclusion" in text
            else:
                assert "tiny but mighty" not in text and "Lead with the conclusion" not in text
                assert "withheld from openai (1 profile preferences, 1 style habits)" in text
            bob = SessionInfo(f"bob-{policy}", "claude", "stdio", str(repo), str(repo), 1, user="bob")
            runtime.sessions.open(bob)
            assert "tiny but mighty" not in render_brief(runtime, bob.provenance()).text
        finally:
            runtime.close()
