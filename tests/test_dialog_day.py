"""dialog_day through a real MCP client: a day rendered in detail when it fits the budget, in outline
(every session kept, the evening included) when it does not, cut at the end with the time to resume
from when even the outline does not fit, and the caveats of an empty range and a range outside what was
captured."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backend_home import home
from tests.helpers import structured
from tests.test_dialog import client_for, local_ms, seed

__all__ = ["home"]  # each test on both backends (tests/backend_home.py)
from threadloom import tokens

pytestmark = pytest.mark.anyio
WORDS = "please refactor the billing module so invoices are rounded per line and tested against the ledger"


def busy_day(home: Path) -> list[str]:
    """Twelve sessions from 08:00 to 19:00 on 2026-11-04, each with four long requests; their ids."""
    sessions = []
    for hour in range(8, 20):
        session = f"s{hour:02d}"
        turns = []
        for n in range(4):
            turns.append(("user", f"{session} request {n}: {WORDS} ({hour}:{n})", local_ms(4, hour, n * 10)))
            turns.append(("assistant", f"done with request {n}", local_ms(4, hour, n * 10 + 1)))
        seed(home, "alice", "claude-code", session, f"/src/app{hour % 3}", turns)
        sessions.append(session)
    return sessions


async def test_a_day_at_both_densities_within_budget_and_cut_with_where_to_resume(home: Path) -> None:
    sessions = busy_day(home)
    async with client_for(home, "alice") as client:
        detail = structured(await client.call_tool("dialog_day", {"day": "2026-11-04", "budget_tokens": 8000}))
        outline = structured(await client.call_tool("dialog_day", {"day": "2026-11-04", "budget_tokens": 1000}))
        cut = structured(await client.call_tool("dialog_day", {"day": "2026-11-04", "budget_tokens": 200}))
        rest = structured(
            await client.call_tool(
                "dialog_day", {"day": cut["resume_from_at"], "until": cut["until_at"], "budget_tokens": 8000}
            )
        )
    assert detail["density"] == "detail" and detail["tokens"] <= 8000 and detail["items"] == 12
    assert all(s in detail["text"] for s in sessions) and "request 3" in detail["text"]
    assert not any("outline" in c or "cut" in c for c in detail["caveats"])
    assert outline["density"] == "outline" and outline["tokens"] <= 1000 < tokens.count(detail["text"])
    assert "19:00-19:31" in outline["text"] and "08:00-08:31" in outline["text"]  # the evening is kept
    assert "request 3" not in outline["text"] and any("outline" in c for c in outline["caveats"])
    assert cut["density"] == "outline" and cut["tokens"] <= 200 and "08:00-08:31" in cut["text"]
    assert "19:00-19:31" not in cut["text"]
    assert any("cut for size" in c and "day=" in c for c in cut["caveats"])
    shown = [line for line in cut["text"].splitlines() if not line.startswith("##")]
    assert rest["items"] == 12 - len(shown) and "19:00-19:31" in rest["text"]


async def test_an_empty_day_and_a_range_outside_what_was_captured_say_so(home: Path) -> None:
    busy_day(home)
    seed(home, "alice", "codex", "early", "/src/app0", [("user", "an earlier day", local_ms(2, 12))])
    async with client_for(home, "alice") as client:
        quiet = structured(await client.call_tool("dialog_day", {"day": "2026-11-03"}))
        before = structured(await client.call_tool("dialog_day", {"day": "2025-02-01"}))
        nothing = structured(await client_for_bob(home))
    assert quiet["items"] == 0 and any("nothing was recorded" in c for c in quiet["caveats"])
    assert not any("outside" in c for c in quiet["caveats"])
    assert any("outside what was captured" in c and "2026-11-02T12:00:00" in c for c in before["caveats"])
    assert nothing["items"] == 0 and any("no transcripts of yours" in c for c in nothing["caveats"])


async def client_for_bob(home: Path) -> object:
    async with client_for(home, "bob") as client:
        return await client.call_tool("dialog_day", {"day": "2026-11-04"})
