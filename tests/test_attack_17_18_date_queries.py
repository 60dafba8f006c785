"""Attack from outside (issue 17): a query naming a date at the edge of the calendar ("0001-01-01",
"9999-12-31", "5000 years ago") made dialog_search and memory_recall answer "internal error (OverflowError)":
the time-aware search built a window past what a date holds. Such a query is searched like any other.
Through the real server and the real MCP client."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
QUERIES = ("0001-01-01", "9999-12-31", "31 December 9999", "December 9999", "5000 years ago", "99999999 years ago")


async def test_a_query_naming_a_date_past_the_calendar_is_searched_not_an_internal_error(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="default,transcripts", THREADLOOM_ROOT=str(home))
    async with Client(params, mode="legacy") as client:
        stored = await client.call_tool("memory_store", {"content": "the release of 9999-12-31 is a placeholder date"})
        assert not stored.is_error, stored
        for query in QUERIES:
            found = await client.call_tool("dialog_search", {"query": query})
            assert not found.is_error, (query, found)
            assert structured(found)["hits"] == []
            recalled = await client.call_tool("memory_recall", {"query": query})
            assert not recalled.is_error, (query, recalled)
        hits = structured(await client.call_tool("memory_recall", {"query": "release 9999-12-31 placeholder"}))
        assert "placeholder date" in str(hits)
