"""Waiting for a signal without a polling loop per waiting agent.

Each serving process has one `SignalWaiters`. A send from this process wakes its waiters at once;
signals written by other processes (a CLI, another server) are noticed by one poller per process,
which asks the store for the newest signal id every 50 ms, and only while someone is waiting. So
ten waiting agents cost one indexed query per 50 ms, and none cost nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio

POLL_S: Final = 0.05
T = TypeVar("T")


class SignalWaiters:
    def __init__(self, latest_id: Callable[[], Awaitable[int]]) -> None:
        self._latest_id = latest_id
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
        """Background job: notice signals other processes wrote, while anyone here is waiting."""
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
