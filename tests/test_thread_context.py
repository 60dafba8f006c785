"""What an agent meets in its first minutes, through MCP: a context that costs what the context costs
in a large project, a new session that picks up where its user left off (and never where another
user did), hand edits seen after the files were indexed, a project chosen from the terminal, and a
prompt that fails with its cause."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import cli, serve_params, structured
from threadloom.tokens import count

pytestmark = pytest.mark.anyio
OLD = 1_600_000_000  # an mtime long past: the file cache keeps such files


def git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    return path


def thread_text(tid: str, parent: str | None, state: str = "work", status: str = "active") -> str:
    return (
        f"---\nid: {tid}\ntitle: Topic {tid}\nparent: {parent or 'null'}\nstatus: {status}\nauthor: ana\n"
        f"created: 2024-01-01T00:00:00Z\nupdated: 2024-01-01T00:00:00Z\n---\n## State\n- {tid} {state}\n"
    )


def plant(folder: Path, threads: dict[str, str | None]) -> None:
    """Hand-made thread files, dated in the past."""
    for tid, parent in threads.items():
        path = folder / f"{tid}.md"
        path.write_text(thread_text(tid, parent))
        os.utime(path, (OLD, OLD))


def session(home: Path, repo: Path, sid: str, user: str = "alice") -> object:
    return serve_params(
        home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID=sid, THREADLOOM_USER=user
    )


async def test_the_context_of_a_project_of_600_threads_is_bounded_and_says_what_it_left_out(
    home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    async with Client(session(home, repo, "big-1"), mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Big"})
    folder = repo / ".threadloom/threads/big"
    chain = {"a": "main", "b": "a", "c": "b"}
    siblings = {f"sib-{n}": "b" for n in range(30)}
    children = {f"kid-{n}": "c" for n in range(40)}
    rest = {f"far-{n}": ("main" if n % 7 == 0 else f"far-{n - n % 7}") for n in range(530)}
    plant(folder, chain | siblings | children | rest)
    moved = cli(home, "thread", "context", "c", THREADLOOM_ROOT=str(repo), THREADLOOM_USER="alice")  # work in c
    assert moved.returncode == 0, moved.stderr
    async with Client(session(home, repo, "big-2"), mode="legacy") as client:
        default = await client.call_tool("thread_context", {})
        small = await client.call_tool("thread_context", {"max_tokens": 500})
        whole = (await client.read_resource("threadloom://tree")).contents[0]
    view = structured(default)
    assert view["threads"] == ["c", "b", "a", "main"]
    lines = view["tree"].splitlines()
    assert lines[:3] == ["main", "└── a", "    └── b"]
    assert "        ├── c  <- active" in lines
    assert sum(1 for line in lines if line.lstrip("│ ├└─").startswith("sib-")) == 7  # 8 with c
    assert sum(1 for line in lines if line.lstrip("│ ├└─").startswith("kid-")) == 12
    assert any("… 23 more sibling(s)" in line for line in lines)
    assert any("… 28 more child thread(s)" in line for line in lines)
    # 604 threads; shown: main, a, b, c with 7 of its 30 siblings and 12 of its 40 children
    assert (
        lines[-1]
        == "… and 581 other thread(s) in this project: threadloom://tree or `threadloom thread tree` lists them all"
    )
    # The response is measured in real tokens, as a model pays for it; the whole tree was ~10x this.
    text = default.content[0].text  # type: ignore[union-attr]
    assert count(text) < 1_000, count(text)
    assert count(getattr(whole, "text", "")) > 4 * count(text)
    assert count(small.content[0].text) <= 600  # type: ignore[union-attr]


async def test_a_new_session_resumes_its_users_last_thread_and_never_another_users(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    async with Client(session(home, repo, "alice-1"), mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_create", {"title": "Checkout flow"})
        await client.call_tool("thread_summary", {"text": "- cart page done", "section": "State"})
    async with Client(session(home, repo, "bob-1", user="bob"), mode="legacy") as client:
        bob = structured(await client.call_tool("thread_context", {}))
        await client.call_tool("thread_create", {"title": "Bob's refactor", "parent": "main"})
    async with Client(session(home, repo, "alice-2"), mode="legacy") as client:
        again = structured(await client.call_tool("thread_context", {}))
        prompt = await client.get_prompt("context")
        resource = (await client.read_resource("threadloom://context")).contents[0]
    assert again["threads"] == ["checkout-flow", "main"] and "- cart page done" in again["context"]
    assert again["context"].startswith("_resumed thread checkout-flow, last active 20")
    assert "by you_" in again["context"].splitlines()[0]
    assert "resumed thread checkout-flow" in str(prompt.messages[0].content)
    assert getattr(resource, "text", "").startswith("_resumed thread checkout-flow")
    assert bob["threads"] == ["main"] and "checkout" not in bob["context"]
    assert bob["context"].startswith("_started at the root thread main")


async def test_a_hand_edit_after_the_files_were_indexed_is_seen_by_the_next_read_and_write(
    home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    async with Client(session(home, repo, "edit-1"), mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        folder = repo / ".threadloom/threads/shop"
        plant(folder, {"api": "main", "ui": "main", "db": "api"})
        time.sleep(2.1)  # past the file cache's racy window: every file is now kept parsed
        first = structured(await client.call_tool("thread_context", {}))
        # By hand: db moves under ui; ui is parked and main renamed, each with the same size and mtime
        # as before (only the ctime moves).
        (folder / "db.md").write_text(thread_text("db", "ui"))
        for name, old, new in (("ui", "status: active", "status: idle  "), ("main", "title: Shop", "title: Shoq")):
            before = (folder / f"{name}.md").stat()
            (folder / f"{name}.md").write_text((folder / f"{name}.md").read_text().replace(old, new))
            os.utime(folder / f"{name}.md", ns=(before.st_atime_ns, before.st_mtime_ns))
            assert (folder / f"{name}.md").stat().st_size == before.st_size
        second = structured(await client.call_tool("thread_context", {}))
        await client.call_tool("thread_summary", {"text": "- endpoints listed", "section": "State"})
        tree = (await client.read_resource("threadloom://tree")).contents[0]
    assert first["tree"].startswith("main  <- active\n├── api\n└── ui\n… and 1 other thread(s)")
    assert second["tree"].startswith("main  <- active\n├── api\n└── ui [idle]\n… and 1 other thread(s)")
    assert "Thread: Shop (active)" in first["context"] and "Thread: Shoq (active)" in second["context"]
    assert getattr(tree, "text", "") == "main  <- active\n├── api\n└── ui [idle]\n    └── db"
    written = (folder / "main.md").read_text()
    assert "title: Shoq" in written and "- endpoints listed" in written  # the write kept the hand edit


async def test_a_project_switched_to_from_the_terminal_is_where_the_users_next_session_starts(
    home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    for title in ("Web app", "Infra"):
        made = cli(home, "thread", "project", "--create", title, THREADLOOM_ROOT=str(repo), THREADLOOM_USER="alice")
        assert made.returncode == 0, made.stderr
    switched = cli(home, "thread", "project", "--switch", "web-app", THREADLOOM_ROOT=str(repo), THREADLOOM_USER="alice")
    assert switched.returncode == 0, switched.stderr
    assert [p["id"] for p in json.loads(switched.stdout)["projects"] if p["selected"]] == ["web-app"]
    unknown = cli(home, "thread", "project", "--switch", "nope", THREADLOOM_ROOT=str(repo), THREADLOOM_USER="alice")
    assert unknown.returncode != 0 and "no project 'nope'; known: infra, web-app" in unknown.stderr
    async with Client(session(home, repo, "alice-9"), mode="legacy") as client:
        view = structured(await client.call_tool("thread_context", {}))
        listed = structured(await client.call_tool("thread_project", {}))
    assert "context for Web app" in view["context"]
    assert [p["id"] for p in listed["projects"] if p["selected"]] == ["web-app"]
    async with Client(session(home, repo, "bob-9", user="bob"), mode="legacy") as client:
        refused = await client.call_tool("thread_context", {})
    assert refused.is_error and "several projects here (infra, web-app)" in str(refused.structured_content)
    assert "threadloom thread project --switch" in str(refused.structured_content)


async def test_the_context_prompt_fails_with_its_cause_not_a_generic_message(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    async with Client(session(home, repo, "prompt-1"), mode="legacy") as client:
        with pytest.raises(MCPError) as none:
            await client.get_prompt("context")
        await client.call_tool("thread_project", {"action": "create", "title": "Web app"})
        await client.call_tool("thread_project", {"action": "create", "title": "Infra"})
    async with Client(session(home, repo, "prompt-2", user="carol"), mode="legacy") as client:
        with pytest.raises(MCPError) as several:
            await client.get_prompt("context")
        with pytest.raises(MCPError) as tree:
            await client.get_prompt("tree")
    assert "no threadloom project in this repository" in none.value.message
    assert "retryable: false" in none.value.message and "Error rendering prompt" not in none.value.message
    assert "several projects here (infra, web-app)" in several.value.message
    assert several.value.data == {"error": several.value.data["error"], "retryable": False}
    assert "several projects here" in several.value.data["error"]
    assert "several projects here" in tree.value.message
