"""`threadloom serve --in-process`: the whole server inside the agent's stdio child."""

from __future__ import annotations

import anyio

from threadloom.config import Settings
from threadloom.runtime import open_runtime
from threadloom.server.app import build_server, toolset_for
from threadloom.server.connection import forwarded_env, local_connection
from threadloom.server.transport import serve_stdio


def serve_in_process(settings: Settings) -> int:
    import os

    runtime = open_runtime(settings, "in-process")
    try:
        server = build_server(runtime)
        state = local_connection(runtime, toolset_for(server, forwarded_env(os.environ)))

        async def serve() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(runtime.run_background_jobs)
                await serve_stdio(server, state)
                tg.cancel_scope.cancel()

        anyio.run(serve)
    finally:
        runtime.close()
    return 0
