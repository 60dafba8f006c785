"""`forget` through the real server over stdio and `threadloom forget` as a process: a clumsy call is
refused with {error, retryable}, a dry run changes nothing, another user's rows are neither counted nor
erased, and after the erasure the database file and its log (PostgreSQL: every column of every table) no longer
hold the text. Each test runs on both backends (tests/backend_home.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests import helpers
from tests.backend_home import home, open_home_store, store_env
from tests.helpers import structured
from tests.store_scan import holding

pytestmark = pytest.mark.anyio
__all__ = ["home"]
MARKER = "qjzpelvorite"
SHARED = "lanternfish"


def _holds(home: Path, text: str) -> bool:
    """SQLite: whether the database file or its log holds `text`. PostgreSQL: whether any column does."""
    if store_env(home):
        store = open_home_store(home)
        try:
            return bool(holding(store, text))
        finally:
            store.close()
    db = home / "threadloom.db"
    wal = home / "threadloom.db-wal"
    return text.encode() in db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def serve_params(home: Path, *args: str, **env: str) -> Any:
    return helpers.serve_params(home, *args, **env, **store_env(home))


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return helpers.cli(home, *args, **env, **store_env(home))


async def test_forget_over_mcp_is_safe_by_default_and_erases_only_the_callers_text(home: Path) -> None:
    toolset = "default,erasure"
    async with Client(serve_params(home, "--in-process", THREADLOOM_USER="ben", THREADLOOM_TOOLSET=toolset)) as ben:
        stored = await ben.call_tool("memory_store", {"content": f"ben feeds the {SHARED} on fridays"})
        assert not stored.is_error, stored
    params = serve_params(home, "--in-process", THREADLOOM_USER="ana", THREADLOOM_TOOLSET=toolset)
    async with Client(params, mode="legacy") as ana:
        tool = next(t for t in (await ana.list_tools()).tools if t.name == "forget")
        assert tool.annotations is not None and tool.annotations.destructive_hint is True
        first = structured(await ana.call_tool("memory_store", {"content": f"the {SHARED} tank code is 1234"}))
        amend = {"memory_id": first["id"], "content": f"the {SHARED} tank code is {MARKER}"}
        amended = await ana.call_tool("memory_amend", amend | {"reason": f"{MARKER} now", "idempotency_key": "k-1"})
        assert not amended.is_error, amended  # its replay record and its event both carry the marker
        assert _holds(home, MARKER)

        for args, said in (
            ({}, "needs a selector"),
            ({"text": 5}, "text"),
            ({"text": "ab"}, "3-"),
            ({"text": "x" * 5_000}, "text"),
            ({"session": "s", "kinds": ["everything"]}, "kinds"),
            ({"session": "s", "kinds": []}, "at least one"),
            ({"since": "last week"}, "since"),
            ({"session": "s", "sample": 10_000}, "sample"),
            ({"session": "s", "dry_run": "no"}, "dry_run"),
            ({"session": "s", "everything": True}, "unknown argument"),
        ):
            refused = await ana.call_tool("forget", args)
            body = structured(refused)
            assert refused.is_error and body["retryable"] is False and said in body["error"], (args, body)

        plan = structured(await ana.call_tool("forget", {"text": SHARED, "kinds": ["memories", "transcripts"]}))
        assert plan["dry_run"] is True and plan["total"] == 2  # ben's memory is neither counted nor shown
        assert [MARKER in s["text"] for s in plan["would_erase"]["memories"]["sample"]] == [False, True]
        found = structured(await ana.call_tool("memory_recall", {"query": MARKER}))
        assert any(MARKER in m["content"] for m in found["memories"])  # the dry run left it

        done = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["memories"], "dry_run": False}))
        assert done["erased"]["memories"] == 1 and done["erased"]["replay_records"] == 1
        assert done["erased"]["events"] >= 1
        assert done["compaction"]["complete"] is True
        assert not _holds(home, MARKER)
        found = structured(await ana.call_tool("memory_recall", {"query": f"{SHARED} tank code"}))
        assert [m["content"] for m in found["memories"]] == [f"the {SHARED} tank code is 1234"]  # current again
    async with Client(serve_params(home, "--in-process", THREADLOOM_USER="ben", THREADLOOM_TOOLSET=toolset)) as ben:
        mine = structured(await ben.call_tool("memory_recall", {"query": SHARED}))
        assert any(SHARED in m["content"] for m in mine["memories"])


async def test_the_cli_lists_first_asks_and_erases_with_yes(home: Path) -> None:
    async with Client(serve_params(home, "--in-process", THREADLOOM_USER="ana")) as ana:
        stored = await ana.call_tool("memory_store", {"content": f"the {MARKER} key opens the shed"})
        assert not stored.is_error, stored

    refused = cli(home, "forget", THREADLOOM_USER="ana")
    assert refused.returncode == 2 and "needs a selector" in refused.stderr
    listed = cli(home, "forget", "--text", MARKER, "--kind", "memories", "--dry-run", THREADLOOM_USER="ana")
    assert listed.returncode == 0 and "memories: 1" in listed.stdout and MARKER in listed.stdout
    unasked = cli(home, "forget", "--text", MARKER, "--kind", "memories", THREADLOOM_USER="ana")
    assert unasked.returncode == 2 and "--yes" in unasked.stderr  # no terminal to confirm on
    other = cli(home, "forget", "--text", MARKER, "--kind", "memories", "--yes", THREADLOOM_USER="ben")
    assert other.returncode == 0 and "would erase 0 rows" in other.stdout
    assert _holds(home, MARKER)
    erased = cli(home, "forget", "--text", MARKER, "--kind", "memories", "--yes", THREADLOOM_USER="ana")
    assert erased.returncode == 0, erased.stderr
    assert "erased: memories 1," in erased.stdout and "backup create" in erased.stdout
    if store_env(home):  # what PostgreSQL keeps, said
        assert "vacuumed" in erased.stdout and "VACUUM FULL" in erased.stdout and "pg_dump archive" in erased.stdout
    assert not _holds(home, MARKER)
    bad_time = cli(home, "forget", "--since", "yesterday", THREADLOOM_USER="ana")
    assert bad_time.returncode == 2 and "--since" in bad_time.stderr


async def test_notes_and_quotes_go_with_their_text_and_their_index(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    params = serve_params(
        home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_USER="ana", THREADLOOM_TOOLSET="default,erasure"
    )
    async with Client(params, mode="legacy") as ana:
        await ana.call_tool("thread_project", {"action": "create", "title": "Shop"})
        quote = {"text": f"never ship {MARKER} on a friday", "quote": True, "project_wide": True}
        noted = await ana.call_tool("thread_note", quote | {"idempotency_key": "q-1"})
        assert not noted.is_error, noted
        assert _holds(home, MARKER)
        plan = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["notes", "memories"]}))
        assert plan["would_erase"]["notes"]["count"] == 1 and plan["would_erase"]["memories"]["count"] == 0
        done = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["notes"], "dry_run": False}))
        assert done["erased"]["notes"] == 1 and done["erased"]["documents"] == 1
        assert done["erased"]["replay_records"] == 1  # thread_note's replay record carried the quote
        assert not _holds(home, MARKER)
        again = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["notes"]}))
        assert again["total"] == 0
