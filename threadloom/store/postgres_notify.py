"""LISTEN/NOTIFY for the PostgreSQL store: how a write on one node wakes the waiters of every node.

A writer calls `Writer.notify` inside its transaction (`pg_notify`): PostgreSQL delivers the notification
to every listening session when, and only if, that transaction commits, so a woken waiter always finds
the row. Each serving process listens on one connection of its own, outside the pool (a pooled
connection would be handed to other work and stop listening). A lost connection is opened again with a
backoff, and its return counts as a notification: anything sent while it was down was missed, so the
waiters look again. https://www.postgresql.org/docs/16/sql-notify.html ,
https://www.psycopg.org/psycopg3/docs/advanced/async.html#asynchronous-notifications
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

_RECONNECT_MAX_S = 5.0


def notify(conn: psycopg.Connection[Any], channel: str, payload: str) -> None:
    """Queue a notification in the current transaction (sent at its commit)."""
    conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


class PgListener:
    """A `Listener` (store/base.py) on one channel, over a dedicated connection. `wait` is called from one
    thread at a time; `close` may come from another, and takes effect when that wait returns."""

    def __init__(self, url: str, channel: str, location: str) -> None:
        self._url = url
        self._channel = channel
        self._location = location
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = threading.Event()
        self._backoff = 0.0

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        return conn

    def wait(self, timeout: float) -> bool:
        if self._closed.is_set():
            self._drop()
            return False
        if self._conn is None:
            try:
                self._conn = self._connect()
            except psycopg.Error as exc:
                self._backoff = min(_RECONNECT_MAX_S, max(0.1, self._backoff * 2))
                log.warning("cannot listen on %s (%s); again in %.1f s", self._location, exc, self._backoff)
                self._closed.wait(min(timeout, self._backoff))
                return False
            self._backoff = 0.0
            return True  # (re)connected: notifications sent before now were not seen here
        try:
            got = any(True for _ in self._conn.notifies(timeout=timeout, stop_after=1))
            if got:  # several commits in a burst wake the waiters once
                for _ in self._conn.notifies(timeout=0.0):
                    pass
        except psycopg.Error as exc:
            log.warning("listening on %s stopped (%s); reconnecting", self._location, exc)
            self._drop()
            return True
        if self._closed.is_set():
            self._drop()
        return got

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._closed.set()
