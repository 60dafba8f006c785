"""The egress policy where memory leaves through a process: spawned children and the session-start hook.

A child is spawned for real (SpawnService, its supervisor, the agent command `claude`, `codex` or `gemini`
found on PATH) from a parent whose own vendor is claude. The agent command is a stand-in agent CLI that asks
its own threadloom server, over MCP, for the brief (tool and `threadloom://brief`), memory_recall and
user_synthesis, and saves the answers: what a model of that vendor would read. For every policy and child
vendor it gets what the policy allows that vendor (not its parent's), and the one withheld line when
something was held back; a second user's child gets none of the first user's claims or quotes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, wait_for
from tests.spawning import parent
from threadloom.agents import VENDOR_ENV_MARKERS
from threadloom.config import Settings
from threadloom.coordination.spawn import SpawnConfig, SpawnService, _Launch, child_env
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.runtime import open_runtime
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store.sqlite import open_store
from threadloom.usermodel import UserModel

POLICIES = ("all", "same-vendor", "none")
CHILDREN = ("claude", "codex", "gemini")
CLAIM = {"claude": "prefers rebasing feature branches", "codex": "prefers squashing feature branches"}
QUOTE = {"claude": "keep the rollback plan short", "codex": "keep the rollback plan written"}
# Written out, not computed by the code under test: which recorders' memory each child vendor may read.
EXPECTED = {
    ("all", "claude"): {"claude", "codex"},
    ("all", "codex"): {"claude", "codex"},
    ("all", "gemini"): {"claude", "codex"},
    ("same-vendor", "claude"): {"claude"},
    ("same-vendor", "codex"): {"codex"},
    ("same-vendor", "gemini"): set(),
    ("none", "claude"): set(),
    ("none", "codex"): set(),
    ("none", "gemini"): set(),
}

# The stand-in agent CLI: its own threadloom server over stdio (as a real agent's MCP config starts it), the
# reads a model would make, their answers saved where the test reads them.
CHILD = """
import json, os, sys
from pathlib import Path
import anyio
from mcp import Client, StdioServerParameters

async def main():
    sys.stdin.read()
    params = StdioServerParameters(command=sys.executable, args=["-m", "threadloom", "serve", "--in-process"],
                                   env=dict(os.environ))
    out = {}
    async with Client(params, mode="legacy") as client:
        for name, args in (("brief", {"budget": 4000}), ("memory_recall", {"query": "rollback plan"}),
                           ("user_synthesis", {})):
            result = await client.call_tool(name, args)
            out[name] = result.structured_content or {"error": [getattr(c, "text", "") for c in result.content]}
        res = await client.read_resource("threadloom://brief?budget=4000")
        out["resource"] = res.contents[0].text
    Path(os.environ["EGRESS_OUT"], os.environ["THREADLOOM_TASK"] + ".json").write_text(json.dumps(out))

anyio.run(main)
"""


def seed(home: Path, repo: Path) -> None:
    """ana's personal memory recorded in a claude and a codex session; bob has none."""
    runtime = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        model = UserModel(runtime.store)
        for vendor in CLAIM:
            info = SessionInfo(
                id=f"ana-{vendor}", vendor=vendor, transport="stdio", project=str(repo), cwd=str(repo), pid=1,
                user="ana",
            )  # fmt: skip
            runtime.sessions.open(info)
            prov = info.provenance()
            if vendor == "claude":
                runtime.threads.create_project(prov, "Shop")
                runtime.memory.store(NewMemory(content="the rollback plan lives in docs/ops.md"), prov)
            claim_id = model.claim(prov, CLAIM[vendor], "workflow", statement=CLAIM[vendor])["claim"]["id"]
            for n in range(3):
                model.add_evidence(prov, claim_id, "support", "statement", f"again ({n}): {CLAIM[vendor]}")
            runtime.notes.add_quote(prov, QUOTE[vendor], project_wide=True)
    finally:
        runtime.close()


@pytest.fixture
def world(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    seed(home, repo)
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir()
    out.mkdir()
    (tmp_path / "child.py").write_text(CHILD)
    for name in CHILDREN:  # `claude -p`, `codex exec -`, `gemini`: each the stand-in
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\nexec {PY} {tmp_path / 'child.py'}\n")
        script.chmod(0o755)
    # The parent speaks for Claude Code (its vendor and Claude Code's own marker in the environment a child
    # inherits): a child of another CLI must not be taken for it.
    monkeypatch.setenv("THREADLOOM_VENDOR", "claude")
    for marker, _ in VENDOR_ENV_MARKERS:
        monkeypatch.delenv(marker, raising=False)
    monkeypatch.setenv("THREADLOOM_USER", "ana")
    return home, repo, bin_dir, out


def run_children(home: Path, repo: Path, bin_dir: Path, out: Path, policy: str, user: str) -> dict[str, Any]:
    store = open_store(home / "threadloom.db")
    try:
        prov = parent(store, repo)
        if user != prov.user:
            info = SessionInfo(
                id=f"parent-{user}", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=1,
                user=user,
            )  # fmt: skip
            SessionService(store).open(info)
            prov = info.provenance()
        extra = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "THREADLOOM_EGRESS": policy,
            "EGRESS_OUT": str(out),
            "THREADLOOM_INGEST": "false",
        }
        spawner = SpawnService(store, home, SpawnConfig(grace_s=1.0, max_children=len(CHILDREN), extra_env=extra))
        ask = "report what you were given"
        tasks = {
            agent: spawner.spawn(prov, ask, agent=agent, timeout_s=120, toolset="full")["id"] for agent in CHILDREN
        }
        for agent, task in tasks.items():
            wait_for(lambda t=task: spawner.status(t)["status"] not in ("starting", "running"), 120, f"{agent} child")
            status = spawner.status(task)
            assert status["exit_code"] == 0, (agent, status, Path(status["log_path"]).read_text()[-2000:])
        answers = {agent: json.loads((out / f"{task}.json").read_text()) for agent, task in tasks.items()}
        for agent, task in tasks.items():  # whose session the child's server opened: its vendor and user
            row = store.read(
                lambda r, t=task: r.one("SELECT vendor, user FROM sessions WHERE id = :id", {"id": t + "-1"})
            )
            assert row is not None, agent
            answers[agent]["session"] = dict(row)
        return answers
    finally:
        store.close()


def everything(answer: dict[str, Any]) -> str:
    return json.dumps(answer, ensure_ascii=False)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_child_gets_what_the_policy_allows_its_own_vendor(world: tuple[Path, Path, Path, Path], policy: str) -> None:
    home, repo, bin_dir, out = world
    answers = run_children(home, repo, bin_dir, out, policy, "ana")
    for agent, answer in answers.items():
        assert answer["session"]["vendor"] == agent  # the child's own, not its parent's claude
        allowed = EXPECTED[(policy, agent)]
        brief, resource = answer["brief"]["text"], answer["resource"]
        recalled = everything(answer["memory_recall"])
        synthesis = everything(answer["user_synthesis"])
        for vendor in CLAIM:  # (the brief and the resource differ only by the peers that came and went between)
            assert (CLAIM[vendor] in brief) == (vendor in allowed), (policy, agent, vendor, brief)
            assert (CLAIM[vendor] in resource) == (vendor in allowed), (policy, agent, vendor, resource)
            assert (CLAIM[vendor] in synthesis) == (vendor in allowed), (policy, agent, vendor)
            assert (QUOTE[vendor] in recalled) == (vendor in allowed), (policy, agent, vendor)
        assert "docs/ops.md" in recalled  # work memory goes whatever the policy
        held = len(CLAIM) - len(allowed)
        lines = [line for line in brief.splitlines() if line.startswith("egress policy=")]
        assert len(lines) == (1 if held else 0), brief
        assert lines == [line for line in resource.splitlines() if line.startswith("egress policy=")]
        if held:
            assert f"({held} claims)" in lines[0] and f"policy={policy}" in lines[0]
            assert any(c.startswith("egress policy=") and f"{held} quotes" in c
                       for c in answer["memory_recall"]["caveats"])  # fmt: skip
            assert "withheld" in answer["user_synthesis"]


def test_a_second_users_child_gets_none_of_the_first_users_personal_memory(
    world: tuple[Path, Path, Path, Path],
) -> None:
    home, repo, bin_dir, out = world
    answers = run_children(home, repo, bin_dir, out, "all", "bob")
    for agent, answer in answers.items():
        said = everything(answer)
        assert answer["session"]["user"] == "bob", agent
        for text in (*CLAIM.values(), *QUOTE.values()):
            assert text not in said, (agent, text)
        assert "egress policy=" not in said


def test_the_session_start_hook_brief_follows_the_policy_for_its_client(
    world: tuple[Path, Path, Path, Path],
) -> None:
    home, repo, _, _ = world
    start = {"session_id": "h-1", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
    seen = {}
    for client in ("claude", "gemini"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
        env |= {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_INGEST": "false",
                "THREADLOOM_USER": "ana", "THREADLOOM_EGRESS": "same-vendor"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "threadloom", "hook", "session-start", "--client", client],
            input=json.dumps(start | {"session_id": f"h-{client}"}), env=env, cwd=repo, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        seen[client] = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert CLAIM["claude"] in seen["claude"] and CLAIM["codex"] not in seen["claude"]
    assert "withheld from anthropic (1 claims)" in seen["claude"]
    assert not any(claim in seen["gemini"] for claim in CLAIM.values())
    assert "withheld from google (2 claims)" in seen["gemini"]


def test_the_parent_session_is_not_a_child_vendor(world: tuple[Path, Path, Path, Path]) -> None:
    """A custom command's child names itself: it does not inherit the parent's THREADLOOM_VENDOR."""
    prov = Provenance("p", "claude", "/repo", user="ana")
    run = _Launch(prov, "t_1", ["x"], "p", Path("/"), 1.0, 0, Path("/dev/null"), "default")
    assert "THREADLOOM_VENDOR" not in child_env(run, SpawnConfig())
    named = _Launch(prov, "t_1", ["x"], "p", Path("/"), 1.0, 0, Path("/dev/null"), "default", vendor="codex")
    assert child_env(named, SpawnConfig(extra_env={"THREADLOOM_VENDOR": "claude"}))["THREADLOOM_VENDOR"] == "codex"
