"""Attack on import (issue 20): a forged `superseded_by` naming another user's memory. README: an edge or
supersession to a memory in neither the file nor your store is refused; before the fix the edge was
refused but the supersession went in, pointing carol's row at alice's memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.portable_world import runtime
from tests.test_portable_bad_input import SCRUB, memory, write
from threadloom.errors import InvalidInput
from threadloom.portable.importer import import_from
from threadloom.runtime import Runtime


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    store = runtime(tmp_path / "home")
    yield store
    store.close()


def test_a_supersession_to_another_users_memory_is_refused(rt: Runtime, tmp_path: Path) -> None:
    import_from(rt.store, "alice", "", SCRUB, write(tmp_path / "a", "memories", [memory(1, content="alice's")]))
    alices = memory(1)["id"]
    forged = write(tmp_path / "c", "memories", [memory(2, content="carol's", superseded_by=alices)])
    with pytest.raises(InvalidInput) as caught:
        import_from(rt.store, "carol", "", SCRUB, forged)
    assert "in neither the file nor your store" in str(caught.value) and "superseded_by" in str(caught.value)
    assert rt.store.read(lambda r: r.scalar("SELECT COUNT(*) FROM memories WHERE owner = 'carol'")) == 0


def test_a_supersession_to_nothing_is_refused_in_a_dry_run_too(rt: Runtime, tmp_path: Path) -> None:
    dangling = write(tmp_path / "d", "memories", [memory(2, superseded_by="m_" + "f" * 16)])
    with pytest.raises(InvalidInput, match="in neither the file nor your store"):
        import_from(rt.store, "carol", "", SCRUB, dangling, dry_run=True)


def test_a_supersession_within_the_file_or_to_your_own_memory_goes_in(rt: Runtime, tmp_path: Path) -> None:
    import_from(rt.store, "carol", "", SCRUB, write(tmp_path / "a", "memories", [memory(1, content="carol's old")]))
    own = memory(1)["id"]
    later = memory(4)["id"]
    path = write(tmp_path / "b", "memories", [memory(2, superseded_by=own), memory(3, superseded_by=later), memory(4)])
    assert import_from(rt.store, "carol", "", SCRUB, path).counts["memories_added"] == 3
    rows = rt.store.read(lambda r: r.tuples("SELECT id, superseded_by FROM memories WHERE owner = 'carol' ORDER BY id"))
    assert dict(tuple(t) for t in rows)[memory(2)["id"]] == own
    assert dict(tuple(t) for t in rows)[memory(3)["id"]] == later
