"""Issue 13's "Done means": three users on one home, every tool, resource and prompt called as the wrong user.

alice and bob work in one repository, carol in another. alice plants private data carrying canary words
through the real daemon (tests/isolation_world.py). Then bob and carol, each in their own session on that
daemon, and bob again through `serve --http` (in alice's project, and by X-Threadloom-Root in carol's),
call everything every toolset offers, with alice's ids and with arguments that enumerate
(tests/isolation_battery.py). Nothing private may come back, alice's ids must look like ids that do not
exist, and none of alice's rows or files may change.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured
from tests.http_server import client as http_client
from tests.http_server import git_repo, serve_http
from tests.isolation_battery import battery
from tests.isolation_probe import Probe, dump_rows
from tests.isolation_world import (
    ALICE_THREAD,
    DAEMON_ENV,
    PRIVATE,
    PROJECT,
    TOOLSET,
    Alice,
    child_users,
    plant,
    tree_digest,
)
from threadloom.server.coordination_tools import COORDINATION_TOOLS
from threadloom.server.memory_tools import MEMORY_TOOLS
from threadloom.server.thread_tools import THREAD_TOOLS
from threadloom.server.tools import TOOLS

# Every tool of every group, three users, two transports: 2 min at load 10 on 2 cores, past the default limit.
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]
TOKEN = "matrix-token-0123456789"
EVERY_TOOL = {t.name for t in (*TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS)}


def needles(alice: Alice, elsewhere: bool, other_user: bool) -> dict[str, str]:
    """What a wrong user must never see: alice's private canaries and ids; from another project, her
    project's too; as another user in another project, anything naming her."""
    found = {word: f"alice's private {what}" for what, word in PRIVATE.items()}
    found |= {memory_id: f"alice's private memory {what}" for what, memory_id in alice.private_ids.items()}
    found |= {task_id: "alice's task id" for task_id in alice.task_ids} | {alice.tournament: "alice's tournament"}
    if elsewhere:
        found |= {word: f"alice's project {what}" for what, word in PROJECT.items()}
        found |= {memory_id: f"alice's shared memory {what}" for what, memory_id in alice.shared_ids.items()}
    if other_user:
        found |= {"alice": "alice's name", str(alice.repo): "alice's repository"}
    return found


async def test_no_wrong_user_sees_changes_or_detects_anything_of_alices(home: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    alice = Alice(git_repo(tmp_path / "alice-repo"))
    carol_repo = git_repo(tmp_path / "carol-repo")
    db = home / "threadloom.db"

    def session(user: str, sid: str, root: Path, **extra: str) -> Any:
        env = {"THREADLOOM_USER": user, "THREADLOOM_AUTHOR": user, "THREADLOOM_TOOLSET": TOOLSET}
        return serve_params(home, THREADLOOM_SESSION_ID=sid, THREADLOOM_ROOT=str(root), **DAEMON_ENV, **env, **extra)

    probes: list[Probe] = []
    bob_sent: set[str] = set()  # what bob sent may come back in his own journal, whichever session asks
    async with AsyncExitStack() as stack:
        a1 = await stack.enter_async_context(Client(session("alice", alice.sessions[0], alice.repo), mode="legacy"))
        await a1.call_tool("status", {})  # the first bridge starts the one daemon
        a2 = await stack.enter_async_context(Client(session("alice", alice.sessions[1], alice.repo), mode="legacy"))
        bob = await stack.enter_async_context(Client(session("bob", "bob-sess-1", alice.repo), mode="legacy"))
        carol = await stack.enter_async_context(Client(session("carol", "carol-sess-1", carol_repo), mode="legacy"))
        for c in (bob, carol):
            await c.call_tool("peers", {})  # sessions that began before alice wrote: catch_up covers all of it
        await plant(a1, a2, alice, db)
        task_view = structured(await a1.call_tool("tasks", {"task_id": alice.task_ids[0]}))
        before, files = dump_rows(db, "alice"), tree_digest(alice.repo)

        control = Probe("control/alice", a1, needles(alice, elsewhere=True, other_user=False))
        await control.tool("memory_search", {"query": "", "limit": 200})
        assert any("alice's private keyed" in f for f in control.findings), "the probe sees nothing"

        for label, c, elsewhere in (("stdio/bob", bob, False), ("stdio/carol", carol, True)):
            sent = set() if elsewhere else bob_sent
            probe = Probe(label, c, needles(alice, elsewhere, other_user=elsewhere), sent=sent)
            await battery(probe, alice, elsewhere, first=True)
            probes.append(probe)

        http_env = {"THREADLOOM_USER": "bob", "THREADLOOM_AUTHOR": "bob", "THREADLOOM_TOOLSET": TOOLSET}
        http_env |= {"THREADLOOM_HTTP_TOKEN": TOKEN, "THREADLOOM_HTTP_ROOTS": str(carol_repo)}
        with serve_http(home, alice.repo, **DAEMON_ENV, **http_env) as served:
            for name in ("User", "Author", "Org"):
                assert served.post({f"X-Threadloom-{name}": "alice"})[0] == 400
            for label, headers, elsewhere in (
                ("http/bob", {}, False),
                ("http/bob-in-carols-repo", {"X-Threadloom-Root": str(carol_repo)}, True),
            ):
                async with http_client(served, headers) as c:
                    probe = Probe(label, c, needles(alice, elsewhere, other_user=False), sent=bob_sent)
                    await battery(probe, alice, elsewhere, first=False)
                    probes.append(probe)
            async with http_client(served, {"X-Threadloom-Session-Id": alice.sessions[0]}) as c:
                taken = await c.call_tool("status", {})
                assert taken.is_error and "belongs to another user" in str(taken.structured_content)
            async with http_client(served, {"X-Threadloom-Parent-Session": alice.sessions[0]}) as c:
                probes.append(Probe("http/bob-as-alices-child", c, needles(alice, False, False), sent=bob_sent))
                await probes[-1].tool("thread_claim", {"action": "release", "thread_id": ALICE_THREAD})
        child = session("bob", "bob-sess-2", alice.repo, THREADLOOM_PARENT_SESSION=alice.sessions[0])
        async with Client(child, mode="legacy") as c:
            probes.append(Probe("stdio/bob-as-alices-child", c, needles(alice, False, False), sent=bob_sent))
            await probes[-1].tool("thread_claim", {"action": "release", "thread_id": ALICE_THREAD})
        async with Client(session("carol", alice.sessions[1], carol_repo), mode="legacy") as thief:
            taken = await thief.call_tool("memory_search", {"query": ""})
            assert taken.is_error and "belongs to another user" in str(taken.structured_content)

        task_now = structured(await a1.call_tool("tasks", {"task_id": alice.task_ids[0]}))
        after, files_now = dump_rows(db, "alice"), tree_digest(alice.repo)  # while her sessions are still open

    findings = [f for p in probes for f in p.findings]
    for p in probes[:4]:
        if uncalled := EVERY_TOOL - set(p.tools):
            findings.append(f"{p.label} never called {sorted(uncalled)}")
    if joined := [s for s in task_now["signals"] if s not in task_view["signals"]]:
        findings.append(f"signals of other users joined alice's task {alice.task_ids[0]}: {joined}")
    for task_id, users in child_users(db, alice.task_ids).items():
        if users - {"alice"}:
            findings.append(f"the child agent of alice's task {task_id} acted as {sorted(users)}, not alice")
    findings += changes(before, after)
    findings += [f"alice's file {f} changed" for f, digest in files.items() if files_now.get(f) != digest]

    assert not findings, "\n".join(findings)
    counts = {p.label: (len(p.tools), len(p.resources), len(p.prompts), p.calls) for p in probes}
    print(f"\nisolation matrix (tools, resources, prompts, calls): {counts} in {time.monotonic() - started:.1f}s")


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What changed in alice's rows. Deliveries to her sessions may be added, but only by bob, who shares
    her project (from there he may whisper to her); the ones she had must stay as they were."""
    old = {d["signal_id"] for d in before["deliveries"]}
    new = [d for d in after["deliveries"] if d["signal_id"] not in old]
    found = [f"a signal from {d['sender_user']} reached alice" for d in new if d["sender_user"] != "bob"]
    after = after | {"deliveries": [d for d in after["deliveries"] if d["signal_id"] in old]}
    return found + [f"alice's {t} changed: {rows} -> {after[t]}" for t, rows in before.items() if after[t] != rows]
