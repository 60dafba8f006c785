"""`threadloom serve --in-process`: the whole server inside the agent's stdio child."""

from __future__ import annotations

import os
import sys

import anyio

from threadloom.config import Settings
from threadloom.errors import ThreadloomError
from threadloom.runtime import open_runtime
from threadloom.server.app import build_server
from threadloom.server.connection import forwarded_env
from threadloom.server.transport import bound_log_records, open_connection, serve_stdio


def serve_in_process(settings: Settings) -> int:
    bound_log_records()
    runtime = open_runtime(settings, "in-process")
    try:
        server = build_server(runtime)
        try:
            # This process is the agent's child: its environment and folder are the session's.
            env, cwd = forwarded_env(os.environ), os.getcwd()
            state = open_connection(server, transport="stdio", env=env, cwd=cwd, pid=os.getppid())
        except ThreadloomError as exc:  # one plain line, as the bridge prints a daemon's refusal
            print(f"threadloom: {exc.message}", file=sys.stderr)
            return 2

        async def serve() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(runtime.run_background_jobs)
                await serve_stdio(server, state)
                tg.cancel_scope.cancel()

        anyio.run(serve)
    finally:
        runtime.close()
    return 0
