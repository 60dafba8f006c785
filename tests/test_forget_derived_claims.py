"""`forget` over transcripts takes what the user model drew from them: a claim the miner made from an erased
message goes with its words; a claim the user stated keeps its text, minus that evidence."""

from __future__ import annotations

from typing import Any

from tests.conftest import Backend
from tests.store_scan import holding
from threadloom.erasure.service import Eraser
from threadloom.identity import Provenance
from threadloom.store import transcripts
from threadloom.store.erasure import Selector
from threadloom.store.transcripts import StoredMessage
from threadloom.usermodel import UserModel

AT = 1_780_000_000_000


def message(store: Any, session: str, text: str) -> int:
    def write(w: Any) -> int:
        m = StoredMessage("codex", session, f"{session}:0", "user", text, "[]", AT, "/p", "/p", None, "t", "", 0)
        row = transcripts.upsert_message(w, "ann", m, False, AT)
        assert row is not None
        return row[0]

    return int(store.write(write))


def test_claims_drawn_from_erased_messages_go_and_stated_ones_stay(backend: Backend) -> None:
    store = backend.open()
    try:
        model = UserModel(store)
        miner = Provenance(session_id=None, vendor="codex", project=None, origin="job:usermodel_mine", user="ann")
        person = Provenance(session_id="ann-1", vendor="codex", project=None, user="ann")
        erased = message(store, "s-gone", "I prefer zanzibartabs over spaces")
        kept = message(store, "s-kept", "I prefer short answers")
        mined = model.claim(miner, "Prefers: zanzibartabs over spaces", "technical", origin="automated")["claim"]["id"]
        model.add_evidence(miner, mined, source="message", ref=str(erased), origin="automated")
        other = model.claim(miner, "Prefers: short answers", "communication", origin="automated")["claim"]["id"]
        model.add_evidence(miner, other, source="message", ref=str(kept), origin="automated")
        stated = model.claim(person, "Likes zanzibartabs", "technical", statement="I like them")["claim"]["id"]
        model.add_evidence(miner, stated, source="message", ref=str(erased), origin="automated")
        before = model.review(person, stated)["claim"]["confidence"]

        done = Eraser(store).forget("ann", Selector(session="s-gone"), dry_run=False)
        assert done

        left = {c["id"] for c in model.claims(person)["claims"]}
        assert mined not in left and {other, stated} <= left
        assert model.review(person, stated)["claim"]["confidence"] < before  # that support is gone
        assert holding(store, "zanzibartabs over spaces") == []  # SQLite: the file's bytes too (test_forget.py)
        assert holding(store, "zanzibartabs") != []  # the stated claim's text stays
    finally:
        store.close()
