"""`forget` over MCP for claims: a claim stated through user_claim and its evidence go, and the database file
(whatever table held the text: rows, replay records, the journal) holds it no more. The real server over
stdio, a real home."""

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
        await ana.call_tool("user_evidence", {"claim_id": claim_id, "ref": "yes, always that way"})
        assert MARKER.encode() in file_bytes(home)
        plan = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims"]}))
        assert plan["would_erase"]["claims"]["count"] == 1 and plan["would_erase"]["claims"]["evidence"] == 2
        done = structured(await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims"], "dry_run": False}))
        assert done["erased"]["claims"] == 1 and done["erased"]["claim_evidence"] == 2
        review = await ana.call_tool("user_review", {"claim_id": claim_id})
        assert review.is_error  # gone: an id that reads as never having been
        bad = await ana.call_tool("forget", {"text": MARKER, "kinds": ["claims", "everything"]})
        assert bad.is_error
    assert MARKER.encode() not in file_bytes(home)
