"""Keeping a thread tree healthy when several agents share it: claims (who works on what), stale
unclaimed threads to pick up, compost (idle threads to revisit at random), and the janitor, which
proposes idling or closing neglected threads (a dry run unless asked to apply).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.coordination.presence import present_since
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer
from threadloom.threads.files import ThreadFiles
from threadloom.threads.model import Thread
from threadloom.threads.service import ThreadService, repo_of

DAY_MS: Final = 86_400_000


@dataclass(frozen=True)
class JanitorRules:
    idle_after_days: float = 14.0  # an active thread untouched this long is proposed idle
    close_after_days: float = 60.0  # an idle one, proposed done (its outcome: left idle)
    empty_after_days: float = 7.0  # an active thread with no summary at all, proposed abandoned


class ThreadHygiene:
    def __init__(self, store: Store, threads: ThreadService, rules: JanitorRules | None = None) -> None:
        self._store = store
        self._threads = threads
        self.rules = rules or JanitorRules()

    # claims

    def claim(self, prov: Provenance, thread_id: str | None = None) -> dict[str, Any]:
        """Claim a thread for this session; a live claim by another session is refused."""
        thread = self._threads.thread(prov, thread_id)
        key = self._key(prov, thread.id)
        now = now_ms()

        def tx(w: Writer) -> dict[str, Any]:
            held = w.one(
                "SELECT session_id, claimed_at FROM thread_claims WHERE repo = :repo AND project = :p AND thread = :t",
                key,
            )
            if held and held["session_id"] != prov.session_id and _session_live(w, held["session_id"]):
                raise InvalidInput(f"{thread.id} is claimed by session {held['session_id']} since {held['claimed_at']}")
            w.execute(
                "INSERT INTO thread_claims (repo, project, thread, session_id, claimed_at) VALUES (:repo, :p, :t, :s, "
                ":now) ON CONFLICT (repo, project, thread) DO UPDATE SET session_id = :s, claimed_at = :now",
                key | {"s": prov.session_id or "", "now": now},
            )
            record_event(w, prov, "thread.claimed", {"thread": thread.id})
            return {"thread": thread.id, "session": prov.session_id, "claimed_at": now}

        return self._store.write(tx)

    def release(self, prov: Provenance, thread_id: str | None = None) -> dict[str, Any]:
        """Release a claim: the claimant may, and so may a child agent it spawned (which acts for its user)."""
        thread = self._threads.thread(prov, thread_id)
        key = self._key(prov, thread.id)

        def tx(w: Writer) -> dict[str, Any]:
            held = w.one(
                "SELECT session_id FROM thread_claims WHERE repo = :repo AND project = :p AND thread = :t", key
            )
            if held is None:
                return {"thread": thread.id, "released": False}
            # A session names its parent itself (THREADLOOM_PARENT_SESSION): one naming another user's session
            # is not that session's child.
            parent = w.scalar(
                "SELECT p.id FROM sessions c JOIN sessions p ON p.id = c.parent_id "
                "WHERE c.id = :s AND p.user IS c.user",
                {"s": prov.session_id or ""},
            )
            if held["session_id"] not in (prov.session_id, parent):
                raise InvalidInput(
                    f"{thread.id} is claimed by session {held['session_id']}, not this one or its parent"
                )
            w.execute("DELETE FROM thread_claims WHERE repo = :repo AND project = :p AND thread = :t", key)
            record_event(w, prov, "thread.released", {"thread": thread.id})
            return {"thread": thread.id, "released": True}

        return self._store.write(tx)

    def claims(self, prov: Provenance) -> list[dict[str, Any]]:
        project = self._threads.project(prov)
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT c.thread, c.session_id, c.claimed_at, s.vendor, "
                "(s.ended_at IS NULL AND s.last_seen_at >= :present) AS live "
                "FROM thread_claims c LEFT JOIN sessions s ON s.id = c.session_id "
                "WHERE c.repo = :repo AND c.project = :p ORDER BY c.claimed_at",
                {"repo": str(repo_of(prov)), "p": project.id, "present": present_since()},
            )
        )
        return [dict(row) | {"live": bool(row["live"])} for row in rows]

    def release_orphans(self) -> int:
        """Hygiene: drop claims whose session has ended (closed, or expired by the liveness sweep) or is
        unknown."""
        return self._store.write(
            lambda w: w.execute(
                "DELETE FROM thread_claims WHERE session_id NOT IN (SELECT id FROM sessions WHERE ended_at IS NULL)"
            )
        )

    # pickup, compost, janitor

    def pickup(self, prov: Provenance, limit: int = 10) -> list[dict[str, Any]]:
        """Active or idle threads nobody holds, the longest untouched first."""
        claimed = {c["thread"] for c in self.claims(prov) if c["live"]}
        threads = self._load(prov)
        open_ = [t for t in threads.values() if t.status in ("active", "idle") and t.id not in claimed and t.parent]
        return [_view(t) for t in sorted(open_, key=lambda t: t.updated_at)[:limit]]

    def compost(self, prov: Provenance, count: int = 3, seed: int | None = None) -> list[dict[str, Any]]:
        """A few idle threads at random, to decide whether to revive, finish or drop them."""
        idle = sorted((t for t in self._load(prov).values() if t.status == "idle"), key=lambda t: t.id)
        return [_view(t) for t in random.Random(seed).sample(idle, min(count, len(idle)))]

    def janitor(
        self, prov: Provenance, apply: bool = False, now: int | None = None, only: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """Proposals by category: stale (active, untouched) -> idle; long idle -> done; empty -> abandoned
        (`only`: these categories; consolidation idles the stale alone). Applying changes each thread it may
        (not a teammate's) and reports the others as skipped."""
        now = now if now is not None else now_ms()
        claimed = {c["thread"] for c in self.claims(prov) if c["live"]}
        proposals = []
        for t in sorted(self._load(prov).values(), key=lambda t: t.id):
            if t.parent is None or t.id in claimed:
                continue
            age = (now - t.updated_at) / DAY_MS
            if t.status == "active" and not t.summary.sections and age >= self.rules.empty_after_days:
                proposals.append((t, "empty", "abandoned", f"no summary after {age:.0f} days"))
            elif t.status == "active" and age >= self.rules.idle_after_days:
                proposals.append((t, "stale", "idle", f"untouched for {age:.0f} days"))
            elif t.status == "idle" and age >= self.rules.close_after_days:
                proposals.append((t, "long idle", "done", f"idle for {age:.0f} days"))
        proposals = [p for p in proposals if not only or p[1] in only]
        # In a team project a teammate's thread is theirs to change: skipped, and said so.
        theirs = {t.id: t.author for t in self._threads.teammates(prov, [t for t, *_ in proposals])}
        found = []
        for t, category, status, why in proposals:
            view = _view(t) | {"category": category, "propose": status, "why": why, "applied": False}
            if t.id in theirs:
                view["skipped"] = f"{theirs[t.id]}'s thread: in a team project only its author changes it"
            elif apply:
                try:
                    self._threads.set_status(prov, status, f"janitor: {why}", thread_id=t.id)
                    view["applied"] = True
                except InvalidInput as exc:  # changed, broken or deleted since it was read: the rest go on
                    view["skipped"] = exc.message
            found.append(view)
        return found

    def _load(self, prov: Provenance) -> dict[str, Thread]:
        return ThreadFiles(repo_of(prov), self._threads.project(prov).id).load()[0]

    def _key(self, prov: Provenance, thread: str) -> dict[str, Any]:
        return {"repo": str(repo_of(prov)), "p": self._threads.project(prov).id, "t": thread}


def _view(t: Thread) -> dict[str, Any]:
    return {"id": t.id, "title": t.title, "status": t.status, "updated_at": t.updated_at, "author": t.author}


def _session_live(w: Writer, session_id: str) -> bool:
    """Present (see presence.LIVENESS_MS): a killed session's claim may be taken before the sweep ends it."""
    return bool(
        w.scalar(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = :s AND ended_at IS NULL AND last_seen_at >= :present)",
            {"s": session_id, "present": present_since()},
        )
    )
