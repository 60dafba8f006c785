"""Bounds on what HTTP clients can hold before they have even sent a request: time, connections, log.

uvicorn reads headers for as long as a client cares to send them, accepts until the process runs
out of open files, and then logs every failed accept with its traceback (about 20,000 half-sent
requests made the server unreachable while its log grew by megabytes a second). Here:

- a request's headers must arrive within THREADLOOM_HTTP_HEADER_TIMEOUT seconds of the connection
  opening (or of the previous response), however slowly they trickle;
- the server holds at most `max_connections` connections, kept well under the open-file limit;
  past it, the connection that has waited longest without a request in progress is closed to make
  room, and only when every connection is busy is the newcomer turned away;
- each log message passes at most a few times a minute, the rest are counted and summed up.

The token is checked as soon as the headers are complete (the outermost ASGI gate), so none of
this waits on the application.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from threadloom.config import Settings

log = logging.getLogger(__name__)

HEADER_BYTES = 16 * 1024  # h11's own default, stated: larger headers get 431
DROP_BYTES = 4 * 1024 * 1024  # after a request h11 refused: read and dropped before the connection is closed
DROP_QUIET_S = 1.0  # ... or once the client has sent nothing for this long
PROTOCOL_ERRORS = {
    400: "malformed HTTP request: a header holds a character HTTP does not allow (a NUL or another control "
    "character), or a line is not HTTP; check what the client sends",
    431: f"the request's headers are over {HEADER_BYTES:,} bytes; an access token and the headers this server "
    "reads are far shorter: check what the client sends",
    501: "the request's Transfer-Encoding is not supported (send a Content-Length, or chunked alone)",
}
OPEN_FILE_RESERVE = 64  # the store, the log, threads, pipes
MAX_BACKLOG = 2048  # uvicorn's default
LOG_PER_MINUTE = 5


@dataclass(frozen=True)
class Limits:
    max_connections: int
    header_timeout: float
    backlog: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """Connections and the backlog sized so that no accept fails for want of an open file, and so that
        a real client's request is read before the newcomers after it could push its connection out.

        asyncio accepts up to `backlog` connections a loop pass and looks at each two passes later, and
        reads it the pass after; a connection closed to make room holds its file one pass more. So
        under a flood about three backlogs arrive while one connection waits to be read, and as many
        files are in flight beside the connections held. (Measured under a 1,024-file limit: a backlog
        of 480 still ran out of files; with 2,048 and 256 connections, real clients were pushed out.)
        """
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        files = 1 << 20 if soft == resource.RLIM_INFINITY else soft - OPEN_FILE_RESERVE
        connections = max(8, min(settings.http_max_connections, files * 2 // 5))
        return cls(
            max_connections=connections,
            header_timeout=settings.http_header_timeout,
            backlog=max(4, min(MAX_BACKLOG, connections // 4)),
        )

    def uvicorn_options(self) -> dict[str, Any]:
        return {
            "http": guarded_protocol(ConnectionGuard(self)),
            "backlog": self.backlog,
            "limit_concurrency": self.max_connections + 1,  # our guard sheds first; this bounds tasks too
            "timeout_keep_alive": 5,
            "h11_max_incomplete_event_size": HEADER_BYTES,
            "ws": "none",  # MCP is plain HTTP; an upgrade request is served (and refused) as one
            "proxy_headers": False,  # no proxy in front: X-Forwarded-* from a client is not its address
            "access_log": False,
            "log_config": None,  # uvicorn's loggers propagate to ours, and through its filter
        }


class ConnectionGuard:
    """The connections that have no request in progress, oldest first: the ones to close when full."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._idle: dict[H11Protocol, None] = {}

    def admit(self, proto: H11Protocol, open_now: int) -> None:
        if open_now <= self.limits.max_connections:
            return
        while self._idle:  # oldest first; one already closing frees nothing, and is dropped from the list
            victim = next(iter(self._idle))
            del self._idle[victim]
            if victim is not proto and not victim.transport.is_closing():
                log.warning(
                    "HTTP connection limit (%d) reached: closing the connection idle longest",
                    self.limits.max_connections,
                )
                victim.transport.close()
                return
        log.warning("HTTP connection limit (%d) reached, all busy: refusing a new one", self.limits.max_connections)
        proto.transport.close()

    def idle(self, proto: H11Protocol) -> None:
        self._idle.setdefault(proto)

    def busy(self, proto: H11Protocol) -> None:
        self._idle.pop(proto, None)


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline on headers and a cap on connections."""

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _dropping: int | None = None  # bytes read and dropped after a protocol error, None before one
        _drop_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            guard.admit(self, len(self.connections))
            self._watch()

        def data_received(self, data: bytes) -> None:
            if self._dropping is not None:
                self._drop(len(data))
                return
            super().data_received(data)
            self._watch()

        def send_400_response(self, msg: str) -> None:
            """h11 refused what the client sent (headers over HEADER_BYTES, a NUL in a header, not HTTP at all):
            said like every other refusal, `{error, retryable}` in JSON, not uvicorn's plain text; then what
            the client still sends is read and dropped (up to DROP_BYTES, until it pauses), so a client that
            writes its whole request before reading gets this answer, not a reset connection."""
            exc = sys.exc_info()[1]
            status = exc.error_status_hint if isinstance(exc, h11.ProtocolError) else 400
            said = json.dumps({"error": PROTOCOL_ERRORS.get(status, PROTOCOL_ERRORS[400]), "retryable": False}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(said)).encode()),
                (b"connection", b"close"),
            ]
            started = h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
            for event in (started, h11.Data(data=said)):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
            self._stop_deadline()
            self._dropping = 0
            self._drop(0)

        def _drop(self, size: int) -> None:
            assert self._dropping is not None
            self._dropping += size
            if self._drop_timer is not None:
                self._drop_timer.cancel()
                self._drop_timer = None
            if self._dropping > DROP_BYTES or self.transport.is_closing():
                self.transport.close()
                return
            self._drop_timer = self.loop.call_later(DROP_QUIET_S, self.transport.close)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_deadline()
            if self._drop_timer is not None:
                self._drop_timer.cancel()
            guard.busy(self)
            super().connection_lost(exc)

        def _awaiting_request(self) -> bool:
            # Before a request's headers are complete, and after its response: the client owes us bytes.
            return self.cycle is None or bool(self.cycle.response_complete)

        def _watch(self) -> None:
            if self.transport.is_closing():
                return
            if not self._awaiting_request():
                guard.busy(self)
                self._stop_deadline()
            elif self._deadline is None:  # counted from when the wait began, not from the last byte
                guard.idle(self)
                self._deadline = self.loop.call_later(guard.limits.header_timeout, self._expire)

        def _expire(self) -> None:
            self._deadline = None
            if self._awaiting_request() and not self.transport.is_closing():
                log.info("closing an HTTP connection that sent no complete request in %ss", guard.limits.header_timeout)
                guard.busy(self)
                self.transport.close()

        def _stop_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

    return GuardedH11Protocol


class LogRateLimit(logging.Filter):
    """Passes each message (logger and format) at most `per_minute` times a minute.

    The first one let through after a quiet spell says how many were held back.
    """

    def __init__(self, per_minute: int = LOG_PER_MINUTE, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._per_minute = per_minute
        self._clock = clock
        self._windows: dict[tuple[str, str], list[float]] = {}  # key -> [window start, passed, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = self._clock()
        window = self._windows.get(key)
        if window is None or now - window[0] >= 60:
            held = int(window[2]) if window else 0
            if len(self._windows) >= 256:  # bounded: forget quiet messages, or all if none is quiet
                self._windows = {k: w for k, w in self._windows.items() if now - w[0] < 60}
                if len(self._windows) >= 256:
                    self._windows.clear()
            self._windows[key] = [now, 1, 0]
            if held:
                record.msg = f"{record.msg} [{held} more like this in the minute before were not logged]"
            return True
        if window[1] < self._per_minute:
            window[1] += 1
            return True
        window[2] += 1
        return False


def bound_logs() -> None:
    """Every handler of the root logger (where uvicorn's and asyncio's records end up) gets the rate limit."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    for handler in root.handlers:
        if not any(isinstance(f, LogRateLimit) for f in handler.filters):
            handler.addFilter(LogRateLimit())
