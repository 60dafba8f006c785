"""Thread writes through the real server: what is refused is not written, every limit holds on every
path, and a context stays within its budget."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    return repo


def error_of(result: Any) -> str:
    assert result.is_error, result
    return str((result.structured_content or {})["error"])


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every thread and project file's bytes."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".threadloom").rglob("*.md"))} | {
        str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".threadloom").rglob("*.yaml"))
    }


async def test_a_refused_summary_leaves_every_file_as_it_was(home: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_summary", {"text": "## Decisions\n- Postgres"})
        await client.call_tool("thread_create", {"title": "Auth"})
        await client.call_tool("thread_summary", {"text": "- JWT", "section": "State"})
        before = snapshot(repo)
        huge = "word " * 200_000  # 1 MB
        assert "at most" in error_of(await client.call_tool("thread_summary", {"text": huge}))
        assert "at most" in error_of(await client.call_tool("thread_summary", {"text": f"## State\n{'y' * 25_000}"}))
        # Appending: the section as it would become is checked, not only the text added.
        added = {"text": "z" * 19_995, "section": "State"}  # State holds "- JWT" already
        assert "at most" in error_of(await client.call_tool("thread_summary", added))
        chunk = "z" * 19_990
        assert snapshot(repo) == before
        for n in range(6):
            done = await client.call_tool("thread_summary", {"text": chunk, "section": "Next steps"})
            if n == 0:
                assert not done.is_error
                after_first = snapshot(repo)
            else:
                assert "Next steps" in error_of(done) and "at most" in error_of(done)
                assert snapshot(repo) == after_first
        # Merging: a parent summary that cannot be written leaves the child as it was (not merged).
        before = snapshot(repo)
        assert "at most" in error_of(await client.call_tool("thread_merge", {"parent_summary": huge}))
        assert snapshot(repo) == before
        auth = (repo / ".threadloom/threads/shop/auth.md").read_text()
        assert "status: active" in auth and "merged" not in auth
        loaded = structured(await client.call_tool("thread_context", {}))
        assert loaded["threads"] == ["auth", "main"] and loaded["tokens"] < 10_000


async def test_section_text_never_changes_the_structure_of_the_file(home: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo))
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_summary", {"text": "- Postgres", "section": "Decisions"})
        before = snapshot(repo)
        moved = await client.call_tool(
            "thread_summary", {"text": "- cart done\n## Decisions\n- MySQL after all", "section": "State"}
        )
        assert "heading" in error_of(moved)
        unknown = await client.call_tool("thread_summary", {"text": "- x", "section": "Gossip"})
        assert "Decisions, Constraints, State, Open questions, Next steps" in error_of(unknown)
        whole = await client.call_tool("thread_summary", {"text": "## Decisions\n- a\n## Gossip\n- b"})
        assert "Gossip" in error_of(whole)
        assert snapshot(repo) == before
        # A sub-heading is fine, and any case of a known name is that section.
        ok = structured(await client.call_tool("thread_summary", {"text": "### Cart\n- done", "section": "state"}))
        assert ok["sections"] == ["Decisions", "State"]
        ctx = structured(await client.call_tool("thread_context", {}))
    assert "### Cart\n- done" in ctx["context"] and "MySQL" not in ctx["context"]


async def test_every_thread_argument_and_the_system_context_have_a_limit(home: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        big_context = await client.call_tool(
            "thread_project", {"action": "create", "title": "Shop", "system_context": "x" * 100_000}
        )
        assert "system_context" in error_of(big_context) and "8000" in error_of(big_context).replace(",", "")
        assert not (repo / ".threadloom").exists() or snapshot(repo) == {}
        await client.call_tool("thread_project", {"action": "create", "title": "Shop", "system_context": "Be brief."})
        await client.call_tool("thread_create", {"title": "Auth"})
        before = snapshot(repo)
        calls: list[tuple[str, dict[str, Any]]] = [
            ("thread_status", {"status": "done", "reason": "r" * 5_000}),
            ("thread_summary", {"text": "- x", "section": "State", "paths": ["p" * 2_000]}),
            ("thread_summary", {"text": "- x", "section": "State", "paths": [f"src/{n}" for n in range(500)]}),
            ("thread_summary", {"text": "- x", "section": "S" * 5_000}),
            ("thread_create", {"title": "t" * 5_000}),
            ("thread_create", {"title": "Child", "parent": "p" * 5_000}),
            ("thread_context", {"thread_id": "p" * 5_000}),
            ("thread_rebase", {"thread_id": "auth", "new_parent": "p" * 5_000}),
            ("thread_project", {"action": "switch", "project_id": "p" * 5_000}),
            ("thread_project", {"action": "create", "title": "t" * 5_000}),
            ("thread_note", {"text": "n" * 50_000}),
        ]
        for name, args in calls:
            message = error_of(await client.call_tool(name, args))
            assert "at most" in message or "characters" in message or "items" in message, (name, message)
            assert len(message) < 500, (name, message)
        assert snapshot(repo) == before


@pytest.mark.slow  # 300 thread files
async def test_the_context_budget_covers_everything_returned(home: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo))
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop", "system_context": "Be brief."})
        await client.call_tool("thread_summary", {"text": "- Postgres, for its JSON support", "section": "Decisions"})
        await client.call_tool("thread_create", {"title": "Checkout"})
        for section in ("State", "Open questions", "Next steps"):
            await client.call_tool("thread_summary", {"text": f"- {section} detail " * 800, "section": section})
        await client.call_tool("thread_summary", {"text": "- Stripe, not Adyen", "section": "Decisions"})
        await client.call_tool("thread_summary", {"text": "- PCI: no card numbers", "section": "Constraints"})
        whole = structured(await client.call_tool("thread_context", {}))
        small = structured(await client.call_tool("thread_context", {"max_tokens": 500}))
        resource = (await client.read_resource("threadloom://context?max_tokens=500")).contents[0]
        folder = repo / ".threadloom/threads/shop"
        for n in range(300):  # a large tree, made by hand
            (folder / f"topic-{n}.md").write_text(
                f"---\nid: topic-{n}\ntitle: Topic {n}\nparent: main\nstatus: active\nauthor: ana\n"
                "created: 2026-01-01T00:00:00Z\nupdated: 2026-01-01T00:00:00Z\n---\n"
            )
        (folder / "broken.md").write_text("not a thread")
        crowded = structured(await client.call_tool("thread_context", {"max_tokens": 1_000}))
    assert len(json.dumps(crowded, ensure_ascii=False)) / 4 <= 1_000
    assert crowded["tree"].startswith("main\n") and "topic-299" not in crowded["tree"]
    assert "other thread(s) in this project: threadloom://tree" in crowded["tree"]  # bounded, says where the rest is
    assert len(getattr(resource, "text", "")) / 4 <= 500 and "threadloom://thread/checkout" in getattr(
        resource, "text", ""
    )
    assert whole["tokens"] > 10_000 and not whole.get("caveats")
    returned = json.dumps(small, ensure_ascii=False)
    assert len(returned) / 4 <= 500, len(returned)
    text = small["context"]
    assert "- Stripe, not Adyen" in text and "- PCI: no card numbers" in text and "Be brief." in text
    assert "State detail" not in text and "Open questions detail" not in text
    caveat = " ".join(small["caveats"])
    assert "threadloom://thread/checkout" in caveat and "State" in caveat and "Open questions" in caveat
    assert "threadloom://thread/checkout" in text  # the context itself says what was cut, for resources and prompts
