"""A session's socket as the daemon writes to it: a client that stops reading its answers is dropped.

The transport already stops reading a session with MAX_IN_FLIGHT requests unanswered (server/transport.py),
so a client that never reads holds a bounded amount of the daemon's memory; but it would hold it for ever,
and its requests' results with it. Here each write must make progress within THREADLOOM_DAEMON_CLIENT_STALL_S:
the answer goes out in CHUNK_BYTES pieces, each given that long, and a client that takes none of a piece is
dropped with a line in the log. Its bridge reconnects (relay.py) and its session goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
from anyio.abc import ByteStream

log = logging.getLogger(__name__)
CHUNK_BYTES: Final = 64 * 1024


class StallGuard(ByteStream):
    def __init__(self, inner: ByteStream, stall_s: float, name: str, on_drop: Callable[[], None]) -> None:
        self._inner = inner
        self._stall_s = stall_s
        self._name = name
        self._on_drop = on_drop
        self.dropped = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._inner.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        if self.dropped:
            raise anyio.ClosedResourceError
        view = memoryview(item)
        for at in range(0, len(view), CHUNK_BYTES):
            try:
                with anyio.fail_after(self._stall_s):
                    await self._inner.send(item if len(item) <= CHUNK_BYTES else bytes(view[at : at + CHUNK_BYTES]))
            except TimeoutError:
                await self._drop(len(item) - at)
                raise anyio.BrokenResourceError from None

    async def _drop(self, waiting: int) -> None:
        self.dropped = True
        self._on_drop()
        log.warning(
            "dropped session %s: it read none of its answers for %.0f s (%d bytes of one waiting; "
            "THREADLOOM_DAEMON_CLIENT_STALL_S); it may reconnect",
            self._name,
            self._stall_s,
            waiting,
        )
        await self._inner.aclose()  # its reader ends too, and with it the session

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()
