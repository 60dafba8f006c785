"""The daemon: one per OS user and home, holding the store, the MCP server and background work.

Exactly one runs per home: it holds an exclusive lock on `daemon.lock` for as
long as it owns the socket. A candidate that cannot take the lock exits at
once, which is what makes concurrent start-up by many bridges race-free. It
retires (stops listening, releases the lock, exits when its sessions end) when
idle past the timeout, when stopped, or when a newer bridge arrives.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import time
from typing import Any

import anyio
from anyio.abc import SocketListener, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from threadloom import __version__
from threadloom.config import Settings, configure_logging, load_settings
from threadloom.daemon import guard, ingest_job, logs, probe_job, protocol, style_job
from threadloom.daemon.consolidate_job import keep_consolidating
from threadloom.daemon.curator_job import keep_curating
from threadloom.daemon.evolve_job import keep_reviewing
from threadloom.daemon.hook_op import hook_op
from threadloom.daemon.learning_job import keep_extracting
from threadloom.daemon.outbound import StallGuard
from threadloom.daemon.retention_job import keep_store_small
from threadloom.daemon.usermodel_job import UserModelJob
from threadloom.errors import ThreadloomError
from threadloom.home import try_lock
from threadloom.identity import Identity, Provenance, detect_vendor, project_root, session_id_from
from threadloom.runtime import Runtime, open_runtime
from threadloom.search.embedders import search_report
from threadloom.server.app import ThreadloomServer, build_server
from threadloom.server.connection import ConnectionState, forwarded_env
from threadloom.server.transport import bound_log_records, open_connection, serve_stream
from threadloom.store.sqlite import ensure_private_dir

log = logging.getLogger(__name__)
IDLE_CHECK_S = 0.5
RECALL_MODEL_WAIT_S = 60.0  # a control recall waits this long for a model still loading
MAX_CONNECTIONS = 512  # open at once (sessions, hooks, greetings under way); past it a new one is closed


class Daemon:
    def __init__(self, runtime: Runtime, server: ThreadloomServer, lock_fd: int) -> None:
        self.runtime = runtime
        self.server = server
        self.layout = runtime.settings.layout
        self._lock_fd: int | None = lock_fd
        self._listener: SocketListener | None = None
        self._sessions = 0
        self._last_activity = time.monotonic()
        self._retire = anyio.Event()
        self._force = False
        self._open = 0
        self.restarting: str | None = None  # why the memory guard asked for a fresh daemon
        self.guard = guard.install(guard.MemoryGuard(runtime, self.restart, lambda: self._lock_fd is not None))

    async def serve(self) -> None:
        socket_path = self.layout.socket
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()  # a stale socket of a daemon that died; we hold the lock
        self._listener = await anyio.create_unix_listener(socket_path)
        socket_path.chmod(0o600)
        self._write_info()
        log.info("threadloom daemon %s (pid %d) serving on %s", __version__, os.getpid(), socket_path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._accept, tg)
            tg.start_soon(self._watch_idle)
            tg.start_soon(self._watch_signals)
            tg.start_soon(self.guard.run)  # resident memory under THREADLOOM_DAEMON_MEMORY_MB, the log rotated
            tg.start_soon(self.runtime.run_background_jobs)
            tg.start_soon(probe_job.keep_probing, self.runtime)  # the self-test (THREADLOOM_PROBE_INTERVAL)
            tg.start_soon(keep_consolidating, self.runtime)  # THREADLOOM_CONSOLIDATE_INTERVAL
            tg.start_soon(keep_store_small, self.runtime)  # THREADLOOM_RETENTION_INTERVAL
            ingest = ingest_job.start(self.runtime)  # transcripts: the poll and session-end passes
            tg.start_soon(ingest.run)
            tg.start_soon(keep_extracting, self.runtime)  # learning candidates (THREADLOOM_LEARN_EXTRACT)
            tg.start_soon(keep_curating, self.runtime)  # skills and lessons reviewed (THREADLOOM_LEARN_CURATE)
            tg.start_soon(UserModelJob(self.runtime).run)  # user-model observation (THREADLOOM_USERMODEL_MINE)
            tg.start_soon(keep_reviewing, self.runtime)  # reviewer loops (THREADLOOM_LEARN_REVIEW etc.)
            tg.start_soon(style_job.keep_learning, self.runtime)  # style habits from new user messages
            await self._retire.wait()
            ingest.stop()
            await self._stop_listening(keep_lock=self.restarting is not None)
            while self._sessions and not self._force:
                await anyio.sleep(IDLE_CHECK_S / 5)
            tg.cancel_scope.cancel()
        log.info("threadloom daemon (pid %d) exiting", os.getpid())

    def retire(self, *, force: bool = False) -> None:
        self._force = self._force or force
        self._retire.set()

    def restart(self, why: str) -> None:
        """End as `daemon stop` does, keeping the daemon lock for the fresh daemon `run_daemon` then execs."""
        self.restarting = why
        self.retire(force=True)

    @property
    def lock_fd(self) -> int | None:
        return self._lock_fd

    async def _stop_listening(self, *, keep_lock: bool = False) -> None:
        """Give up the socket and the lock so that a new daemon can start beside our last sessions (the lock
        is kept for a restart: no other daemon may start in between)."""
        if self._listener is not None:
            await self._listener.aclose()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.layout.socket.unlink()
            with contextlib.suppress(FileNotFoundError):
                self.layout.daemon_info.unlink()
        if self._lock_fd is not None and not keep_lock:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _write_info(self) -> None:
        info = {"pid": os.getpid(), "version": __version__, "started_at": self.runtime.started_at_ms}
        tmp = self.layout.daemon_info.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(self.layout.daemon_info)

    async def _accept(self, tg: anyio.abc.TaskGroup) -> None:
        assert self._listener is not None
        while True:
            try:
                stream = await self._listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            if self._open >= MAX_CONNECTIONS:
                log.warning("%d connections open: closed a new one", self._open)
                await stream.aclose()
                continue
            tg.start_soon(self._handle, stream)

    async def _watch_idle(self) -> None:
        timeout = self.runtime.settings.daemon_idle_timeout
        if timeout <= 0:
            return
        while True:
            await anyio.sleep(min(IDLE_CHECK_S, timeout))
            if self._sessions == 0 and time.monotonic() - self._last_activity >= timeout:
                log.info("idle for %.0fs with no session; retiring", timeout)
                self.retire()
                return

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: stopping", signum)
                self.retire(force=True)
                return

    async def _handle(self, stream: SocketStream) -> None:
        self._open += 1
        try:
            await self._converse(stream)
        finally:
            self._open -= 1

    async def _converse(self, stream: SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                with anyio.fail_after(protocol.HELLO_TIMEOUT_S):
                    header = protocol.decode(await buffered.receive_until(b"\n", protocol.MAX_HEADER_BYTES))
            except (
                TimeoutError,
                ValueError,
                anyio.EndOfStream,
                anyio.IncompleteRead,
                anyio.DelimiterNotFound,
                anyio.BrokenResourceError,
            ) as exc:
                log.info("dropped a connection without a valid greeting: %r", exc)
                return
            kind = header.get("kind")
            if kind == protocol.CONTROL:
                await self._answer_control(stream, header)
                return
            if kind != protocol.HELLO:
                return
            if self._retire.is_set() or self._newer(header):
                await stream.send(protocol.encode({"kind": protocol.RETIRING, "version": __version__}))
                if self._newer(header):
                    log.info("a bridge of version %s arrived; retiring", header.get("version"))
                    self.retire()
                return
            state = self._connection(header)
            if isinstance(state, str):
                await stream.send(protocol.encode({"kind": protocol.REFUSED, "error": state}))
                return
            # The session id, which a bridge gives back (hello's `session`) to resume it after a restart.
            welcome = {"kind": protocol.WELCOME, "version": __version__, "session": state.session_id_hint}
            await stream.send(protocol.encode(welcome))
            self._sessions += 1
            stall = self.runtime.settings.daemon_client_stall_s
            out = StallGuard(
                stream, stall, f"{state.session_id_hint or '?'} (pid {state.pid})", self.guard.note_dropped
            )
            try:
                await serve_stream(self.server, out, state, buffered)
            finally:
                self._sessions -= 1
                self._last_activity = time.monotonic()

    @staticmethod
    def _newer(header: dict[str, Any]) -> bool:
        return protocol.version_key(str(header.get("version", ""))) > protocol.version_key(__version__)

    def _connection(self, header: dict[str, Any]) -> ConnectionState | str:
        """The new session's state, or why it is refused."""
        raw_env = header.get("env")
        env = forwarded_env({str(k): str(v) for k, v in raw_env.items()}) if isinstance(raw_env, dict) else {}
        pid = header.get("pid")
        session = header.get("session")
        try:
            return open_connection(
                self.server,
                transport="bridge",
                env=env,
                cwd=str(header.get("cwd") or "/"),
                pid=pid if isinstance(pid, int) else None,
                session_hint=session if isinstance(session, str) else None,
            )
        except ThreadloomError as exc:
            return exc.message

    async def _answer_control(self, stream: SocketStream, header: dict[str, Any]) -> None:
        """One control request's reply. Neither a failing op nor a client gone before its reply (a hook its
        agent CLI killed on a timeout) may take the daemon, and every session on it, down."""
        op = str(header.get("op"))
        try:
            reply = await self._control(op, header)
        except Exception as exc:  # logged whole; the caller gets one line
            log.exception("control op %r failed", op)
            reply = {"ok": False, "error": f"control op {op!r} failed ({type(exc).__name__}); see the daemon log"}
        try:
            await stream.send(protocol.encode(reply))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.info("the %r caller left before its reply", op)

    async def _control(self, op: str, header: dict[str, Any]) -> dict[str, Any]:
        if op == "recall":
            return await self._recall(header)
        if op == "hook":
            self._last_activity = time.monotonic()
            return await hook_op(self.runtime, header)
        if op == "stop":
            self.retire(force=True)
            return {"ok": True, "pid": os.getpid()}
        if op == "status":
            return {
                "ok": True,
                "pid": os.getpid(),
                "version": __version__,
                "uptime_s": round(self.runtime.uptime_s, 1),
                "started_at": self.runtime.started_at_ms,
                "open_connections": self._sessions,
                "sessions": [
                    {"id": s.id, "vendor": s.vendor, "project": s.project, "client": s.client_name}
                    for s in self.runtime.live.values()
                ],
                "store": self.runtime.store.location,
                "idle_timeout_s": self.runtime.settings.daemon_idle_timeout,
                "guard": self.guard.report(),
            }
        return {"ok": False, "error": f"unknown control op {op!r}"}

    async def _recall(self, header: dict[str, Any]) -> dict[str, Any]:
        """`threadloom memory recall` run here, where the model is warm: the tool's recall, acting for the
        caller's identity in the caller's folder. Loads the model first if no session has yet."""
        self._last_activity = time.monotonic()
        runtime, s = self.runtime, self.runtime.settings
        raw_env = header.get("env")
        env = forwarded_env({str(k): str(v) for k, v in raw_env.items()}) if isinstance(raw_env, dict) else {}
        k, as_of = header.get("k"), header.get("as_of")
        try:
            who = Identity.of(env, s.user, s.author, s.org)
            prov = Provenance(
                session_id=session_id_from(env.get("THREADLOOM_SESSION_ID")),
                vendor=detect_vendor(None, env),
                project=str(project_root(env, [], str(header.get("cwd") or "/"))),
                user=who.user,
                author=who.author,
                org=who.org,
            )
            runtime.start_embedder()
            await runtime.call(runtime.embedder.get, RECALL_MODEL_WAIT_S)
            result = await runtime.call(
                runtime.recall.recall,
                str(header.get("query", "")),
                prov,
                k=k if isinstance(k, int) else 10,
                verbosity=str(header.get("verbosity", "full")),
                read_only=bool(header.get("read_only")),
                as_of=as_of if isinstance(as_of, int) else None,
            )
        except ThreadloomError as exc:  # the caller's mistake (or a busy store): shown to them, not a fallback
            return {"ok": False, "refused": True, "error": exc.message}
        return {"ok": True, "pid": os.getpid(), "search": search_report(s, runtime.embedder), "result": result}


def main(lock_fd: int | None = None) -> int:
    """`threadloom daemon run`: settings, logging, then the daemon. `lock_fd` is the daemon lock if already taken."""
    settings = load_settings()
    configure_logging(settings)
    bound_log_records()
    return run_daemon(settings, lock_fd)


def run_daemon(settings: Settings, lock_fd: int | None = None) -> int:
    """Run the daemon in this process until it retires. Returns at once if another one owns the home."""
    os.umask(0o077)
    # The daemon's own comings and goings belong in its log whatever the configured level.
    for name in (__name__, guard.__name__, logs.__name__, StallGuard.__module__):
        logging.getLogger(name).setLevel(min(log.getEffectiveLevel(), logging.INFO))
    ensure_private_dir(settings.home)
    if lock_fd is None:
        lock_fd = try_lock(settings.layout.lock)
    if lock_fd is None:
        log.info("another threadloom daemon owns %s", settings.home)
        return 0
    runtime = open_runtime(settings, "daemon")
    try:
        daemon = Daemon(runtime, build_server(runtime), lock_fd)
        anyio.run(daemon.serve)
    finally:
        runtime.close()
    if daemon.restarting is not None and daemon.lock_fd is not None:
        log.info("memory guard: a fresh daemon takes over (%s)", daemon.restarting)
        guard.exec_fresh(daemon.lock_fd)
    return 0
