"""memory_recall finds everything an agent is told to write: memories, thread notes, quotes and thread
summaries, each hit with its kind and ids the thread tools take; a quote only ever to its speaker."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio

QUESTION = "what did we decide about the event bus"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    return repo


async def test_a_decision_written_each_way_an_agent_can_is_found_by_memory_recall(home: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    alice = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="alice-1", THREADLOOM_USER="alice")
    async with Client(alice, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_summary", {"text": "- The event bus is NATS, not Kafka", "section": "Decisions"})
        note = structured(
            await client.call_tool(
                "thread_note", {"text": "Decided: event bus consumers retry three times", "kind": "decision"}
            )
        )["note"]
        quote = structured(
            await client.call_tool("thread_note", {"text": "I want the event bus to stay boring", "quote": True})
        )["note"]
        memory = structured(
            await client.call_tool(
                "memory_store", {"content": "The event bus keeps messages for 7 days", "kind": "decision"}
            )
        )
        found = structured(await client.call_tool("memory_recall", {"query": QUESTION}))["memories"]
        notes_only = structured(await client.call_tool("memory_recall", {"query": QUESTION, "kinds": ["note"]}))
        concise = structured(
            await client.call_tool("memory_recall", {"query": QUESTION, "verbosity": "concise", "limit": 4})
        )
        by_entity = structured(await client.call_tool("memory_recall", {"query": QUESTION, "entity": "bus"}))
        context = structured(await client.call_tool("thread_context", {"thread_id": found[0]["thread"] or "main"}))

    by_kind = {hit["kind"]: hit for hit in found}
    assert set(by_kind) == {"memory", "note", "quote", "thread"}
    assert by_kind["memory"]["id"] == memory["id"] and by_kind["memory"]["memory_kind"] == "decision"
    assert (
        by_kind["note"] | {"id": note["id"], "note_kind": "decision", "project": "shop", "thread": "main"}
        == (by_kind["note"])
    )
    assert by_kind["quote"]["id"] == quote["id"] and by_kind["quote"]["text"] == "I want the event bus to stay boring"
    assert by_kind["thread"] | {"id": "main", "project": "shop"} == by_kind["thread"]
    assert "NATS" in by_kind["thread"]["summary"]
    assert all(isinstance(hit["score"], float) for hit in found)
    assert [hit["kind"] for hit in notes_only["memories"]] == ["note"]
    assert {hit["kind"] for hit in concise["memories"]} == {"memory", "note", "quote", "thread"}
    assert all(set(hit) >= {"kind", "id", "score"} for hit in concise["memories"])
    assert by_entity["memories"] == []  # an entity is a memory's: no note, quote or summary has one
    assert "NATS" in context["context"]  # the ids given are the ones the thread tools take


async def test_another_users_quote_is_never_found_while_the_projects_notes_are(home: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    alice = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="alice-1", THREADLOOM_USER="alice")
    async with Client(alice, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        await client.call_tool("thread_note", {"text": "zebra event bus: decided on NATS", "kind": "decision"})
        await client.call_tool("thread_note", {"text": "zebra event bus: I never want Kafka", "quote": True})
        await client.call_tool(
            "thread_note", {"text": "zebra event bus: the whole project hears me", "quote": True, "project_wide": True}
        )
        await client.call_tool("memory_store", {"content": "zebra event bus: my private plan"})
        own = structured(await client.call_tool("memory_recall", {"query": "zebra event bus", "read_only": True}))
    bob = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_SESSION_ID="bob-1", THREADLOOM_USER="bob")
    async with Client(bob, mode="legacy") as client:
        seen = structured(await client.call_tool("memory_recall", {"query": "zebra event bus NATS Kafka hears"}))
        quotes = structured(
            await client.call_tool("memory_recall", {"query": "zebra Kafka hears", "kinds": ["quote"], "limit": 50})
        )
    elsewhere = serve_params(
        home, THREADLOOM_ROOT=str(tmp_path), THREADLOOM_SESSION_ID="alice-2", THREADLOOM_USER="alice"
    )
    async with Client(elsewhere, mode="legacy") as client:
        other_project = structured(await client.call_tool("memory_recall", {"query": "zebra event bus NATS"}))
        everywhere = structured(
            await client.call_tool("memory_recall", {"query": "zebra Kafka", "kinds": ["quote"], "all_projects": True})
        )

    assert sorted(hit["kind"] for hit in own["memories"]) == ["memory", "note", "quote", "quote"]
    assert [hit["kind"] for hit in seen["memories"]] == ["note"]  # the project's note; no quote, no private memory
    assert quotes["memories"] == []
    assert other_project["memories"] == []  # notes are their project's
    assert len(everywhere["memories"]) == 2  # her own quotes follow her, as her private memories do
