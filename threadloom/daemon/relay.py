"""The bridge's relay: JSON-RPC lines between the agent (stdio) and the daemon (socket), across daemon restarts.

Standard library only. It reads each line's envelope and no more, so that when the daemon goes away
(kill -9, an OOM kill, an upgrade, `daemon stop`) the agent's session goes on. It connects again, to
a fresh daemon it starts if need be, asking for the same session id (the daemon gave it in `welcome`):
at once when requests were in flight or the daemon died (it left its socket), else when the agent next
sends. It replays the agent's own `initialize` (and `notifications/initialized`) and keeps the answer:
the agent never initializes twice. A request in flight is sent again, once, when that is safe
(read-only MCP methods; tools a `tools/list` answer marked read-only or idempotent); any other is
answered at once, a tool error `{"error": "...restarted during this call; retry it", "retryable":
true}` for `tools/call`, a JSON-RPC error otherwise: the agent sees at most one slow call.
Reconnecting is bounded (`RECONNECT_TIMEOUT_S`, `MAX_RECONNECTS` a minute); past that, what is in
flight is answered, one line on stderr says why, and the bridge exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadloom.daemon import jsonrpc

RECONNECT_TIMEOUT_S = 20.0
MAX_RECONNECTS = 10  # in RECONNECT_WINDOW_S: a daemon that keeps dying is not chased forever
RECONNECT_WINDOW_S = 60.0
OUTBOX_LINES, OUTBOX_BYTES = 64, 32 * 1024 * 1024  # read from the agent, not yet sent: past either, stdin waits
RESTARTED = "the threadloom daemon restarted during this call; retry it"
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
# An answer as the daemon writes one (pydantic and json.dumps both put `jsonrpc` then `id` first).
_ANSWER = re.compile(rb'^\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)":')

# (socket, bytes that followed the greeting, session id) for a session id to resume and a timeout.
Connect = Callable[[str | None, float], tuple[socket.socket, bytes, str | None]]


class RelayError(Exception):
    """Why the bridge cannot serve the session (any more): shown to the user as it is."""


@dataclass
class _Request:
    id: str | int
    method: str
    tool: str | None
    line: bytes
    retried: bool = False


@dataclass
class _Line:
    data: bytes
    key: str | None = None  # the request's id as JSON, when the line is a request
    request: _Request | None = None


_END = _Line(b"")  # the agent closed its stdin


class Relay:
    def __init__(
        self, connect: Connect, socket_path: Path, sock: socket.socket, pending: bytes, session: str | None
    ) -> None:
        self._connect = connect
        self._socket_path = socket_path
        self._sock: socket.socket | None = sock
        self._pending = pending
        self._session = session
        self._cond = threading.Condition()
        self._stdout = threading.Lock()
        self._outbox: deque[_Line] = deque()
        self._in_flight: dict[str, _Request] = {}
        self._safe_tools: set[str] = set()
        self._init: _Request | None = None
        self._init_params: Any = None
        self._init_answered = False
        self._initialized = False
        self._agent_done = False
        self._sending = False
        self._fatal: str | None = None
        self._reconnects: list[float] = []

    def run(self) -> int:
        threading.Thread(target=self._read_agent, daemon=True, name="agent-to-daemon").start()
        threading.Thread(target=self._send, daemon=True, name="send-to-daemon").start()
        sock, rest = self._sock, self._pending
        while sock is not None:
            self._pump(sock, rest)
            with self._cond:
                if self._sock is sock:
                    self._sock = None
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a send blocked on it
                while self._sending:
                    self._cond.wait()
                sock.close()
                lost = self._settle_lost()
            for answer in lost:
                self._write_out(answer)
            died = self._socket_path.exists()  # a killed daemon leaves its socket; a stopped one does not
            with self._cond:
                while not (self._agent_done or self._fatal or self._in_flight or self._outbox or died):
                    self._cond.wait()
                if self._fatal:
                    print(f"threadloom: {self._fatal}", file=sys.stderr)
                    return 1
                if self._agent_done:
                    return 0
            try:
                sock, rest = self._reconnect()
            except RelayError as exc:
                self._give_up(str(exc))
                return 1
        return 0

    # The agent's side.

    def _read_agent(self) -> None:
        buffer, scanned = bytearray(), 0
        with contextlib.suppress(OSError):
            while data := os.read(0, 65536):
                buffer += data
                while (at := buffer.find(b"\n", scanned)) >= 0:
                    self._from_agent(bytes(buffer[: at + 1]))
                    del buffer[: at + 1]
                    scanned = 0
                scanned = len(buffer)
                if len(buffer) > jsonrpc.MAX_MESSAGE_BYTES:
                    buffer = self._skip_oversized(buffer)
                    scanned = 0
        if buffer.strip():
            self._from_agent(bytes(buffer) + b"\n")
        with self._cond:
            self._agent_done = True  # said before the daemon can answer the end of input with its own
        self._enqueue(_END)

    def _skip_oversized(self, buffer: bytearray) -> bytearray:
        """Answer a line over the limit (never sent, never held whole); what followed it is returned."""
        head, tail, size, rest = jsonrpc.skip_line(bytes(buffer), 0)
        refusal = jsonrpc.oversized(head, tail, size)
        if refusal is None:
            with self._cond:
                self._fatal = f"a {size:,}-byte message is over the limit and its id could not be found to answer it"
                if self._sock is not None:
                    with contextlib.suppress(OSError):
                        self._sock.shutdown(socket.SHUT_RDWR)
                self._cond.notify_all()
        else:
            for reply in refusal.replies:
                self._write_out(reply)
        return bytearray(rest)

    def _from_agent(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            message = None  # the daemon answers what it cannot read
        line = _Line(data)
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            method = message["method"]
            if "id" in message and jsonrpc.valid_id(message["id"]):
                params = message.get("params")
                tool = params.get("name") if isinstance(params, dict) and method == "tools/call" else None
                line.key = json.dumps(message["id"])
                line.request = _Request(message["id"], method, tool if isinstance(tool, str) else None, data)
                if method == "initialize":
                    with self._cond:
                        self._init, self._init_params, self._init_answered = line.request, params, False
            elif method == "notifications/initialized":
                self._initialized = True
            elif method == "notifications/cancelled" and isinstance(message.get("params"), dict):
                with self._cond:
                    self._in_flight.pop(json.dumps(message["params"].get("requestId")), None)
        self._enqueue(line)

    def _enqueue(self, line: _Line) -> None:
        with self._cond:
            while self._outbox and not self._fatal and self._outbox_full():
                self._cond.wait()
            self._outbox.append(line)
            self._cond.notify_all()

    def _outbox_full(self) -> bool:
        return len(self._outbox) >= OUTBOX_LINES or sum(len(ln.data) for ln in self._outbox) >= OUTBOX_BYTES

    def _write_out(self, data: bytes) -> bool:
        with self._stdout:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(1, view) :]
            except OSError:  # the agent is gone
                with self._cond:
                    self._agent_done = True
                    self._cond.notify_all()
                return False
        return True

    # The daemon's side.

    def _send(self) -> None:
        """Lines from the outbox to the daemon, in order, only while connected (one thread sends)."""
        while True:
            with self._cond:
                while not (self._outbox and self._sock is not None):
                    self._cond.wait()
                line, sock = self._outbox.popleft(), self._sock
                if line.request is not None and line.key is not None:
                    self._in_flight[line.key] = line.request
                self._sending = True
                self._cond.notify_all()
            sent = 0
            try:
                if line is _END:
                    sock.shutdown(socket.SHUT_WR)
                    return
                view = memoryview(line.data)
                while sent < len(view):
                    sent += sock.send(view[sent:])
            except OSError:
                with self._cond:
                    if sent == 0:  # it never reached the daemon: the next one gets it, as it is
                        if line.key is not None:
                            self._in_flight.pop(line.key, None)
                        self._outbox.appendleft(line)
                    # else part of it may have been read: it is in flight, and settled as such
                    if self._sock is sock:
                        self._sock = None
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
            finally:
                with self._cond:
                    self._sending = False  # what is in flight is settled only once no send is under way
                    self._cond.notify_all()

    def _pump(self, sock: socket.socket, rest: bytes) -> None:
        """The daemon's lines to the agent, whole lines only, until the connection ends."""
        buffer = bytearray()
        chunk = rest
        while True:
            at = chunk.rfind(b"\n")
            if at >= 0:
                end = len(buffer) + at + 1
                buffer += chunk
                region = bytes(buffer[:end])
                del buffer[:end]
                self._note_answers(region)
                if not self._write_out(region):
                    return
            else:
                buffer += chunk
            try:
                chunk = sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return

    def _note_answers(self, region: bytes) -> None:
        for line in region.split(b"\n"):
            match = _ANSWER.match(line)
            if match is None:
                continue
            with self._cond:
                request = self._in_flight.pop(json.dumps(json.loads(match.group(1))), None)
                if request is not None and request is self._init:
                    self._init_answered = True
                self._cond.notify_all()
            if request is not None and request.method == "tools/list":
                self._learn_tools(line)

    def _learn_tools(self, line: bytes) -> None:
        """Which tools may be sent again after a restart: those the server marks read-only or idempotent."""
        try:
            tools = json.loads(line)["result"]["tools"]
        except (ValueError, KeyError, TypeError):
            return
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            notes = tool.get("annotations") or {}
            if isinstance(notes, dict):
                if notes.get("readOnlyHint") or notes.get("idempotentHint"):
                    self._safe_tools.add(tool["name"])
                else:
                    self._safe_tools.discard(tool["name"])

    # Reconnecting.

    def _reconnect(self) -> tuple[socket.socket, bytes]:
        now = time.monotonic()
        self._reconnects = [t for t in self._reconnects if now - t < RECONNECT_WINDOW_S] + [now]
        if len(self._reconnects) > MAX_RECONNECTS:
            raise RelayError(f"the daemon went away {len(self._reconnects)} times in {RECONNECT_WINDOW_S:.0f}s")
        deadline = now + RECONNECT_TIMEOUT_S
        sock, rest, session = self._connect(self._session, RECONNECT_TIMEOUT_S)
        self._session = session or self._session
        rest = self._replay_handshake(sock, rest, deadline)
        with self._cond:  # what was in flight and is safe to send again goes first
            again = [_Line(r.line, key, r) for key, r in self._in_flight.items()]
            self._in_flight.clear()
            for line in again:
                assert line.request is not None
                line.request.retried = True
            self._outbox.extendleft(reversed(again))
            self._sock = sock
            self._cond.notify_all()
        return sock, rest

    def _settle_lost(self) -> list[bytes]:
        """With the lock held, once the daemon is gone: the answers to the requests it took with it that
        cannot be sent again (given at once, so the agent may retry while the daemon restarts)."""
        answers = []
        for key, request in list(self._in_flight.items()):
            if not self._safe_to_resend(request):
                del self._in_flight[key]
                answers.append(jsonrpc.lost_answer(request.id, request.method, RESTARTED))
        return answers

    def _safe_to_resend(self, request: _Request) -> bool:
        if request.retried:
            return False
        if request.method == "initialize" or request.method in jsonrpc.READ_ONLY_METHODS:
            return True
        return request.method == "tools/call" and request.tool in self._safe_tools

    def _replay_handshake(self, sock: socket.socket, rest: bytes, deadline: float) -> bytes:
        """The agent's `initialize`, replayed to a new daemon, whose answer the agent never sees."""
        with self._cond:
            if not self._init_answered:
                return rest  # nothing to replay: the agent's own initialize is yet to be sent, or sent again
            replay_id = f"threadloom-bridge-replay-{len(self._reconnects)}"
            message = {"jsonrpc": "2.0", "id": replay_id, "method": "initialize", "params": self._init_params}
        buffer = bytearray(rest)
        try:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(jsonrpc.encode(message))
            while True:
                at = buffer.find(b"\n")
                if at < 0:
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise RelayError("the new daemon closed the session during the MCP handshake")
                    buffer += chunk
                    continue
                line = bytes(buffer[:at])
                del buffer[: at + 1]
                with contextlib.suppress(ValueError):
                    reply = json.loads(line)
                    if isinstance(reply, dict) and reply.get("id") == replay_id:
                        if "error" in reply:
                            raise RelayError(f"the new daemon refused the MCP handshake: {reply['error']}")
                        break
            if self._initialized:
                sock.sendall(INITIALIZED)
            sock.settimeout(None)
        except OSError as exc:
            sock.close()
            raise RelayError(f"the new daemon did not complete the MCP handshake ({exc})") from None
        return bytes(buffer)

    def _give_up(self, reason: str) -> None:
        with self._cond:
            stale = list(self._in_flight.values()) + [ln.request for ln in self._outbox if ln.request is not None]
            self._in_flight.clear()
            self._outbox.clear()
            self._fatal = reason
            self._cond.notify_all()
        first, _, more = reason.partition("\n")
        for request in stale:
            self._write_out(
                jsonrpc.lost_answer(
                    request.id, request.method, f"the threadloom daemon is gone and could not be restarted: {first}"
                )
            )
        if more:
            print(more, file=sys.stderr)
        print(
            f"threadloom: lost the daemon and could not reconnect within {RECONNECT_TIMEOUT_S:.0f}s: {first} "
            "(restart the MCP server)",
            file=sys.stderr,
        )
