"""Runs the self-test (health/probes.py) through the real tools: a scratch home in a temporary folder (never the
user's store), a runtime and server built over it as the daemon builds its own, and two sessions, each a real
MCP client on its own connection, served as a daemon serves a bridge's connection.

The scratch runtime has no embedder (the full-text path; `threadloom doctor` checks the model) and ingests
nothing. Its folder is removed afterwards, whatever happened.
"""

from __future__ import annotations

import json
import logging
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import anyio
import anyio.to_thread
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.shared.memory import create_client_server_memory_streams

from threadloom.config import Settings
from threadloom.health.probes import CATEGORIES, Outcome, ProbeFailure, describe, run_checks
from threadloom.runtime import open_runtime
from threadloom.server.app import ThreadloomServer, build_server
from threadloom.server.connection import ConnectionState
from threadloom.server.transport import _serve, open_connection

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S: Final = 60.0
SHUTDOWN_GRACE_S: Final = 2.0
PROBE_USER: Final = "probe"


@dataclass(frozen=True)
class ProbeRun:
    run_id: str
    outcomes: list[Outcome]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "categories": [o.as_dict() for o in self.outcomes],
        }


async def run_probe(settings: Settings, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeRun:
    """One self-test run in a fresh scratch home; never raises for what it finds (each category says)."""
    run_id = secrets.token_hex(6)
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    try:
        with tempfile.TemporaryDirectory(prefix="threadloom-probe-", ignore_cleanup_errors=True) as tmp:
            with anyio.fail_after(timeout_s):
                await _run_in(Path(tmp), settings, run_id, outcomes)
    except Exception as exc:  # noqa: BLE001 - the probe's edge: no scratch folder or store is a finding too
        why = f"timed out after {timeout_s:g} s" if isinstance(exc, TimeoutError) else describe(exc)
        log.warning("self-test could not finish: %s", why)
        ms = (time.perf_counter() - started) * 1000
        done = {o.category for o in outcomes}
        outcomes += [Outcome(c, False, ms, why) for c in CATEGORIES if c not in done]
    return ProbeRun(run_id, outcomes, time.perf_counter() - started)


def scratch_settings(settings: Settings, home: Path) -> Settings:
    """The user's settings pointed at the scratch home: nothing of the user's home or model is touched."""
    return settings.model_copy(
        update={"home": home, "embedder": "none", "ingest": False, "toolset": "full", "maintenance_interval": 0.0}
    )


async def _run_in(folder: Path, settings: Settings, run_id: str, outcomes: list[Outcome]) -> None:
    home, repo = folder / "home", folder / "repo"
    repo.mkdir()
    # Off the event loop: opening a store runs its migrations, and a daemon's sessions must not wait on them.
    runtime = await anyio.to_thread.run_sync(open_runtime, scratch_settings(settings, home), "cli")
    try:
        server = await anyio.to_thread.run_sync(build_server, runtime)
        async with _session(server, repo, f"probe-{run_id}-a") as a, _session(server, repo, f"probe-{run_id}-b") as b:
            await run_checks(a, b, f"zq{run_id}", outcomes)
    finally:
        with anyio.CancelScope(shield=True):  # a daemon retiring mid-run still closes the scratch store
            await anyio.to_thread.run_sync(runtime.close)


class _ToolSession:
    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self._client.call_tool(tool, arguments)
        body = result.structured_content or {}
        if result.is_error:
            raise ProbeFailure(f"{tool}: {body.get('error') or _text(result.content)}")
        return body


def _text(content: list[Any]) -> str:
    return " ".join(str(getattr(c, "text", "")) for c in content)[:200] or "an error without a message"


@asynccontextmanager
async def _session(server: ThreadloomServer, repo: Path, session_id: str) -> AsyncIterator[_ToolSession]:
    env = {
        "THREADLOOM_SESSION_ID": session_id,
        "THREADLOOM_ROOT": str(repo),
        "THREADLOOM_TOOLSET": "full",
        "THREADLOOM_USER": PROBE_USER,
    }
    state = open_connection(server, transport="probe", env=env, cwd=str(repo), pid=None)
    async with Client(_Connection(server, state), mode="legacy") as client:
        yield _ToolSession(client, session_id)


class _Connection:
    """An MCP client transport to `server` in this process, over memory streams; the server side is the
    connection loop a daemon socket gets (`transport._serve`: the session's toolset and state, its end)."""

    def __init__(self, server: ThreadloomServer, state: ConnectionState) -> None:
        self._server = server
        self._state = state
        self._cm: AbstractAsyncContextManager[TransportStreams] | None = None

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[TransportStreams]:
        async with create_client_server_memory_streams() as (client, served):
            done = anyio.Event()

            async def serve() -> None:
                try:
                    await _serve(self._server, served[0], served[1], self._state)
                finally:
                    done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                try:
                    yield client
                finally:
                    await client[1].aclose()  # end of input: the server's loop ends
                    with anyio.move_on_after(SHUTDOWN_GRACE_S, shield=True):
                        await done.wait()
                    tg.cancel_scope.cancel()

    async def __aenter__(self) -> TransportStreams:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._cm is not None:
            await self._cm.__aexit__(exc_type, exc, tb)
            self._cm = None


def summary_line(run: ProbeRun) -> str:
    """One line per run for a log: which categories failed and why."""
    failed = {o.category: o.error for o in run.outcomes if not o.ok}
    return "self-test passed" if not failed else "self-test failed: " + json.dumps(failed)
