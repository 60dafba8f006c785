"""`forget` over MCP for claims: a claim stated through user_claim (with an idempotency key: a retry returns
the first answer, kept as a replay record) and its evidence go, the replay record too, and the database file
holds the text no more. The real server over stdio, a real home."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio
MARKER = "vorpelquint"


def file_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.glob("threadloom.db*")) if p.is_file())


async def test_a_claim_its_evidence_and_its_replay_record_go(home: Path) -> None:
    params = serve_params(home, "--in-process", THREADLOOM_USER="ana", THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as ana:
        made = structured(
            await ana.call_tool(
                "user_claim",
                {"text": f"likes {MARKER} naming", "statement": f"call it {MARKER}", "idempotency_key": "k-1"},
            )
        )
        claim_id = made["claim"]["id"]
        again = structured(
            await ana.call_tool(
                "user_claim",
                {"text": f"likes {MARKER} naming", "statement": f"call it {MARKER}", "idempotency_key": "k-1"},
            )
        )
        assert again["claim"]["id"] == claim_id  # a retried call with its key wrote nothing twice
        await ana.call_tool("user_evidence", {"claim_id": claim_id, "ref": "yes, always that way"})
        assert MARKER.encode() in file_bytes(home)
        plan = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims"]}))
        assert plan["would_erase"]["claims"]["count"] == 1 and plan["would_erase"]["claims"]["evidence"] == 2
        done = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims"], "dry_run": False}))
        assert done["erased"]["claims"] == 1 and done["erased"]["claim_evidence"] == 2
        assert done["erased"]["replay_records"] == 1  # the kept answer carried the claim's text
        review = await ana.call_tool("user_review", {"claim_id": claim_id})
        assert review.is_error  # gone: an id that reads as never having been
        bad = await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims", "everything"]})
        assert bad.is_error
    assert MARKER.encode() not in file_bytes(home)
