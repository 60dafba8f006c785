"""The thread tools through the real server (bridge and daemon), in a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.helpers import cli, serve_params, structured

pytestmark = pytest.mark.anyio


async def test_an_agent_opens_a_project_works_in_threads_and_reloads_the_context(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    params = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="agent-1", THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        none = structured(await client.call_tool("thread_project", {}))
        assert none["projects"] == [] and none["caveats"]
        made = structured(await client.call_tool("thread_project", {"action": "create", "title": "Shop"}))
        assert made["projects"][0] | {"id": "shop", "selected": True} == made["projects"][0]
        await client.call_tool("thread_summary", {"text": "- Postgres for orders", "section": "Decisions"})
        child = structured(await client.call_tool("thread_create", {"title": "Checkout flow"}))
        assert child["parent"] == "main" and child["id"] == "checkout-flow"
        await client.call_tool("thread_summary", {"text": "## State\n- cart page done\n## Next steps\n- payment"})
        noted = structured(
            await client.call_tool("thread_note", {"text": "Stripe test keys in 1Password", "kind": "insight"})
        )
        assert noted["note"]["thread"] == "checkout-flow"
        bad = await client.call_tool("thread_create", {"title": "x", "parent": "../../etc"})
        assert bad.is_error and "not a thread id" in (bad.structured_content or {})["error"]
    params = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="agent-1")
    async with Client(params, mode="legacy") as client:
        ctx = structured(await client.call_tool("thread_context", {}))
    assert ctx["threads"] == ["checkout-flow", "main"]
    assert "- Postgres for orders" in ctx["context"] and "- cart page done" in ctx["context"]
    assert ctx["tree"] == "main\n└── checkout-flow  <- active"
    assert (repo / ".threadloom/threads/shop/checkout-flow.md").is_file()


async def test_the_context_tree_and_a_thread_are_resources_and_the_flows_are_prompts(
    home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo))
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_summary", {"text": "- Postgres", "section": "Decisions"})
        await client.call_tool("thread_create", {"title": "Search"})
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {
            "threadloom://context{?max_tokens}",
            "threadloom://tree{?project}",
            "threadloom://thread/{thread_id}",
        } <= templates
        context = (await client.read_resource("threadloom://context")).contents[0]
        tree = (await client.read_resource("threadloom://tree")).contents[0]
        one = (await client.read_resource("threadloom://thread/main")).contents[0]
        prompt = await client.get_prompt("context")
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        same = (await client.read_resource("threadloom://tree?project=shop")).contents[0]
        await client.call_tool("thread_project", {"action": "create", "title": "Admin"})  # and switch to it
        shop = (await client.read_resource("threadloom://tree?project=shop")).contents[0]
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("threadloom://tree?project=nope")
    assert "- Postgres" in getattr(context, "text", "") and "Search (active)" in getattr(context, "text", "")
    assert getattr(tree, "text", "") == "main\n└── search  <- active"
    assert getattr(same, "text", "") == getattr(tree, "text", "")
    assert "search" in getattr(shop, "text", "")  # another project than the session's, by name
    assert "no project 'nope' here; projects: admin, shop" in str(unknown.value)
    assert getattr(one, "text", "").startswith("# Shop (active)")
    assert "- Postgres" in str(prompt.messages[0].content)
    assert {"help", "context", "tree", "create", "switch", "summary", "merge"} <= prompts


async def test_stats_count_summaries_and_the_contexts_sessions_loaded(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_summary", {"text": "## Decisions\n- Postgres, for its JSON support"})
        loaded = structured(await client.call_tool("thread_context", {}))
        stats = structured(await client.call_tool("thread_stats", {}))
    assert stats["threads"] == 1 and stats["by_status"] == {"active": 1}
    assert stats["summary_tokens"]["total"] > 0
    assert stats["context_loads"] == {"count": 1, "mean_tokens": loaded["tokens"], "max_tokens": loaded["tokens"]}


def thread_file(thread_id: str, parent: str | None, author: str = "ana", updated: str = "2020-01-01T00:00:00Z") -> str:
    return (
        f"---\nid: {thread_id}\ntitle: {thread_id.title()}\nparent: {parent or 'null'}\nstatus: active\n"
        f"author: {author}\ncreated: 2020-01-01T00:00:00Z\nupdated: {updated}\n---\n## State\n- {thread_id} work\n"
    )


async def test_a_new_thread_never_replaces_a_file_it_could_not_read(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo))
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        folder = repo / ".threadloom/threads/shop"
        conflicted = (
            "<<<<<<< HEAD\n" + thread_file("auth", "main") + "=======\n" + thread_file("auth", None) + ">>>>>>> x\n"
        )
        (folder / "auth.md").write_text(conflicted)
        (folder / "billing.md").write_text("---\nid: billing\ntitle: [broken\n---\n")
        auth = structured(await client.call_tool("thread_create", {"title": "Auth"}))
        billing = structured(await client.call_tool("thread_create", {"title": "Billing", "parent": "main"}))
        tree = structured(await client.call_tool("thread_context", {}))
    assert auth["id"] == "auth-2" and billing["id"] == "billing-2"
    assert (folder / "auth.md").read_text() == conflicted
    assert (folder / "billing.md").read_text() == "---\nid: billing\ntitle: [broken\n---\n"
    assert sorted(p["path"].rsplit("/", 1)[1] for p in tree["problems"]) == ["auth.md", "billing.md"]


async def test_a_bom_is_read_and_a_parent_cycle_is_reported_by_name_not_lost(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="s1")
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        folder = repo / ".threadloom/threads/shop"
        (folder / "edited.md").write_bytes(b"\xef\xbb\xbf" + thread_file("edited", "main").encode())
        (folder / "windows.md").write_bytes(thread_file("windows", "main").replace("\n", "\r\n").encode())
        (folder / "ping.md").write_text(thread_file("ping", "pong"))
        (folder / "pong.md").write_text(thread_file("pong", "ping"))
        (folder / "ball.md").write_text(thread_file("ball", "ping"))
        view = structured(await client.call_tool("thread_context", {}))
        await client.call_tool("thread_status", {"status": "active", "thread_id": "ball"})
        switched = structured(await client.call_tool("thread_context", {}))
        missing = await client.call_tool("thread_status", {"status": "active", "thread_id": "nope"})  # moves nothing
        still = structured(await client.call_tool("thread_context", {}))
        resource = (await client.read_resource("threadloom://tree")).contents[0]
    assert "edited" in view["tree"] and "windows" in view["tree"]
    assert "3 other thread(s)" in view["tree"]  # the cycle is not near the root: counted, and in the whole tree
    for name in ("ping", "pong", "ball"):
        assert name in getattr(resource, "text", "")
    [cycle] = view["problems"]
    assert "cycle" in cycle["error"] and "ping" in cycle["error"] and "pong" in cycle["error"]
    assert switched["threads"] == ["ball", "ping", "pong"] and "- ball work" in switched["context"]
    assert missing.is_error and "no thread 'nope'" in str(missing.structured_content)
    assert still["threads"] == ["ball", "ping", "pong"]
    assert "cycle" in getattr(resource, "text", "")
    shown = cli(home, "thread", "tree", THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="s1")
    assert shown.returncode == 0, shown.stderr
    assert "ping" in shown.stdout and "cycle" in shown.stdout and "edited" in shown.stdout


async def test_the_janitor_in_a_team_project_skips_teammates_threads_and_finishes_the_rest(
    home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    params = serve_params(
        home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full", THREADLOOM_AUTHOR="ana"
    )
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Team", "mode": "team"})
        folder = repo / ".threadloom/threads/team"
        for name, author in (("a-ana", "ana"), ("b-ben", "ben"), ("c-ana", "ana"), ("d-ben", "ben")):
            (folder / f"{name}.md").write_text(thread_file(name, "main", author))
        done = structured(await client.call_tool("thread_janitor", {"action": "janitor", "apply": True}))
    by_id = {t["id"]: t for t in done["threads"]}
    assert by_id["a-ana"]["applied"] and by_id["c-ana"]["applied"]
    assert not by_id["b-ben"]["applied"] and "ben" in by_id["b-ben"]["skipped"]
    assert not by_id["d-ben"]["applied"]
    assert "status: idle" in (folder / "c-ana.md").read_text()
    assert (folder / "b-ben.md").read_text() == thread_file("b-ben", "main", "ben")
