"""`threadloom watch`: the live stream of signals between agent sessions, for a person watching
several agents at once."""

from __future__ import annotations

import time
from functools import partial
from typing import Annotated

import typer

from threadloom.cli.app import out, settings
from threadloom.runtime import open_settings_store
from threadloom.store.base import Reader, Row

POLL_S = 0.5
MAX_LAST = 1_000_000  # SQLite takes 64-bit integers; a larger --last would overflow in the query


def _since(r: Reader, after: int, user: str) -> list[Row]:
    """Signals sent by or to a session of `user` (a person watches their own agents, nobody else's)."""
    mine = "SELECT id FROM sessions WHERE user = :u"
    return r.rows(
        "SELECT s.id, s.created_at, s.sender, s.kind, s.body, s.task, "
        "(SELECT group_concat(recipient, ', ') FROM signal_deliveries d WHERE d.signal_id = s.id) AS to_ "
        f"FROM signals s WHERE s.id > :a AND (s.sender IN ({mine}) OR EXISTS (SELECT 1 FROM signal_deliveries d "
        f"WHERE d.signal_id = s.id AND d.recipient IN ({mine}))) ORDER BY s.id LIMIT 500",
        {"a": after, "u": user},
    )


def watch(
    once: Annotated[bool, typer.Option("--once", help="Print what is there and exit.")] = False,
    last: Annotated[int, typer.Option(min=0, max=MAX_LAST, help="Start with this many earlier signals.")] = 20,
) -> None:
    """Show signals to and from your agents' sessions as they are sent: time, sender, kind, recipients and
    text (THREADLOOM_USER says whose). Ctrl-C stops."""
    s = settings()
    store = open_settings_store(s)
    try:
        after = int(store.read(lambda r: r.scalar("SELECT COALESCE(max(id), 0) FROM signals"))) - last
        while True:
            rows = store.read(partial(_since, after=after, user=s.user))
            for row in rows:
                at = time.strftime("%H:%M:%S", time.localtime(row["created_at"] / 1000))
                task = f" [{row['task']}]" if row["task"] else ""
                out.print(
                    f"{at} {row['sender']} -{row['kind']}-> {row['to_'] or '-'}{task}: {row['body']}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
                after = row["id"]
            if once:
                return
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
