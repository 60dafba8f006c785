"""An erased message's tombstone (store/erasure.py keeps its key) is never a turn: not in dialog_search's
windows, not in a dialog_read page or its total, not the anchor of a session read, not in dialog_day.
Transcripts are real Claude Code files ingested by the real ingester into a real store of each backend; the
erasure is the real `Eraser`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.fakes import HashingEmbedder
from tests.test_forget import ANA, DAY, NOV_1, _line, _session_file
from threadloom.dialog.day import DaySummary
from threadloom.dialog.model import DialogFilters
from threadloom.dialog.read import DialogReader
from threadloom.dialog.search import DialogSearch
from threadloom.erasure.service import Eraser
from threadloom.errors import NotFound
from threadloom.ingest.service import IngestConfig, Ingester
from threadloom.search.engine import SearchEngine
from threadloom.store.base import Store
from threadloom.store.erasure import Selector

HOUR = 3600_000


@dataclass
class Erased:
    store: Store
    engine: SearchEngine
    ids: dict[str, int]  # key -> row id


@pytest.fixture
def erased(tmp_path: Path, backend: Backend) -> Erased:
    """Session s-shop: four turns, the second erased; session s-gone: one turn, erased whole."""
    home = tmp_path / "ana"
    t = NOV_1 + 9 * HOUR
    turns = [
        _line("a1", "s-shop", t, "/repo/shop", "open the orders page"),
        _line("a2", "s-shop", t + 60_000, "/repo/shop", "the password is hunter-wobble", "assistant"),
        _line("a3", "s-shop", t + 120_000, "/repo/shop", "now fix the orders total"),
        _line("a4", "s-shop", t + 180_000, "/repo/shop", "the orders total is fixed", "assistant"),
    ]
    _session_file(home, "s-shop", turns)
    _session_file(home, "s-gone", [_line("g1", "s-gone", t + 2 * HOUR, "/repo/shop", "a session to forget")])
    store = backend.open()
    engine = SearchEngine(store, HashingEmbedder())
    Ingester(store, IngestConfig("ana", home, {})).run()
    eraser = Eraser(store)
    assert eraser.forget("ana", Selector(text="hunter-wobble"), ("transcripts",), dry_run=False)["erased"]
    assert eraser.forget("ana", Selector(session="s-gone"), ("transcripts",), dry_run=False)["erased"]
    rows = store.read(lambda r: r.tuples("SELECT key, id, role FROM transcript_messages WHERE owner = 'ana'"))
    assert {k for k, _, role in rows if role == "erased"} == {"a2", "g1"}  # the tombstones are there
    return Erased(store, engine, {str(k): int(i) for k, i, _ in rows})


def test_a_search_window_never_shows_a_tombstone(erased: Erased) -> None:
    found = DialogSearch(erased.store, erased.engine).search("orders total", ANA, DialogFilters(), window=3)
    assert found["hits"]
    for hit in found["hits"]:
        window = [*hit["before"], *hit["after"]]
        assert all(t["role"] != "erased" and t["text"] for t in window)
        assert erased.ids["a2"] not in {t["id"] for t in window}
    a3 = next(h for h in found["hits"] if h["id"] == erased.ids["a3"])
    assert [t["id"] for t in a3["before"]] == [erased.ids["a1"]]  # the live neighbours, the tombstone skipped


def test_a_read_page_skips_tombstones_and_says_how_many(erased: Erased) -> None:
    reader = DialogReader(erased.store)
    page = reader.read(ANA, message=erased.ids["a1"], before=3, after=3)
    assert [m["id"] for m in page["messages"]] == [erased.ids[k] for k in ("a1", "a3", "a4")]
    assert page["total"] == 3
    assert page["caveats"] == ["1 turn(s) of this session were erased (forget) and are left out"]
    back = reader.read(ANA, cursor=f"{erased.ids['a3']}:before", before=5)
    assert [m["id"] for m in back["messages"]] == [erased.ids["a1"]]
    start = reader.read(ANA, session="s-shop", after=1)
    assert [m["id"] for m in start["messages"]] == [erased.ids["a1"], erased.ids["a3"]]


def test_a_tombstone_reads_like_a_message_that_never_existed(erased: Erased) -> None:
    reader = DialogReader(erased.store)
    with pytest.raises(NotFound) as tombstone:
        reader.read(ANA, message=erased.ids["a2"])
    with pytest.raises(NotFound) as never:
        reader.read(ANA, message=10**9)
    assert str(tombstone.value).replace(str(erased.ids["a2"]), "N") == str(never.value).replace(str(10**9), "N")
    with pytest.raises(NotFound):  # a session erased whole
        reader.read(ANA, session="s-gone")


def test_a_day_summary_counts_only_live_turns_and_leaves_an_erased_session_out(erased: Erased) -> None:
    day = DaySummary(erased.store).summary(ANA, day=NOV_1 - DAY, until=NOV_1 + 2 * DAY, budget=2_000)
    assert day["items"] == 1 and "s-gone" not in day["text"]
    assert "4 messages" not in day["text"] and "3 messages (session s-shop)" in day["text"]
