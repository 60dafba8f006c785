from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from threadloom.errors import InvalidInput, NotFound
from threadloom.guide import INSTRUCTIONS
from threadloom.identity import Provenance
from threadloom.search.engine import SearchEngine
from threadloom.store.sqlite import open_store
from threadloom.threads.agent_files import write_instruction_files
from threadloom.threads.files import ThreadFiles, parse, render
from threadloom.threads.model import Summary, Thread, check_thread_id, slugify
from threadloom.threads.service import ThreadService
from threadloom.threads.tree import Tree, assemble, estimate_tokens


def thread(tid: str, parent: str | None = None, summary: str = "", **kw: object) -> Thread:
    return Thread(
        id=tid, title=tid.title(), parent=parent, status="active", author="ana", created_at=1_000, updated_at=1_000,
        summary=Summary.parse(summary), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.mark.parametrize("bad", ["../etc", "a/b", "Auth", "-x", "x-", "", "a" * 65, "a_b", ".md", 5])
def test_thread_ids_can_never_name_another_path(bad: object) -> None:
    with pytest.raises(InvalidInput):
        check_thread_id(bad)


def test_ids_are_slugs_of_the_title_and_never_collide() -> None:
    assert slugify("Auth API (v2)!") == "auth-api-v2"
    assert slugify("Auth API v2", {"auth-api-v2"}) == "auth-api-v2-2"
    assert slugify("Auth API v2", {"auth-api-v2", "auth-api-v2-2"}) == "auth-api-v2-3"
    assert slugify("../../etc/passwd") == "etc-passwd" and slugify("???") == "thread"


def test_a_summary_keeps_its_sections_and_edits_one_at_a_time() -> None:
    s = Summary.parse("intro line\n## decisions\n- JWT\n## Next steps\n- tests\n## Risks\n- clock skew")
    assert s.sections == {"State": "intro line", "Decisions": "- JWT", "Next steps": "- tests", "Risks": "- clock skew"}
    s = s.with_section("Decisions", "- bcrypt", append=True).with_section("State", "done", append=False)
    assert s.sections["Decisions"] == "- JWT\n- bcrypt" and s.sections["State"] == "done"
    assert s.render().index("## Decisions") < s.render().index("## State") < s.render().index("## Risks")
    assert s.render(only=("Decisions",)) == "## Decisions\n- JWT\n- bcrypt"


def test_a_thread_file_round_trips_through_markdown_and_front_matter() -> None:
    t = thread("auth", "main", "## Decisions\n- JWT", branch="feature/auth", commit="3f2a9c1", paths=("src/auth",))
    text = render(t)
    assert text.startswith("---\nid: auth\ntitle: Auth\nparent: main\n") and "paths:\n- src/auth" in text
    assert parse(text, "auth") == t


def test_the_tree_is_rebuilt_from_the_files_and_broken_files_are_reported_not_fatal(tmp_path: Path) -> None:
    files = ThreadFiles(tmp_path, "app")
    with files.locked():
        for t in (thread("main"), thread("auth", "main"), thread("auth-ui", "auth"), thread("dashboard", "main")):
            files.write(t)
    (files.folder / "broken.md").write_text("---\nid: broken\ntitle: [unclosed\n---\n")
    (files.folder / "stranger.md").write_text(
        "---\nid: someone-else\ntitle: x\ncreated: 2026-01-01\nupdated: 2026-01-01\n---\n"
    )
    threads, problems = files.load()
    assert sorted(threads) == ["auth", "auth-ui", "dashboard", "main"]
    assert sorted(p.path for p in problems) == [
        ".threadloom/threads/app/broken.md",
        ".threadloom/threads/app/stranger.md",
    ]
    assert (tmp_path / ".threadloom/.gitignore").read_text().count("local/") == 1
    tree = Tree(threads)
    assert [t.id for t in tree.ancestors("auth-ui")] == ["auth", "main"]
    assert tree.render(active="auth-ui") == "main\n├── auth\n│   └── auth-ui  <- active\n└── dashboard"
    with pytest.raises(InvalidInput, match="cycle"):
        tree.check_move("auth", "auth-ui")
    with pytest.raises(NotFound):
        tree.get("nope")


def test_a_hand_made_cycle_stops_the_walk_instead_of_looping() -> None:
    tree = Tree({"a": thread("a", "b"), "b": thread("b", "a")})
    assert [t.id for t in tree.ancestors("a")] == ["b"]


def test_context_is_the_active_summary_plus_ancestor_decisions_and_constraints_only() -> None:
    tree = Tree(
        {
            "main": thread("main", None, "## Decisions\n- Next.js\n## State\n- main state stays out"),
            "auth": thread(
                "auth", "main", "## Decisions\n- JWT\n## Constraints\n- no cookies on api\n## Next steps\n- x"
            ),
            "auth-ui": thread("auth-ui", "auth", "## State\n- login form done\n## Next steps\n- logout"),
            "dashboard": thread("dashboard", "main", "## Decisions\n- charts with d3"),
        }
    )
    warn = ("2 commits changed src/auth",)
    ctx = assemble(tree, "auth-ui", "My App", "You build a shop.", warnings=warn)
    for wanted in ("You build a shop.", "- Next.js", "- JWT", "- no cookies on api", "- login form done", "- logout"):
        assert wanted in ctx.text
    for unwanted in ("main state stays out", "charts with d3", "- x\n"):
        assert unwanted not in ctx.text
    assert "_⚠ 2 commits changed src/auth_" in ctx.text
    assert ctx.threads == ("auth-ui", "auth", "main") and ctx.left_out == ()
    assert abs(ctx.tokens - estimate_tokens(ctx.text)) <= 2 and f"~{ctx.tokens} tokens, 3 thread(s)" in ctx.text
    tiny = assemble(tree, "auth-ui", "My App", max_tokens=1)
    assert tiny.left_out == ("main", "auth") and tiny.caveats


def test_a_budget_leaves_out_ancestors_then_the_active_threads_sections_keeping_its_decisions() -> None:
    why = "- Next.js, for its server components and the team's experience with it\n" * 5
    tree = Tree(
        {
            "main": thread("main", None, f"## Decisions\n{why}"),
            "auth": thread("auth", "main", "## Decisions\n- JWT"),
            "auth-ui": thread(
                "auth-ui",
                "auth",
                "## Decisions\n- zod forms\n## Constraints\n- no cookies\n## State\n"
                + "- login form done\n" * 20
                + "## Open questions\n"
                + "- which captcha?\n" * 20
                + "## Next steps\n- logout",
            ),
        }
    )
    whole = assemble(tree, "auth-ui", "My App", "You build a shop.")
    assert whole.caveats == () and whole.left_out == ()
    no_root = assemble(tree, "auth-ui", "My App", "You build a shop.", max_tokens=whole.tokens - 20)
    assert no_root.left_out == ("main",) and "- JWT" in no_root.text and "Next.js" not in no_root.text
    assert no_root.tokens <= whole.tokens - 20 and "ancestors main" in no_root.text
    small = assemble(tree, "auth-ui", "My App", "You build a shop.", max_tokens=120, folder=".threadloom/threads/app")
    assert small.tokens <= 120 and small.left_out == ("main", "auth")
    assert "which captcha" not in small.text and "- zod forms" in small.text and "- no cookies" in small.text
    assert "- logout" in small.text  # Open questions go first, then State, then Next steps
    assert any(
        "Open questions, State of auth-ui" in c and ".threadloom/threads/app/auth-ui.md" in c for c in small.caveats
    )
    assert "threadloom://thread/auth-ui" in small.text
    braces = assemble(tree, "auth", "My {App}", max_tokens=100)  # a title is not a format string
    assert "My {App}" in braces.text


def test_a_section_cannot_grow_past_its_limit_nor_smuggle_in_a_heading() -> None:
    s = Summary.parse("## State\n- a")
    with pytest.raises(InvalidInput, match="heading"):
        s.with_section("State", "- b\n## Decisions\n- c", append=True)
    with pytest.raises(InvalidInput, match="heading"):
        s.with_section("State", "- b\r## Decisions", append=True)
    with pytest.raises(InvalidInput, match="unknown section"):
        s.with_section("Risks", "- b", append=True)
    with pytest.raises(InvalidInput, match="unknown section"):
        Summary.parse("## Decisions\n- a\n## Risks\n- b", strict=True)
    assert Summary.parse("- a\u2028## Decisions").sections == {"State": "- a\u2028## Decisions"}
    full = s.with_section("State", "x" * 19_996, append=True)
    full.check("t")  # 20,000: the limit itself
    with pytest.raises(InvalidInput, match="State of t would be 20,002 characters"):
        full.with_section("State", "y", append=True).check("t")


def test_a_bom_and_windows_line_ends_read_as_the_same_thread() -> None:
    t = thread("auth", "main", "## Decisions\n- JWT")
    text = render(t)
    assert parse("\ufeff" + text, "auth") == t
    assert parse(text.replace("\n", "\r\n"), "auth") == t


def test_a_parent_cycle_is_found_named_and_drawn_not_dropped() -> None:
    tree = Tree({"main": thread("main"), "a": thread("a", "b"), "b": thread("b", "a"), "c": thread("c", "a")})
    assert tree.cycles() == [["a", "b"]]
    assert tree.render() == "main\na [parent cycle]\n├── b\n└── c"
    assert [t.id for t in tree.ancestors("c")] == ["a", "b"]


def _update_many(repo: str, db: str, n: int) -> None:
    store = open_store(Path(db))
    service = ThreadService(store, SearchEngine(store))
    prov = Provenance(session_id=f"p{n}", vendor="other", project=repo)
    service.create(prov, f"Worker {n}", parent="main")
    for i in range(10):
        service.update_summary(prov, f"- {n}.{i}", section="State", thread_id="main")
    store.close()


@pytest.mark.slow
def test_eight_processes_updating_one_project_lose_no_update_and_tear_no_file(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.db")
    ThreadService(store, SearchEngine(store)).create_project(
        Provenance(session_id="setup", vendor="other", project=str(tmp_path)), "App"
    )
    store.close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_update_many, args=(str(tmp_path), str(tmp_path / "t.db"), n)) for n in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(90)
    assert [p.exitcode for p in procs] == [0] * 8
    threads, problems = ThreadFiles(tmp_path, "app").load()
    assert problems == [] and sorted(threads) == ["main", *[f"worker-{n}" for n in range(8)]]
    lines = threads["main"].summary.sections["State"].splitlines()
    assert sorted(lines) == sorted(f"- {n}.{i}" for n in range(8) for i in range(10))
    assert not list((tmp_path / ".threadloom/threads/app").glob(".*.tmp"))


def test_instruction_files_keep_what_the_user_wrote_and_are_idempotent(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Our rules\n\nUse tabs.\n")
    first = write_instruction_files(tmp_path, [])
    assert [r["action"] for r in first] == ["updated", "created", "created"]
    agents = (tmp_path / "AGENTS.md").read_text()
    assert agents.startswith("# Our rules\n\nUse tabs.\n\n<!-- threadloom:begin") and INSTRUCTIONS.strip() in agents
    assert (tmp_path / ".cursor/rules/threadloom.mdc").read_text().startswith("---\ndescription:")
    assert [r["action"] for r in write_instruction_files(tmp_path, ["agents", "cursor"])] == ["unchanged", "unchanged"]
    edited = agents.replace("## threadloom", "## threadloom (old)") + "\nMore rules after.\n"
    (tmp_path / "AGENTS.md").write_text(edited)
    assert write_instruction_files(tmp_path, ["agents"])[0]["action"] == "updated"
    again = (tmp_path / "AGENTS.md").read_text()
    assert again.count("<!-- threadloom:begin") == 1 and "(old)" not in again and again.endswith("More rules after.\n")
    (tmp_path / "AGENTS.md").write_text("<!-- threadloom:begin (managed by threadloom; edit outside this block) -->\n")
    with pytest.raises(InvalidInput, match="broken"):
        write_instruction_files(tmp_path, ["agents"])
    with pytest.raises(InvalidInput, match="unknown target"):
        write_instruction_files(tmp_path, ["emacs"])
