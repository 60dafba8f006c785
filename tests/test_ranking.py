"""Corrections rank above what they correct, and recall as of a time, through the real server and the real
MCP client, in a store of a handful of memories: full-text only, with the deterministic fake embedder
served over the real `openai` back-end, and (slow) with the bundled model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.embedding_endpoint import hashing_endpoint
from tests.helpers import serve_params, structured
from threadloom.clock import instant, now_ms

pytestmark = pytest.mark.anyio

# (what was held, its correction, a question about it)
CORRECTIONS = [
    (
        "The staging database host is db-old.internal",
        "The staging database host moved to db-new.internal last week",
        "staging database host",
    ),
    (
        "Deploys go out on Tuesdays",
        "Deploys go out on Thursdays now, after the release review",
        "which day do deploys go out",
    ),
    (
        "The API rate limit is 100 requests per minute",
        "The API rate limit was raised to 500 requests per minute for paying customers",
        "API rate limit",
    ),
    ("Alice owns the billing service", "Bob took over ownership of the billing service from Alice", "billing owner"),
    ("Frontend tests run with Jest", "Frontend tests now run with Vitest instead of Jest", "frontend test runner"),
    (
        "The release branch is cut every two weeks",
        "The release branch is cut every week since the team grew",
        "how often is the release branch cut",
    ),
]
CHAIN = (
    "We use MySQL as the primary database",
    "We switched the primary database to PostgreSQL 13",
    "The primary database is now PostgreSQL 16 after the upgrade",
)
FILLERS = ("The CI cache lives in S3", "Code review needs two approvals")
LOCAL = {"THREADLOOM_EMBEDDER": "local"}


@pytest.fixture(params=["full-text", "hashing"])
def search_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    if request.param == "full-text":
        yield {}
    else:
        with hashing_endpoint() as env:
            yield env


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, result)
    return structured(result)


async def store(client: Client, content: str, **extra: Any) -> str:
    return str((await call(client, "memory_store", {"content": content, **extra}))["id"])


async def amend(client: Client, memory_id: str, content: str) -> str:
    return str((await call(client, "memory_amend", {"memory_id": memory_id, "content": content}))["new"]["id"])


async def recalled(client: Client, query: str, **extra: Any) -> list[str]:
    found = await call(client, "memory_recall", {"query": query, "read_only": True, **extra})
    return [m["id"] for m in found["memories"]]


async def model_ready(client: Client, wanted: bool) -> None:
    """Wait until the server's embedder has loaded (when one is configured), so stores embed at once."""
    if not wanted:
        return
    with anyio.fail_after(120):
        while (await call(client, "status", {}))["search"]["embedder"]["state"] != "ready":
            await anyio.sleep(0.05)


async def corrections_rank_first(client: Client, embedded: bool) -> None:
    await model_ready(client, embedded)
    for filler in FILLERS:
        await store(client, filler)
    pairs = []
    for old, new, question in CORRECTIONS:
        old_id = await store(client, old)
        pairs.append((old_id, await amend(client, old_id, new), question))
    chain = [await store(client, CHAIN[0])]
    for text in CHAIN[1:]:
        chain.append(await amend(client, chain[-1], text))

    wrong = []
    for old_id, new_id, question in pairs:
        ids = await recalled(client, question)
        if new_id not in ids or (old_id in ids and ids.index(old_id) < ids.index(new_id)):
            wrong.append(question)
    assert wrong == []
    for question in ("primary database", "which primary database do we use"):
        ids = await recalled(client, question, limit=20)  # the whole store: superseded ones are ranked down
        assert ids[0] == chain[-1] and [i for i in ids if i in chain] == chain[::-1], question  # v3, v2, v1


async def test_a_correction_ranks_above_what_it_corrects(home: Path, search_env: dict[str, str]) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full", **search_env)
    async with Client(params, mode="legacy") as client:
        await corrections_rank_first(client, embedded=bool(search_env))


@pytest.mark.slow
async def test_a_correction_ranks_above_what_it_corrects_with_the_bundled_model(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full", **LOCAL)
    async with Client(params, mode="legacy") as client:
        await corrections_rank_first(client, embedded=True)


def ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


async def test_as_of_answers_with_a_correction_recorded_late_and_what_was_believed_then(
    home: Path, search_env: dict[str, str]
) -> None:
    """Payments moved to PostgreSQL on 1 January, but the memory said MySQL from 1 March; the correction was
    recorded months later with its true valid_from. As of any time, recall answers what held then as known
    now and, below it, what was believed then if that has been corrected since."""
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full", **search_env)
    async with Client(params, mode="legacy") as client:
        await model_ready(client, bool(search_env))
        old = await store(client, "Payments run on MySQL", valid_from=ms(2024, 3, 1))
        first = (await call(client, "memory_search", {"query": "payments"}))["memories"][0]
        believed_at = instant(first["created_at"], "created_at")  # an ISO time, to the millisecond
        with anyio.fail_after(5):
            while now_ms() <= believed_at:  # the correction comes strictly later than the first record
                await anyio.sleep(0.001)
        new = await store(client, "Payments run on PostgreSQL", valid_from=ms(2024, 1, 1))
        await call(client, "memory_amend", {"memory_id": old, "by": new, "reason": "recorded late"})

        async def as_of(at: int) -> list[str]:
            return await recalled(client, "which database do payments run on", as_of=at)

        assert await as_of(ms(2023, 6, 1)) == []  # before anything held
        assert await as_of(ms(2024, 2, 1)) == [new]  # held then, as known now (recorded later)
        assert await as_of(ms(2024, 6, 1)) == [new]  # the period that used to answer nothing
        assert await as_of(believed_at) == [new, old]  # held, then what was believed then
        assert await as_of(now_ms()) == [new]
        current = await call(client, "memory_recall", {"query": "payments database", "read_only": True})
        assert [m["id"] for m in current["memories"]] == [new, old]
        assert current["memories"][1]["superseded_by"] == new


async def test_as_of_before_a_correction_answers_what_held_then(home: Path, search_env: dict[str, str]) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(home), THREADLOOM_TOOLSET="full", **search_env)
    async with Client(params, mode="legacy") as client:
        await model_ready(client, bool(search_env))
        old = await store(client, "The on-call rotation is weekly", valid_from=ms(2024, 1, 1))
        late = await store(client, "The on-call rotation is fortnightly", valid_from=ms(2024, 6, 1))
        await call(client, "memory_amend", {"memory_id": old, "by": late})
        assert await recalled(client, "on-call rotation", as_of=ms(2024, 3, 1)) == [old]
        assert await recalled(client, "on-call rotation", as_of=ms(2024, 9, 1)) == [late]  # recorded after
        assert await recalled(client, "on-call rotation") == [late, old]
