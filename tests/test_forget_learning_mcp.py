"""`forget` of learning data through a real MCP client against the real server (stdio, in-process, HOME a temp
folder with two CLI skills folders) and `threadloom forget` as a process: the dry run counts candidates,
concepts, insights, skills and their copies and changes nothing; the erasure takes them all, their copies
included; another user forgetting the same word touches nothing of the first's; a clumsy kind is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import cli, serve_params, structured
from tests.learning_fixtures import tree
from tests.test_forget_learning import WORD, world
from threadloom.config import Settings
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime

pytestmark = pytest.mark.anyio
TOOLSET = "default,erasure,learning"


def seeded(home: Path, user_home: Path) -> None:
    (user_home / ".claude").mkdir(parents=True)
    (user_home / ".codex").mkdir()
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        world(rt, Library(rt, client_home=user_home))
    finally:
        rt.close()


def params(home: Path, user: str, user_home: Path) -> object:
    return serve_params(home, "--in-process", THREADLOOM_USER=user, THREADLOOM_TOOLSET=TOOLSET, HOME=str(user_home))


async def test_forget_over_mcp_takes_the_learning_data_and_its_copies(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    seeded(home, user_home)
    copies = [user_home / ".claude/skills/feeding-rules", user_home / ".agents/skills/feeding-rules"]
    assert all(c.is_dir() for c in copies)

    async with Client(params(home, "ben", user_home), mode="legacy") as ben:  # type: ignore[arg-type]
        before = tree(home / "skills" / "ana", user_home)
        gone = structured(await ben.call_tool("forget", {"text": WORD, "kinds": ["learning"], "dry_run": False}))
        assert gone["erased"]["learning"] == 1 and gone["erased"]["skills"] == 0
        assert tree(home / "skills" / "ana", user_home) == before and all(c.is_dir() for c in copies)

    async with Client(params(home, "ana", user_home), mode="legacy") as ana:  # type: ignore[arg-type]
        refused = await ana.call_tool("forget", {"text": WORD, "kinds": ["skills-and-all"]})
        assert refused.is_error and structured(refused)["retryable"] is False
        plan = structured(await ana.call_tool("forget", {"text": WORD, "kinds": ["learning"]}))
        found = plan["would_erase"]["learning"]
        assert (found["count"], found["concepts"], found["insights"], found["skills"]) == (1, 1, 1, 1)
        assert found["mirror_copies"] == 2 and found["kept_protected"][0]["name"] == "tank-notes"
        assert all(c.is_dir() for c in copies)

        done = structured(await ana.call_tool("forget", {"text": WORD, "kinds": ["learning"], "dry_run": False}))
        assert done["learning_files"]["mirror_copies"] == 2 and done["erased"]["skills"] == 1
        assert not any(c.exists() for c in copies)
        listed = structured(await ana.call_tool("learning_candidates", {"status": "accepted"}))
        assert all(WORD not in c["text"] for c in listed["candidates"])
        skills = structured(await ana.call_tool("skill_list", {}))
        assert "feeding-rules" not in str(skills) and "tank-notes" in str(skills)
        again = structured(await ana.call_tool("forget", {"text": WORD, "kinds": ["learning"]}))
        assert again["total"] == 0


def test_forget_from_the_command_line_counts_and_erases_learning_data(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    seeded(home, user_home)
    env = {"THREADLOOM_USER": "ana", "HOME": str(user_home)}
    dry = cli(home, "forget", "--text", WORD, "--kind", "learning", "--dry-run", **env)
    assert dry.returncode == 0, dry.stderr
    assert "learning: 1" in dry.stdout and "mirror_copies" in dry.stdout, dry.stdout
    assert (user_home / ".claude/skills/feeding-rules").is_dir()
    done = cli(home, "forget", "--text", WORD, "--kind", "learning", "--yes", "--json", **env)
    assert done.returncode == 0, done.stderr
    assert '"mirror_copies": 2' in done.stdout and not (user_home / ".claude/skills/feeding-rules").exists()
