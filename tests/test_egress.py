"""The egress policy (THREADLOOM_EGRESS: all, same-vendor, none) on every path that hands personal memory to
a model, read by sessions of each vendor: the brief (full and query scope), memory_recall (quotes), and the
user-model tools; the one withheld line exactly when something was held back; a second user sees none of the
first's claims or quotes under any policy. A real SQLite store, a real git repository, the real services."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from threadloom.brief import render_brief
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.usermodel import UserModel
from threadloom.usermodel.egress import allows, company, withheld_line

POLICIES = ("all", "same-vendor", "none")
READERS = ("claude", "codex", "gemini")
# Personal memory recorded in each vendor's sessions: a validated claim and a quote, each with a word of its own.
CLAIM = {"claude": "prefers rebasing feature branches", "codex": "prefers squashing feature branches"}
QUOTE = {"claude": "keep the rollback plan short", "codex": "keep the rollback plan written"}
WORK = "the rollback plan lives in docs/ops.md"  # work memory: always goes


@dataclass
class World:
    runtime: Runtime
    repo: Path
    users: dict[str, Provenance]  # "<user>/<vendor>": a session

    def reader(self, vendor: str, user: str = "ana") -> Provenance:
        return self.users[f"{user}/{vendor}"]


def join(runtime: Runtime, repo: Path, user: str, vendor: str) -> Provenance:
    info = SessionInfo(
        id=f"{user}-{vendor}", vendor=vendor, transport="stdio", project=str(repo), cwd=str(repo), pid=1, user=user
    )
    runtime.sessions.open(info)
    return info.provenance()


def validated(model: UserModel, prov: Provenance, text: str) -> str:
    claim_id = str(model.claim(prov, text, "workflow", statement=f"I said: {text}")["claim"]["id"])
    for n in range(3):
        model.add_evidence(prov, claim_id, "support", "statement", f"again ({n}): {text}")
    assert model.review(prov, claim_id)["claim"]["tier"] == "validated"
    return claim_id


def settings(home: Path, policy: str) -> Settings:
    return Settings(home=home, embedder="none", egress=policy)  # type: ignore[arg-type]


def build(tmp: Path, policy: str) -> World:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    runtime = open_runtime(settings(tmp / "home", policy), "cli")
    users = {f"{u}/{v}": join(runtime, repo, u, v) for u in ("ana", "bob") for v in READERS}
    ana = users["ana/claude"]
    runtime.threads.create_project(ana, "Shop")
    model = UserModel(runtime.store)  # writes are not gated: the policy is about what leaves
    for vendor in CLAIM:
        validated(model, users[f"ana/{vendor}"], CLAIM[vendor])
        runtime.notes.add_quote(users[f"ana/{vendor}"], QUOTE[vendor], project_wide=True)
    runtime.memory.store(NewMemory(content=WORK, visibility="project"), ana)
    return World(runtime, repo, users)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, World]:
    """Each policy's world, built once for the module (its runtime closed): a test works on a copy of its home."""
    worlds: dict[str, World] = {}
    for policy in POLICIES:
        worlds[policy] = build(tmp_path_factory.mktemp(f"egress-{policy}"), policy)
        worlds[policy].runtime.close()
    return worlds


@pytest.fixture(params=POLICIES)
def world(request: pytest.FixtureRequest, built: dict[str, World], tmp_path: Path) -> Iterator[World]:
    """A fresh copy of the policy's world for one test: the same store, sessions and repository as `build` makes."""
    made = built[request.param]
    # Not the shared-memory index: SQLite rebuilds it from the log the copy carries.
    home = shutil.copytree(made.runtime.settings.home, tmp_path / "home", ignore=shutil.ignore_patterns("*-shm"))
    runtime = open_runtime(settings(home, request.param), "cli")
    yield World(runtime, made.repo, made.users)
    runtime.close()


def expected(policy: str, reader: str) -> set[str]:
    """The vendors whose personal memory reaches `reader` under `policy`, written out (not computed by the
    code under test): all to every reader, none to none, same-vendor only a maker's own."""
    if policy == "all":
        return {"claude", "codex"}
    if policy == "none":
        return set()
    return {"claude": {"claude"}, "codex": {"codex"}, "gemini": set()}[reader]


@pytest.mark.parametrize("reader", READERS)
def test_the_full_brief_carries_exactly_the_claims_the_policy_allows_and_one_line_for_the_rest(
    world: World, reader: str
) -> None:
    policy = world.runtime.settings.egress
    text = render_brief(world.runtime, world.reader(reader), budget=4000).text
    allowed = expected(policy, reader)
    for vendor, claim in CLAIM.items():
        assert (claim in text) == (vendor in allowed), (policy, reader, vendor)
    withheld = [line for line in text.splitlines() if line.startswith("egress policy=")]
    held = len(CLAIM) - len(allowed)
    if held:
        assert withheld == [withheld_line(policy, reader, {"claims": held})]
        assert f"withheld from {company(reader)}" in withheld[0]
    else:
        assert withheld == []


@pytest.mark.parametrize("reader", READERS)
def test_the_query_brief_shows_claims_relevant_to_the_query_as_the_policy_allows(world: World, reader: str) -> None:
    policy = world.runtime.settings.egress
    prov = world.reader(reader)
    text = render_brief(world.runtime, prov, scope="query", query="how should I merge feature branches?").text
    allowed = expected(policy, reader)
    for vendor, claim in CLAIM.items():
        assert (claim in text) == (vendor in allowed), (policy, reader, vendor)
    # A query no claim bears on shows none, and says nothing was withheld (nothing would have been shown).
    other = render_brief(world.runtime, prov, scope="query", query="postgres connection pool size").text
    assert not any(claim in other for claim in CLAIM.values())
    assert "egress policy=" not in other


@pytest.mark.parametrize("reader", READERS)
def test_recall_returns_quotes_as_the_policy_allows_and_work_memory_always(world: World, reader: str) -> None:
    policy = world.runtime.settings.egress
    found = world.runtime.recall.recall("rollback plan", world.reader(reader), 10, "concise", read_only=True)
    texts = " ".join(str(hit.get("text") or hit.get("summary") or "") for hit in found["memories"])
    allowed = expected(policy, reader)
    for vendor, quote in QUOTE.items():
        assert (quote in texts) == (vendor in allowed), (policy, reader, vendor)
    assert "docs/ops.md" in texts
    held = len(QUOTE) - len(allowed)
    lines = [c for c in found["caveats"] if c.startswith("egress policy=")]
    assert lines == ([withheld_line(policy, reader, {"quotes": held})] if held else [])
    assert found.get("withheld", {}) == ({"quotes": held} if held else {})


@pytest.mark.parametrize("reader", READERS)
def test_the_user_model_tools_apply_the_policy_too(world: World, reader: str) -> None:
    policy = world.runtime.settings.egress
    prov = world.reader(reader)
    model = UserModel(world.runtime.store, egress=policy)
    allowed = expected(policy, reader)
    shown = {line["text"] for lines in model.synthesis(prov)["domains"].values() for line in lines}
    assert shown == {CLAIM[v] for v in allowed}
    listed = {line["text"] for line in model.claims(prov)["claims"]}
    assert listed == {CLAIM[v] for v in allowed}
    assert ("withheld" in model.synthesis(prov)) == (len(allowed) < len(CLAIM))
    for claim in model.claims(world.reader("claude"))["claims"] if policy == "all" else []:
        assert claim["text"] in CLAIM.values()
    # One claim by id: a withheld one says so, without its text, its evidence or its statements.
    every = UserModel(world.runtime.store).claims(prov)["claims"]
    for line in every:
        seen = model.review(prov, line["id"])
        vendor = next(v for v, text in CLAIM.items() if text == line["text"])
        if vendor in allowed:
            assert seen["claim"]["text"] == CLAIM[vendor] and seen["evidence"]
        else:
            assert CLAIM[vendor] not in str(seen) and "withheld" in seen and "evidence" not in seen


def test_the_statements_of_another_vendor_on_an_allowed_claim_are_withheld(tmp_path: Path) -> None:
    made = build(tmp_path, "same-vendor")
    try:
        claude, codex = made.reader("claude"), made.reader("codex")
        model = UserModel(made.runtime.store, egress="same-vendor")
        claim_id = next(c["id"] for c in model.claims(claude)["claims"] if c["text"] == CLAIM["claude"])
        model.add_evidence(codex, claim_id, "support", "statement", "told codex: rebase, always")
        answer = model.add_evidence(codex, claim_id, "support", "statement", "told codex again: rebase")
        assert answer["claim"]["text"] != CLAIM["claude"] and "withheld" in answer  # a write names no text either
        seen = model.review(claude, claim_id)
        refs = [e["ref"] for e in seen["evidence"]]
        assert "told codex: rebase, always" not in refs and refs.count("[withheld by the egress policy]") == 2
        assert "2 statements" in seen["withheld"]
    finally:
        made.runtime.close()


@pytest.mark.parametrize("reader", READERS)
def test_a_second_user_sees_none_of_the_first_users_claims_or_quotes(world: World, reader: str) -> None:
    bob = world.reader(reader, "bob")
    text = render_brief(world.runtime, bob, budget=4000).text
    query = render_brief(world.runtime, bob, scope="query", query="merge feature branches rollback plan").text
    found = world.runtime.recall.recall("rollback plan", bob, 10, "concise", read_only=True)
    model = UserModel(world.runtime.store, egress=world.runtime.settings.egress)
    for said in (*CLAIM.values(), *QUOTE.values()):
        assert said not in text and said not in query and said not in str(found)
    assert model.claims(bob)["claims"] == [] and model.synthesis(bob)["domains"] == {}
    # Nothing of ana's was withheld from bob: there was nothing of his to withhold.
    assert "egress policy=" not in text + query + str(found["caveats"])


def test_the_vendor_table() -> None:
    assert allows("all", "other", "codex") and not allows("none", "claude", "claude")
    assert allows("same-vendor", "claude", "claude") and not allows("same-vendor", "claude", "codex")
    assert not allows("same-vendor", "other", "other")  # an unknown maker never matches, not even itself
    assert withheld_line("none", "codex", {"claims": 0}) is None


def test_claims_and_style_held_back_together_are_said_in_one_line(tmp_path: Path) -> None:
    from threadloom.style import StyleMemory

    made = build(tmp_path, "same-vendor")
    try:
        claude, codex = made.reader("claude"), made.reader("codex")
        second = join(made.runtime, made.repo, "ana", "copilot")  # a habit needs two sessions
        style = StyleMemory(made.runtime.store)
        habit = {"kind": "idiolect", "text": "tiny but mighty", "example": "tiny but mighty, ship it"}
        style.hint(codex, [habit], ["Conclusions first"])
        style.hint(replace(second, vendor="codex"), [habit])
        text = render_brief(made.runtime, claude, budget=4000).text
        lines = [line for line in text.splitlines() if "withheld" in line]
        assert lines == [withheld_line("same-vendor", "claude", {"claims": 1, "profile preferences": 1,
                                                                  "style habits": 1})], text  # fmt: skip
        assert "tiny but mighty" not in text and CLAIM["codex"] not in text and CLAIM["claude"] in text
        shown = render_brief(made.runtime, codex, budget=4000).text
        assert "tiny but mighty" in shown and CLAIM["codex"] in shown
        assert [line for line in shown.splitlines() if "withheld" in line] == [
            withheld_line("same-vendor", "codex", {"claims": 1})
        ]
    finally:
        made.runtime.close()


@pytest.mark.parametrize("reader", READERS)
def test_the_day_summary_lists_quotes_as_the_policy_allows(world: World, reader: str) -> None:
    from threadloom.dialog.day import DaySummary

    policy = world.runtime.settings.egress
    day = DaySummary(world.runtime.store, policy).summary(world.reader(reader), budget=4000)
    allowed = expected(policy, reader)
    for vendor, quote in QUOTE.items():
        assert (quote in day["text"]) == (vendor in allowed), (policy, reader, vendor)
    held = len(QUOTE) - len(allowed)
    lines = [c for c in day["caveats"] if c.startswith("egress policy=")]
    assert lines == ([withheld_line(policy, reader, {"quotes": held})] if held else [])
    assert not any(q in DaySummary(world.runtime.store, policy).summary(world.reader(reader, "bob"))["text"]
                   for q in QUOTE.values())  # fmt: skip


def test_the_query_scope_finds_claims_by_word_start_and_in_chinese(tmp_path: Path) -> None:
    made = build(tmp_path, "all")
    try:
        claude = made.reader("claude")
        validated(UserModel(made.runtime.store), claude, "喜欢先写测试再写代码")
        chinese = render_brief(made.runtime, claude, scope="query", query="这个功能的测试怎么写").text
        stems = render_brief(made.runtime, made.reader("codex"), scope="query", query="rebase the branch?").text
        nothing = render_brief(made.runtime, made.reader("gemini"), scope="query", query="?? a").text
    finally:
        made.runtime.close()
    assert "喜欢先写测试再写代码" in chinese and CLAIM["claude"] not in chinese
    assert CLAIM["claude"] in stems and CLAIM["codex"] in stems  # "rebase" meets "rebasing", "branch" "branches"
    assert stems.index(CLAIM["claude"]) < stems.index(CLAIM["codex"])  # two words shared before one
    assert not any(claim in nothing for claim in CLAIM.values())


def test_a_huge_query_is_cut_to_a_few_words() -> None:
    from threadloom.brief.slots.user_model import MAX_WORDS, words

    assert len(words("测试" * 1000)) <= MAX_WORDS and len(words(" ".join(f"word{i}" for i in range(500)))) <= MAX_WORDS
    assert words("Rebasing branches, 测试") == ["rebas", "branc", "测试"]
    assert words("") == [] and words("a an the ??") == []
