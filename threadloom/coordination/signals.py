"""Signals between sessions: whisper (to one), broadcast (to a project's live sessions, or all),
ask and respond, the inbox. Each signal is fanned out to its recipients in the transaction that
sends it, one delivery row per recipient, so it reaches each exactly once, in the order sent, and
survives restarts. Messages to oneself are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.coordination.presence import LIVENESS_MS, readable_signals_sql
from threadloom.coordination.waiting import CHANNEL
from threadloom.errors import InvalidInput, NotFound
from threadloom.identity import Provenance
from threadloom.scrub import SCRUB, Scrubber
from threadloom.sessions import record_event
from threadloom.store.base import Reader, Store, Writer
from threadloom.store.visibility import session_seen_sql

MAX_BODY_CHARS: Final = 20_000
LIVE_WINDOW_MS: Final = LIVENESS_MS  # a session seen this recently, and not ended, is present and gets signals


@dataclass(frozen=True)
class Sent:
    id: int | None  # None: dropped (to oneself, or nobody to receive it)
    recipients: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "delivered_to": list(self.recipients)}


class SignalService:
    scrubber: Scrubber = SCRUB  # open_runtime sets THREADLOOM_SCRUB_SECRETS's

    def __init__(self, store: Store) -> None:
        self._store = store

    def whisper(self, prov: Provenance, to: str, body: str, task: str | None = None) -> Sent:
        """To one session; an unambiguous prefix of its id will do."""
        _check_body(body)
        body = self.scrubber.text(body)
        me = _me(prov)

        def tx(w: Writer) -> Sent:
            target = resolve_session(w, to, prov)
            if target == me:
                return Sent(None, ())
            _check_present(w, target)
            return _send(w, prov, "whisper", None, body, [target], None, task)

        return self._store.write(tx)

    def broadcast(self, prov: Provenance, body: str, everywhere: bool = False, task: str | None = None) -> Sent:
        """To every live session of this project (or, `everywhere`, also the sender's user's sessions in
        other projects), except the sender."""
        _check_body(body)
        body = self.scrubber.text(body)
        me = _me(prov)
        scope = None if everywhere else prov.project
        seen, params = session_seen_sql(prov.viewer())

        def tx(w: Writer) -> Sent:
            now = now_ms()
            where = "" if everywhere else " AND project = :p"
            live = [
                str(sid)
                for (sid,) in w.tuples(
                    "SELECT id FROM sessions s WHERE ended_at IS NULL AND last_seen_at >= :since AND id <> :me"
                    + where + f" AND {seen} ORDER BY id",
                    params | {"since": now - LIVE_WINDOW_MS, "me": me, "p": prov.project},
                )
            ]  # fmt: skip
            if not live:
                return Sent(None, ())
            return _send(w, prov, "broadcast", scope, body, live, None, task)

        return self._store.write(tx)

    def ask(self, prov: Provenance, to: str, question: str, task: str | None = None) -> Sent:
        """A question to one session; `answer_for` (or waiting on the inbox) gets the reply."""
        _check_body(question)
        question = self.scrubber.text(question)
        me = _me(prov)

        def tx(w: Writer) -> Sent:
            target = resolve_session(w, to, prov)
            if target == me:
                raise InvalidInput("a session cannot ask itself")
            _check_present(w, target)
            return _send(w, prov, "ask", None, question, [target], None, task)

        return self._store.write(tx)

    def respond(self, prov: Provenance, ask_id: int, answer: str) -> Sent:
        """Answer a question by its id; the answer goes to whoever asked."""
        _check_body(answer)
        answer = self.scrubber.text(answer)
        me = _me(prov)
        readable, params = readable_signals_sql(prov)

        def tx(w: Writer) -> Sent:
            row = w.one(
                "SELECT s.sender, s.task FROM signals s JOIN signal_deliveries d ON d.signal_id = s.id "
                f"AND d.recipient = :me WHERE s.id = :id AND s.kind = 'ask' AND {readable}",
                params | {"id": ask_id, "me": me},
            )
            if row is None:  # the same answer whether it does not exist or was asked of someone else
                raise NotFound(f"no question {ask_id} was asked of this session")
            _check_present(w, row["sender"])
            return _send(w, prov, "answer", None, answer, [row["sender"]], ask_id, row["task"])

        return self._store.write(tx)

    def answer_for(self, prov: Provenance, ask_id: int) -> dict[str, Any] | None:
        """The answer to a question this session asked, if it has come. It stays unread until acknowledged
        (see `inbox`), so a reply lost on its way to the agent is not lost."""
        me = _me(prov)
        readable, params = readable_signals_sql(prov)
        row = self._store.read(
            lambda r: r.one(
                "SELECT s.id, s.sender, s.body, s.created_at FROM signals s JOIN signal_deliveries d "
                f"ON d.signal_id = s.id AND d.recipient = :me WHERE s.reply_to = :ask AND {readable} "
                "ORDER BY s.id LIMIT 1",
                params | {"me": me, "ask": ask_id},
            )
        )
        return dict(row) if row else None

    def inbox(
        self,
        prov: Provenance,
        ack: Sequence[int] = (),
        ack_upto: int | None = None,
        limit: int = 50,
        include_read: bool = False,
    ) -> dict[str, Any]:
        """Unread signals for this session, oldest first (then recent read ones when asked). Delivery is by
        acknowledgement: what a call returns stays unread until a later call acknowledges it (`ack`: those
        ids; `ack_upto`: everything up to that id), so a crash between the reply and the agent loses none."""
        me = _me(prov)
        acking = bool(ack) or ack_upto is not None
        readable = readable_signals_sql(prov)

        def tx(w: Writer) -> dict[str, Any]:
            if acking:
                ids = json.dumps(sorted(set(ack)))
                w.execute(
                    "UPDATE signal_deliveries SET read_at = :now WHERE recipient = :me AND read_at IS NULL AND "
                    "(signal_id <= :upto OR signal_id IN (SELECT CAST(value AS INTEGER) FROM json_each(:ids)))",
                    {"now": now_ms(), "me": me, "upto": ack_upto if ack_upto is not None else -1, "ids": ids},
                )
            unread = _list(w, me, "d.read_at IS NULL", limit, readable)
            older = _list(w, me, "d.read_at IS NOT NULL", limit, readable) if include_read else []
            left = int(w.scalar("SELECT count(*) FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id "
                                f"WHERE d.recipient = :me AND d.read_at IS NULL AND {readable[0]}",
                                readable[1] | {"me": me}))  # fmt: skip
            return {"unread": unread, "read": older, "unread_left": left - len(unread)}

        return self._store.write(tx) if acking else self._store.read(tx)  # type: ignore[arg-type]

    def unread_count(self, prov: Provenance) -> int:
        me = _me(prov)
        readable, params = readable_signals_sql(prov)
        return int(
            self._store.read(
                lambda r: r.scalar(
                    "SELECT count(*) FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id "
                    f"WHERE d.recipient = :me AND d.read_at IS NULL AND {readable}",
                    params | {"me": me},
                )
            )
        )

    def latest_id(self) -> int:
        """The newest signal's id: a cheap question a process's one poller asks to wake its waiters."""
        return int(self._store.read(lambda r: r.scalar("SELECT COALESCE(max(id), 0) FROM signals")))


def resolve_session(r: Reader, to: str, prov: Provenance) -> str:
    """A session the caller may see (see `session_seen_sql`), from a full id or an unambiguous prefix of at
    least 4 characters; any other is "no session", whether or not it exists."""
    if not to or len(to) > 128:
        raise InvalidInput("name a session by its id (or an unambiguous prefix of it)")
    seen, params = session_seen_sql(prov.viewer())
    if r.scalar(f"SELECT EXISTS (SELECT 1 FROM sessions s WHERE id = :id AND {seen})", params | {"id": to}):
        return to
    if len(to) < 4:
        raise NotFound(f"no session {to!r} (a prefix needs at least 4 characters)")
    pattern = to.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    found = [
        str(sid)
        for (sid,) in r.tuples(
            f"SELECT id FROM sessions s WHERE id LIKE :p ESCAPE '\\' AND {seen} LIMIT 3", params | {"p": pattern}
        )
    ]
    if not found:
        raise NotFound(f"no session {to!r}; `peers` lists the live ones")
    if len(found) > 1:
        raise InvalidInput(f"{to!r} matches several sessions ({', '.join(found)}...); give more of the id")
    return found[0]


def _check_present(r: Reader, session_id: str) -> None:
    """A signal to a session that is gone would wait in an inbox nobody reads: say so instead."""
    row = r.one("SELECT ended_at, last_seen_at FROM sessions WHERE id = :id", {"id": session_id})
    if row is None:
        return  # its bookkeeping was never written (a full disk): nothing says it is gone
    silent_ms = now_ms() - int(row["last_seen_at"])
    if row["ended_at"] is not None or silent_ms > LIVE_WINDOW_MS:
        how = "ended" if row["ended_at"] is not None else "not heard from"
        raise NotFound(
            f"session {session_id} is gone ({how}, last seen {silent_ms / 60_000:.0f} min ago); it gets signals "
            "again if it reconnects. `peers` lists the live ones"
        )


def _me(prov: Provenance) -> str:
    if not prov.session_id:
        raise InvalidInput("signals need a session")
    return prov.session_id


def _check_body(body: str) -> None:
    if not body.strip() or len(body) > MAX_BODY_CHARS:
        raise InvalidInput(f"a signal is 1-{MAX_BODY_CHARS:,} characters")


def _send(
    w: Writer,
    prov: Provenance,
    kind: str,
    scope: str | None,
    body: str,
    recipients: list[str],
    reply_to: int | None,
    task: str | None,
) -> Sent:
    signal_id = w.insert(
        "INSERT INTO signals (sender, kind, scope, body, reply_to, task, created_at) "
        "VALUES (:sender, :kind, :scope, :body, :reply_to, :task, :now)",
        {"sender": _me(prov), "kind": kind, "scope": scope, "body": body, "reply_to": reply_to, "task": task,
         "now": now_ms()},
    )  # fmt: skip
    for recipient in recipients:
        w.execute(
            "INSERT INTO signal_deliveries (recipient, signal_id) VALUES (:r, :id)", {"r": recipient, "id": signal_id}
        )
    record_event(w, prov, f"signal.{kind}", {"id": signal_id, "to": recipients[:20], "count": len(recipients)})
    w.notify(CHANNEL, str(signal_id))  # wakes the waiters of every node at commit (PostgreSQL)
    return Sent(signal_id, tuple(recipients))


def _list(r: Reader, me: str, condition: str, limit: int, readable: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = r.rows(
        "SELECT s.id, s.sender, s.kind, s.scope, s.body, s.reply_to, s.task, s.created_at, d.read_at "
        f"FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id WHERE d.recipient = :me AND {condition} "
        f"AND {readable[0]} ORDER BY s.id LIMIT :limit",
        readable[1] | {"me": me, "limit": limit},
    )
    return [dict(row) for row in rows]
