"""Dialog search and dialog_read through a real MCP client over stdio: filters applied before ranking
(the best match outside a filter never shows), a window of turns around each hit, paging a session with
cursors, another user seeing nothing (errors identical for "not yours" and "does not exist"), and bad
arguments answered with {error, retryable}."""

from __future__ import annotations

import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.backend_home import home, open_home_store, store_env
from tests.helpers import serve_params, structured
from threadloom.search.engine import SearchEngine
from threadloom.search.model import Document
from threadloom.store import transcripts
from threadloom.store.transcripts import StoredMessage

pytestmark = pytest.mark.anyio
__all__ = ["home"]  # each test on both backends (tests/backend_home.py)
ISO_WITH_OFFSET = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?[+-]\d\d:\d\d$")
QUERY = "connection pool exhausted"


def local_ms(day: int, hour: int, minute: int = 0, second: int = 0) -> int:
    """Epoch ms of a local time in November 2026 (the server renders times in the same local zone)."""
    return int(datetime(2026, 11, day, hour, minute, second).astimezone().timestamp() * 1000)


Turn = tuple[str, str, int]  # role, text, epoch ms


def seed(home: Path, owner: str, source: str, session: str, project: str, turns: list[Turn]) -> list[int]:
    """Write `turns` as ingested messages with their search documents, as the ingest service stores them
    (store/transcripts.py and the document shape its module docstring gives); the row ids, in order."""
    store = open_home_store(home)
    ids: list[int] = []

    def write(w: Any) -> None:
        for n, (role, text, at) in enumerate(turns):
            key = f"{session}:{n}"
            m = StoredMessage(source, session, key, role, text, "[]", at, project, project, None, "t", "", n)
            written = transcripts.upsert_message(w, owner, m, False, at)
            assert written is not None
            ids.append(written[0])
            doc = Document("transcript", str(written[0]), text, project, session, role, occurred_at=at)
            SearchEngine.index(w, doc)

    try:
        store.write(write)
    finally:
        store.close()
    return ids


def world(home: Path) -> dict[str, list[int]]:
    """Alice's conversations in two CLIs and projects, and Bob's; the best match for QUERY is in codex."""
    chat = [
        ("user", "the api is slow today, requests time out after thirty seconds", local_ms(2, 9, 0)),
        ("assistant", "checking the database: the connection pool is exhausted under load", local_ms(2, 9, 1)),
        ("user", "raise the pool size to forty then", local_ms(2, 9, 2)),
        ("assistant", "done: pool size forty, timeouts gone", local_ms(2, 9, 3)),
    ]
    best = [
        ("user", "connection pool exhausted again, connection pool exhausted on every deploy", local_ms(3, 14, 0)),
        ("assistant", "the pool is exhausted because connections leak in the worker", local_ms(3, 14, 1)),
    ]
    return {
        "chat": seed(home, "alice", "claude-code", "sess-a", "/src/api", chat),
        "best": seed(home, "alice", "codex", "sess-b", "/src/worker", best),
        "bob": seed(home, "bob", "claude-code", "sess-bob", "/src/api", [(*best[0][:2], local_ms(3, 15))]),
    }


def client_for(home: Path, user: str) -> Client:
    params = serve_params(
        home, "--in-process", THREADLOOM_USER=user, THREADLOOM_TOOLSET="default,transcripts", **store_env(home)
    )
    return Client(params, mode="legacy")


async def search(client: Client, **args: Any) -> list[dict[str, Any]]:
    result = await client.call_tool("dialog_search", {"query": QUERY} | args)
    assert not result.is_error, result
    hits: list[dict[str, Any]] = structured(result)["hits"]
    return hits


async def test_filters_apply_before_ranking_and_each_hit_has_its_window(home: Path) -> None:
    ids = world(home)
    async with client_for(home, "alice") as client:
        everything = await search(client)
        by_vendor = await search(client, vendors=["claude-code"])
        by_project = await search(client, project="/src/api")
        by_session = await search(client, session="sess-a")
        by_role = await search(client, roles=["assistant"], vendors=["codex"])
        by_time = await search(client, until="2026-11-03")
        since = await search(client, since="2026-11-03")
    assert everything[0]["id"] == ids["best"][0] and everything[0]["vendor"] == "codex"  # the best match overall
    assert {h["id"] for h in everything} <= set(ids["chat"] + ids["best"])  # never Bob's
    for hits in (by_vendor, by_project, by_session, by_time):
        assert hits and {h["session"] for h in hits} == {"sess-a"}, hits
        assert hits[0]["id"] == ids["chat"][1]  # the pool message, not the better match outside the filter
    assert [h["id"] for h in by_role] == [ids["best"][1]]
    assert {h["session"] for h in since} == {"sess-b"}
    top = by_vendor[0]
    assert ISO_WITH_OFFSET.match(top["at"]) and top["role"] == "assistant" and top["project"] == "/src/api"
    assert [t["id"] for t in top["before"]] == [ids["chat"][0]]
    assert [t["id"] for t in top["after"]] == [ids["chat"][2]]
    assert top["after"][0]["text"] == "raise the pool size to forty then" and top["after"][0]["role"] == "user"


async def test_a_filter_nothing_passes_says_what_to_try_and_a_range_outside_says_what_was_captured(home: Path) -> None:
    world(home)
    async with client_for(home, "alice") as client:
        none = structured(await client.call_tool("dialog_search", {"query": QUERY, "vendors": ["gemini"]}))
        early = structured(await client.call_tool("dialog_search", {"query": QUERY, "until": "2025-01-01"}))
    assert none["hits"] == [] and any("drop a filter (vendors)" in c for c in none["caveats"])
    assert early["hits"] == []
    assert any("outside what was captured" in c and "2026-11-02T09:00:00" in c for c in early["caveats"])


async def test_dialog_read_pages_through_a_session_both_ways(home: Path) -> None:
    turns = [("user" if n % 2 == 0 else "assistant", f"turn number {n}", local_ms(5, 10, n)) for n in range(12)]
    ids = seed(home, "alice", "claude-code", "long", "/src/api", turns)
    async with client_for(home, "alice") as client:
        around = structured(await client.call_tool("dialog_read", {"message": ids[5], "before": 2, "after": 2}))
        seen = [m["id"] for m in around["messages"]]
        page = around
        while page["more_after"]:
            page = structured(await client.call_tool("dialog_read", {"cursor": page["more_after"], "after": 3}))
            seen += [m["id"] for m in page["messages"]]
        page = around
        while page["more_before"]:
            page = structured(await client.call_tool("dialog_read", {"cursor": page["more_before"], "before": 2}))
            seen = [m["id"] for m in page["messages"]] + seen
        start = structured(await client.call_tool("dialog_read", {"session": "long", "after": 3}))
    assert [m["id"] for m in around["messages"]] == ids[3:8] and around["total"] == 12
    assert around["messages"][2]["text"] == "turn number 5" and ISO_WITH_OFFSET.match(around["messages"][2]["at"])
    assert seen == ids  # every message once, in order
    assert [m["id"] for m in start["messages"]] == ids[:4] and start["more_before"] is None
    assert start["more_after"] == f"{ids[3]}:after"


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    body = structured(result)
    assert set(body) >= {"error", "retryable"} and "internal error" not in body["error"], body
    return body


async def test_another_user_sees_nothing_and_not_yours_reads_like_does_not_exist(home: Path) -> None:
    ids = world(home)
    alice_id, missing = ids["chat"][1], 987_654
    async with client_for(home, "bob") as client:
        hits = await search(client)
        theirs = _error(await client.call_tool("dialog_read", {"message": alice_id}))
        absent = _error(await client.call_tool("dialog_read", {"message": missing}))
        session = _error(await client.call_tool("dialog_read", {"session": "sess-a"}))
        no_session = _error(await client.call_tool("dialog_read", {"session": "sess-z"}))
        cursor = _error(await client.call_tool("dialog_read", {"cursor": f"{alice_id}:after"}))
        filtered = await search(client, session="sess-a")
        day = structured(await client.call_tool("dialog_day", {"day": "2026-11-02"}))
    assert [h["id"] for h in hits] == ids["bob"]
    assert theirs["error"].replace(str(alice_id), "N") == absent["error"].replace(str(missing), "N")
    assert session["error"].replace("sess-a", "S") == no_session["error"].replace("sess-z", "S")
    assert cursor == theirs and filtered == []
    assert day["items"] == 0 and day["text"] == "" and "api is slow" not in str(day)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("dialog_search", {"query": "x" * 30_000}, "query"),
    ("dialog_search", {"query": "x", "limit": 0}, "limit"),
    ("dialog_search", {"query": "x", "limit": "ten"}, "limit"),
    ("dialog_search", {"query": "x", "vendors": "codex"}, "vendors"),
    ("dialog_search", {"query": "x", "vendors": ["vim"]}, "vendors"),
    ("dialog_search", {"query": "x", "roles": ["robot"]}, "roles"),
    ("dialog_search", {"query": "x", "since": "last week"}, "since"),
    ("dialog_search", {"query": "x", "since": "2026-11-03", "until": "2026-11-02"}, "since must be before until"),
    ("dialog_search", {"query": ["x"]}, "query"),
    ("dialog_search", {"query": "x", "window": 99}, "window"),
    ("dialog_read", {}, "give one of message"),
    ("dialog_read", {"message": 1, "session": "s"}, "give one of message"),
    ("dialog_read", {"cursor": "12:sideways"}, "cursor"),
    ("dialog_read", {"cursor": "9" * 30 + ":after"}, "cursor"),
    ("dialog_read", {"message": -3}, "message"),
    ("dialog_read", {"message": 2**70}, "message"),
    ("memory_recall", {"query": "x", "kinds": ["transcripts"]}, "kinds"),
    ("dialog_read", {"session": "s" * 10_000}, "session"),
    ("dialog_day", {"day": "yesterday"}, "day"),
    ("dialog_day", {"day": "2026-11-02", "until": "2026-11-01"}, "until must be after day"),
    ("dialog_day", {"day": "2026-01-01", "until": "2026-06-01"}, "31 days"),
    ("dialog_day", {"day": "2026-11-02", "budget_tokens": 10}, "budget_tokens"),
]


async def test_huge_empty_and_wrongly_typed_arguments_get_error_and_retryable(home: Path) -> None:
    world(home)
    async with client_for(home, "alice") as client:
        for tool, arguments, named in BAD:
            body = _error(await client.call_tool(tool, arguments))
            assert named in body["error"] and body["retryable"] is False, (tool, arguments, body)
        empty = structured(await client.call_tool("dialog_search", {"query": "   "}))
    assert empty["hits"] and any("no search terms" in c for c in empty["caveats"])  # the latest messages


async def test_memory_recall_reaches_transcripts_when_asked_and_ranks_a_curated_memory_first(
    home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    said = [("user", "the connection pool is exhausted, the connection pool keeps running dry", local_ms(2, 9))]
    [message] = seed(home, "alice", "claude-code", "sess-r", str(repo), said)
    seed(home, "bob", "claude-code", "sess-q", str(repo), said)
    alice = serve_params(home, "--in-process", THREADLOOM_USER="alice", THREADLOOM_ROOT=str(repo), **store_env(home))
    async with Client(alice, mode="legacy") as client:
        stored = structured(await client.call_tool("memory_store", {"content": "Decided: connection pool size 40"}))
        default = structured(await client.call_tool("memory_recall", {"query": QUERY}))["memories"]
        both = structured(await client.call_tool("memory_recall", {"query": QUERY, "kinds": ["memory", "transcript"]}))
        alone = structured(await client.call_tool("memory_recall", {"query": QUERY, "kinds": ["transcript"]}))
    assert [m["kind"] for m in default] == ["memory"]
    assert [(m["kind"], m["id"]) for m in both["memories"]] == [("memory", stored["id"]), ("transcript", message)]
    heard = both["memories"][1]
    assert heard["session"] == "sess-r" and heard["role"] == "user" and ISO_WITH_OFFSET.match(heard["at"])
    assert [m["id"] for m in alone["memories"]] == [message]  # never Bob's copy of the same words
