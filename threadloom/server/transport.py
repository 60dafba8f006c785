"""Serving one MCP connection: over this process's stdio, or over a daemon socket stream.

Both read newline-delimited JSON-RPC through one `LineReader` and `serve_lines`: a line the SDK
cannot take is answered here (`daemon/jsonrpc.py`), a line over the size limit is skipped and
answered, and a session is read only while it has fewer than `MAX_IN_FLIGHT` requests unanswered.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from anyio.abc import ByteReceiveStream, ByteSendStream, ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.runner import serve_dual_era_loop
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from threadloom.daemon import jsonrpc
from threadloom.errors import InvalidInput
from threadloom.identity import parent_session_from, project_root, session_id_from
from threadloom.server.app import ThreadloomServer, toolset_for
from threadloom.server.connection import ConnectionState
from threadloom.server.envelope import read_message

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = jsonrpc.MAX_MESSAGE_BYTES
# Requests of one session being worked on or waiting for their answer to be read. Agents make a few calls
# at once; a session at the limit is not read until one is answered and its answer taken.
MAX_IN_FLIGHT = 32
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024  # of request lines: a few messages at the size limit
LOGGED_REFUSALS = 5  # per session: a client sending garbage in a loop must not fill the log
MAX_LOG_CHARS = 2000
BEFORE_INIT = "this session has not begun: send initialize first (then notifications/initialized)"
DRAIN_S = 10.0  # how long the answers to a session's last requests are awaited once it has closed its side


def open_connection(
    server: ThreadloomServer,
    *,
    transport: str,
    env: Mapping[str, str],
    cwd: str,
    pid: int | None,
    session_hint: str | None = None,
) -> ConnectionState:
    """One connection's state with every per-session setting checked now, so that a bad one refuses the
    session at its start with one line (ThreadloomError), not each call later."""
    toolset = check_session_settings(server, env)
    state = ConnectionState(runtime=server.runtime, transport=transport, env=env, cwd=cwd, pid=pid, toolset=toolset)
    state.identity()
    try:
        state.session_id_hint = session_id_from(env.get("THREADLOOM_SESSION_ID") or session_hint)
    except InvalidInput as exc:
        source = "THREADLOOM_SESSION_ID" if env.get("THREADLOOM_SESSION_ID") else "the bridge's session id"
        raise InvalidInput(f"{source}: {exc.message}") from None
    if env.get("THREADLOOM_ROOT"):
        project_root(env, [], cwd)
    return state


def check_session_settings(server: ThreadloomServer, env: Mapping[str, str]) -> frozenset[str]:
    """The per-session settings a client names (toolset, session id, parent), checked; the session's tools."""
    toolset = toolset_for(server, env)
    if env.get("THREADLOOM_SESSION_ID"):
        try:
            session_id_from(env["THREADLOOM_SESSION_ID"])
        except InvalidInput as exc:
            raise InvalidInput(f"THREADLOOM_SESSION_ID: {exc.message}") from None
    parent_session_from(env.get("THREADLOOM_PARENT_SESSION"))
    return toolset


async def _serve(server: ThreadloomServer, read_stream: object, write_stream: object, state: ConnectionState) -> None:
    lowlevel = server.lowlevel
    try:
        await serve_dual_era_loop(
            lowlevel,
            read_stream,  # type: ignore[arg-type]
            write_stream,  # type: ignore[arg-type]
            lifespan_state=state,
            init_options=server.initialization_options(state.toolset),
        )
    finally:
        with anyio.CancelScope(shield=True):
            await state.end()


@dataclass(frozen=True)
class Oversized:
    """A line over the limit, of which only both ends were kept."""

    head: bytes
    tail: bytes
    size: int


class LineReader:
    """Newline-delimited messages from a byte stream; a line over `limit` is skipped, never held whole."""

    def __init__(self, stream: ByteReceiveStream, pending: bytes = b"", limit: int = MAX_MESSAGE_BYTES) -> None:
        self._stream = stream
        self._buffer = bytearray(pending)
        self._scanned = 0
        self._limit = limit

    async def next(self) -> bytes | Oversized | None:
        """The next line without its newline, or None at the end of the stream."""
        while True:
            at = self._buffer.find(b"\n", self._scanned)
            if at >= 0:
                line = bytes(self._buffer[:at])
                del self._buffer[: at + 1]
                self._scanned = 0
                if len(line) > self._limit:
                    window = jsonrpc.WINDOW_BYTES
                    return Oversized(line[:window], line[-window:], len(line))
                return line
            self._scanned = len(self._buffer)
            if len(self._buffer) > self._limit:
                return await self._skip_line()
            chunk = await self._receive()
            if chunk is None:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            self._buffer += chunk

    async def _skip_line(self) -> Oversized:
        window = jsonrpc.WINDOW_BYTES
        head, tail, size = bytes(self._buffer[:window]), bytes(self._buffer[-window:]), len(self._buffer)
        self._buffer, self._scanned = bytearray(), 0
        while (chunk := await self._receive()) is not None:
            at = chunk.find(b"\n")
            if at >= 0:
                self._buffer += chunk[at + 1 :]
                return Oversized(head, (tail + chunk[:at])[-window:], size + at)
            tail, size = (tail + chunk)[-window:], size + len(chunk)
        return Oversized(head, tail, size)

    async def _receive(self) -> bytes | None:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return None


class _InFlight:
    """The requests a session sent that have not been answered yet. At `MAX_IN_FLIGHT` of them, or
    `MAX_IN_FLIGHT_BYTES` of their lines, its next request waits (and with it, everything behind it in
    its own stream), so a session that never reads its answers holds a bounded amount of memory and work
    and pauses alone, never the others. A request alone is always admitted."""

    def __init__(self, count: int, size: int) -> None:
        self._count, self._size = count, size
        self._ids: dict[str | int, list[int]] = {}  # the sizes of the requests in flight under each id
        self._n = self._bytes = 0
        self._changed = anyio.Event()

    async def admit(self, request_id: str | int, size: int) -> None:
        while self._n and (self._n >= self._count or self._bytes + size > self._size):
            await self._changed.wait()
        self._ids.setdefault(request_id, []).append(size)
        self._n, self._bytes = self._n + 1, self._bytes + size

    def settle(self, request_id: object) -> None:
        if not isinstance(request_id, str | int) or request_id not in self._ids:
            return
        size = self._ids[request_id].pop()
        if not self._ids[request_id]:
            del self._ids[request_id]
        self._n, self._bytes = self._n - 1, self._bytes - size
        self._changed.set()
        self._changed = anyio.Event()

    async def drain(self, seconds: float, reading: Callable[[], bool]) -> None:
        """Wait (up to `seconds`) until every request is answered while the peer still reads: a client may
        close its side right after its last request, and still read the answer."""
        with anyio.move_on_after(seconds):
            while self._ids and reading():
                await anyio.sleep(0.01)


class _Output:
    """Whole lines to the peer, one at a time (the SDK's answers and the transport's own)."""

    def __init__(self, stream: ByteSendStream) -> None:
        self._stream = stream
        self._lock = anyio.Lock()
        self.open = True

    async def send(self, data: bytes) -> None:
        async with self._lock:
            if not self.open:
                return
            try:
                await self._stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self.open = False


async def serve_lines(
    server: ThreadloomServer, reader: LineReader, writer: ByteSendStream, state: ConnectionState
) -> None:
    """Serve one MCP session over newline-delimited JSON-RPC until the peer closes its side."""
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    output, in_flight, refusals = _Output(writer), _InFlight(MAX_IN_FLIGHT, MAX_IN_FLIGHT_BYTES), [0]
    # The SDK answers a second `initialize` under the first one's id, leaving it unanswered: the transport
    # answers it, with the first one's result once there is one.
    handshake: dict[str, Any] = {}

    async def refuse(refusal: jsonrpc.Refusal, line: bytes | None) -> None:
        refusals[0] += 1
        if refusals[0] <= LOGGED_REFUSALS:
            shown = f": {jsonrpc.excerpt(line)}" if line is not None else ""
            log.warning("refused a message (%s)%s", refusal.reason, shown)
            if refusals[0] == LOGGED_REFUSALS:
                log.warning("this session's further refused messages are not logged")
        for reply in refusal.replies:
            await output.send(reply)

    async def pump_in() -> None:
        async with read_writer:
            await read_lines()
            await in_flight.drain(DRAIN_S, lambda: output.open)

    async def read_lines() -> None:
        while (line := await reader.next()) is not None:
            if isinstance(line, Oversized):
                refusal = jsonrpc.oversized(line.head, line.tail, line.size)
                if refusal is None:
                    log.warning(
                        "closing a session: a %d-byte message over the limit, whose id could not be found "
                        "to answer it: %s",
                        line.size,
                        jsonrpc.excerpt(line.head),
                    )
                    return
                await refuse(refusal, None)
                continue
            if not line.strip():
                continue
            message = read_message(line)
            if isinstance(message, jsonrpc.Refusal):
                await refuse(message, line)
                continue
            if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                if "id" in handshake:
                    await output.send(_initialized_already(message.id, handshake.get("result")))
                    continue
                handshake["id"] = message.id
            elif isinstance(message, types.JSONRPCRequest) and "id" not in handshake and message.method != "ping":
                # The SDK's answer would be "Invalid request parameters", of a request whose params are fine.
                answer = jsonrpc.error_line(message.id, jsonrpc.INVALID_REQUEST, BEFORE_INIT)
                await refuse(jsonrpc.Refusal(BEFORE_INIT, [answer]), line)
                continue
            if isinstance(message, types.JSONRPCRequest):
                await in_flight.admit(message.id, len(line))
            elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                in_flight.settle((message.params or {}).get("requestId"))
            await read_writer.send(SessionMessage(message))

    async def pump_out() -> None:
        async with write_reader:
            async for message in write_reader:
                answer = message.message
                if isinstance(answer, types.JSONRPCResponse) and answer.id == handshake.get("id"):
                    handshake.setdefault("result", answer.result)  # before the client can send another
                await output.send(answer.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                if isinstance(answer, types.JSONRPCResponse | types.JSONRPCError):
                    in_flight.settle(answer.id)
                if not output.open:
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        await _serve(server, read_stream, write_stream, state)
        tg.cancel_scope.cancel()


def _initialized_already(request_id: str | int, result: dict[str, Any] | None) -> bytes:
    if result is None:
        return jsonrpc.error_line(request_id, jsonrpc.INVALID_REQUEST, "initialize is already under way")
    return jsonrpc.encode({"jsonrpc": "2.0", "id": request_id, "result": result})


async def serve_stream(
    server: ThreadloomServer, stream: ByteStream, state: ConnectionState, buffered: BufferedByteReceiveStream
) -> None:
    """Serve a daemon socket stream, after its greeting (`buffered` may hold what followed it)."""
    await serve_lines(server, LineReader(stream, buffered.buffer), stream, state)


class _Stdio(ByteStream):
    """This process's stdin and stdout as one byte stream. While it serves, fd 0 reads /dev/null and fd 1
    writes to stderr, so nothing else (a child, a stray print) reads or writes the protocol's channel.
    stdin is read by a daemon thread, which never keeps the process from exiting."""

    def __init__(self) -> None:
        self._in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self._out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        self._writes = anyio.CapacityLimiter(1)
        self._chunks_in, self._chunks = anyio.create_memory_object_stream[bytes](4)
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._read, args=(token,), daemon=True, name="stdin").start()

    def _read(self, token: anyio.lowlevel.EventLoopToken) -> None:
        with contextlib.suppress(OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            while True:
                data = os.read(self._in, 65536)
                anyio.from_thread.run(self._chunks_in.send, data, token=token)
                if not data:
                    return

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._chunks.receive()
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.to_thread.run_sync(_write_all, self._out, item, limiter=self._writes, abandon_on_cancel=True)

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        self._chunks.close()
        os.dup2(self._in, 0)
        os.dup2(self._out, 1)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def serve_stdio(server: ThreadloomServer, state: ConnectionState) -> None:
    stdio = _Stdio()
    try:
        await serve_lines(server, LineReader(stdio), stdio, state)
    finally:
        await stdio.aclose()


class BoundedRecords(logging.Filter):
    """Caps what one log record may hold: a message or a traceback quoting an argument of megabytes
    must not copy it into the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if len(message) > MAX_LOG_CHARS:
            record.msg, record.args = f"{message[:MAX_LOG_CHARS]}... ({len(message):,} characters in all)", None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            # The end of a traceback says what failed; a line of it may quote an argument whole.
            lines = [ln[:MAX_LOG_CHARS] + ("..." if len(ln) > MAX_LOG_CHARS else "") for ln in text.splitlines()]
            record.exc_text = "\n".join(lines[-40:])
        return True


def bound_log_records() -> None:
    """Every handler of the root logger (where every record ends up) gets the cap."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, BoundedRecords) for f in handler.filters):
            handler.addFilter(BoundedRecords())
