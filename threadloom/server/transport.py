"""Serving one MCP connection: over this process's stdio, or over a daemon socket stream."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import anyio
import mcp_types as types
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server.runner import serve_dual_era_loop
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from threadloom.errors import InvalidInput
from threadloom.identity import parent_session_from, project_root, session_id_from
from threadloom.server.app import ThreadloomServer, toolset_for
from threadloom.server.connection import ConnectionState

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


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
    toolset = toolset_for(server, env)
    state = ConnectionState(runtime=server.runtime, transport=transport, env=env, cwd=cwd, pid=pid, toolset=toolset)
    state.identity()
    try:
        state.session_id_hint = session_id_from(env.get("THREADLOOM_SESSION_ID") or session_hint)
    except InvalidInput as exc:
        source = "THREADLOOM_SESSION_ID" if env.get("THREADLOOM_SESSION_ID") else "the bridge's session id"
        raise InvalidInput(f"{source}: {exc.message}") from None
    parent_session_from(env.get("THREADLOOM_PARENT_SESSION"))
    if env.get("THREADLOOM_ROOT"):
        project_root(env, [], cwd)
    return state


async def _serve(server: ThreadloomServer, read_stream: object, write_stream: object, state: ConnectionState) -> None:
    lowlevel = server.lowlevel
    try:
        await serve_dual_era_loop(
            lowlevel,
            read_stream,  # type: ignore[arg-type]
            write_stream,  # type: ignore[arg-type]
            lifespan_state=state,
            init_options=lowlevel.create_initialization_options(),
        )
    finally:
        with anyio.CancelScope(shield=True):
            await state.end()


async def serve_stdio(server: ThreadloomServer, state: ConnectionState) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await _serve(server, read_stream, write_stream, state)


async def serve_stream(
    server: ThreadloomServer, stream: ByteStream, state: ConnectionState, buffered: BufferedByteReceiveStream
) -> None:
    """Serve newline-delimited JSON-RPC on a byte stream until the peer closes it."""
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def pump_in() -> None:
        async with read_writer:
            while True:
                try:
                    line = await buffered.receive_until(b"\n", MAX_MESSAGE_BYTES)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                except anyio.DelimiterNotFound:
                    log.warning("a message over %d bytes; closing the connection", MAX_MESSAGE_BYTES)
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # noqa: BLE001 - the SDK answers a parse error itself
                    await read_writer.send(exc)
                    continue
                await read_writer.send(SessionMessage(message))

    async def pump_out() -> None:
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await stream.send(data.encode() + b"\n")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        await _serve(server, read_stream, write_stream, state)
        tg.cancel_scope.cancel()
