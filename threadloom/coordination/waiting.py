"""Waiting for a signal without a polling loop per waiting agent.

Each serving process has one `SignalWaiters`. A send from this process wakes its waiters at once.
Signals written by other processes (a CLI, another server, another node) arrive by the store's
notifications where it has them (PostgreSQL's LISTEN/NOTIFY: one listening connection per process,
woken at the sender's commit; store/postgres_notify.py). Otherwise one poller per process asks the
store for the newest signal id every 50 ms, and only while someone is waiting: ten waiting agents cost
one indexed query per 50 ms, and none cost nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio
import anyio.to_thread

from threadloom.store.base import Listener

POLL_S: Final = 0.05
LISTEN_WAIT_S: Final = 1.0  # how long one blocking wait lasts: a closed listener is let go within this
CHANNEL: Final = "threadloom_signals"  # what a signal's write notifies (coordination/signals.py)
T = TypeVar("T")


class SignalWaiters:
    def __init__(
        self, latest_id: Callable[[], Awaitable[int]], listen: Callable[[], Listener | None] = lambda: None
    ) -> None:
        self._latest_id = latest_id
        self._listen = listen
        self._changed = anyio.Event()
        self._waiting = 0
        self._seen = -1

    def notify(self) -> None:
        """Wake every waiter of this process (something may have arrived for them)."""
        fired, self._changed = self._changed, anyio.Event()
        fired.set()

    async def until(self, check: Callable[[], Awaitable[T | None]], timeout: float) -> T | None:
        """Run `check` now and after every wake-up until it returns something, or `timeout` passes."""
        deadline = anyio.current_time() + timeout
        self._waiting += 1
        try:
            while True:
                changed = self._changed  # taken before checking, so a wake-up in between is not lost
                found = await check()
                if found is not None:
                    return found
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    return None
                with anyio.move_on_after(remaining):
                    await changed.wait()
        finally:
            self._waiting -= 1

    async def poll(self) -> None:
        """Background job: notice signals other processes wrote, by notification where the store has them,
        else by polling while anyone here is waiting."""
        listener = self._listen()
        if listener is None:
            await self._poll_store()
            return
        try:
            while True:
                if await anyio.to_thread.run_sync(listener.wait, LISTEN_WAIT_S, abandon_on_cancel=True):
                    self.notify()
        finally:
            listener.close()

    async def _poll_store(self) -> None:
        while True:
            await anyio.sleep(POLL_S)
            if not self._waiting:
                self._seen = -1
                continue
            latest = await self._latest_id()
            if latest != self._seen:  # on the first poll too: a signal may have come before it
                self._seen = latest
                self.notify()

    @property
    def waiting(self) -> int:
        return self._waiting
