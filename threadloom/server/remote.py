"""`threadloom serve --remote URL`: an agent CLI's stdio server on a laptop, backed by a team server.

Two MCP clients behind one stdio server: memory, coordination and everything else go to the team server
over streamable HTTP (the account's token, the project's name: remote_auth.py); the thread tools, resources
and prompts go to the user's local threadloom through the same bridge `threadloom serve` is (a child
process, which starts the daemon on demand), so thread files stay in the repository as they are today and
travel by git. Lists are the union: the local side's thread entries, the team server's others.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, Final, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from threadloom import __version__
from threadloom.errors import ThreadloomError
from threadloom.server.remote_auth import check_url, local_env, preflight, remote_headers, remote_timeout

T = TypeVar("T")
log = logging.getLogger(__name__)
LOCAL_RESOURCES: Final = ("threadloom://context", "threadloom://tree", "threadloom://thread/")
LOCAL_PROMPTS: Final = frozenset({"context", "tree", "create", "switch", "summary", "merge"})


def is_local_tool(name: str) -> bool:
    return name.startswith("thread_")


def is_local_uri(uri: str) -> bool:
    return uri.startswith(LOCAL_RESOURCES)


class RemoteSession:
    """The team server's MCP session, opened again at the next call after it was lost.

    A lost connection (the server restarted, or was down when a request was sent) ends the SDK client's task
    group with an error; held in a task of its own, that ends this session alone, not the bridge (which would
    leave the agent with no threadloom, the local thread tools included). A server that restarted no longer
    knows the old session id, so any failed request drops the session too: the next call opens a new one.
    """

    def __init__(self, url: str, headers: dict[str, str], tasks: anyio.abc.TaskGroup, timeout: float) -> None:
        self._url = url
        self._headers = headers
        self._timeout = timeout  # seconds without a byte from the server (remote_auth.remote_timeout)
        self._tasks = tasks
        self._lock = anyio.Lock()
        self._client: Client | None = None
        self._done = anyio.Event()

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                try:
                    await self._tasks.start(self._hold)
                except Exception as exc:  # the SDK shows a refused initialize as a bare "error response": the
                    # preflight raises the server's words
                    await anyio.to_thread.run_sync(preflight, self._url, self._headers, min(10, self._timeout))
                    raise exc
            assert self._client is not None
            return self._client

    def drop(self, client: Client) -> None:
        if self._client is client:
            self._client = None
            self._done.set()

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        done = self._done = anyio.Event()
        opened = False
        try:
            async with (
                create_mcp_http_client(headers=self._headers, timeout=httpx2.Timeout(30, read=self._timeout)) as http,
                Client(streamable_http_client(self._url, http_client=http), mode="legacy") as client,
            ):
                self._client, opened = client, True
                task_status.started()
                await done.wait()
        except Exception as exc:
            if not opened:  # tasks.start raises it to the caller
                raise
            log.warning("the session with %s ended: %s", self._url, _words(exc))
        finally:
            self._client = None


class Proxy:
    def __init__(self, url: str, remote: RemoteSession, local: Client) -> None:
        self.url = url
        self.remote = remote
        self.local = local

    async def _ask(self, local: bool, call: Callable[[Client], Awaitable[T]]) -> T:
        client = self.local
        try:
            client = self.local if local else await self.remote.client()
            return await call(client)
        except Exception as exc:  # the far side's failure, in this bridge's words
            if not local:
                self.remote.drop(client)
            if isinstance(exc, ThreadloomError):  # the preflight's words when the session could not be opened
                raise
            where = "the local threadloom" if local else f"the team server at {self.url}"
            raise ThreadloomError(f"{where} failed: {_words(exc)}") from exc

    async def list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        theirs = await self._ask(False, lambda c: c.list_tools())
        ours = await self._ask(True, lambda c: c.list_tools())
        tools = [t for t in ours.tools if is_local_tool(t.name)] + [
            t for t in theirs.tools if not is_local_tool(t.name)
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        local = is_local_tool(params.name)
        try:
            return await self._ask(local, lambda c: c.call_tool(params.name, params.arguments or {}))
        except ThreadloomError as exc:
            said = exc.__cause__.error.data if isinstance(exc.__cause__, MCPError) else None  # the gate's refusal
            retryable = said.get("retryable") is not False if isinstance(said, dict) else True
            retryable = exc.retryable if exc.__cause__ is None else retryable  # the preflight's own
            body = {"error": exc.message, "retryable": retryable}
            return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body))],
                                        structured_content=body, is_error=True)  # fmt: skip

    async def list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        theirs = await self._ask(False, lambda c: c.list_resources())
        ours = await self._ask(True, lambda c: c.list_resources())
        found = [r for r in ours.resources if is_local_uri(str(r.uri))]
        return types.ListResourcesResult(
            resources=found + [r for r in theirs.resources if not is_local_uri(str(r.uri))]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        theirs = await self._ask(False, lambda c: c.list_resource_templates())
        ours = await self._ask(True, lambda c: c.list_resource_templates())
        found = [t for t in ours.resource_templates if is_local_uri(t.uri_template)]
        found += [t for t in theirs.resource_templates if not is_local_uri(t.uri_template)]
        return types.ListResourceTemplatesResult(resource_templates=found)

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        return await self._ask(is_local_uri(uri), lambda c: c.read_resource(uri))

    async def list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        theirs = await self._ask(False, lambda c: c.list_prompts())
        ours = await self._ask(True, lambda c: c.list_prompts())
        found = [p for p in ours.prompts if p.name in LOCAL_PROMPTS]
        return types.ListPromptsResult(prompts=found + [p for p in theirs.prompts if p.name not in LOCAL_PROMPTS])

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        local = params.name in LOCAL_PROMPTS
        return await self._ask(local, lambda c: c.get_prompt(params.name, params.arguments or {}))


def _words(exc: BaseException) -> str:
    """The innermost useful message of an exception (an ExceptionGroup from a task group included)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


async def _serve(url: str, headers: dict[str, str], timeout: float) -> None:
    local_params = StdioServerParameters(
        command=sys.executable, args=["-m", "threadloom", "serve"], env=local_env(os.environ), cwd=os.getcwd()
    )
    async with AsyncExitStack() as stack:
        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)  # the remote session's task ends with the bridge
        remote = RemoteSession(url, headers, tasks, timeout)
        instructions = (await remote.client()).instructions
        local = await stack.enter_async_context(Client(local_params, mode="legacy"))
        proxy = Proxy(url, remote, local)
        server: Server[Any] = Server(
            "threadloom",
            version=__version__,
            instructions=instructions,
            on_list_tools=proxy.list_tools,
            on_call_tool=proxy.call_tool,
            on_list_resources=proxy.list_resources,
            on_list_resource_templates=proxy.list_resource_templates,
            on_read_resource=proxy.read_resource,
            on_list_prompts=proxy.list_prompts,
            on_get_prompt=proxy.get_prompt,
        )
        read, write = await stack.enter_async_context(stdio_server())
        await server.run(read, write, server.create_initialization_options())


def serve_remote(url: str) -> int:
    """Relay an agent's stdio to the team server at `url` and the local threadloom; 2 on a refusal."""
    try:
        check_url(url)
        headers = remote_headers(url, os.environ, os.getcwd())
        timeout = remote_timeout(os.environ)
        preflight(url, headers, min(30, timeout))
    except ThreadloomError as exc:
        print(f"threadloom: {exc.message}", file=sys.stderr)
        return 2
    anyio.run(_serve, url, headers, timeout)
    return 0
