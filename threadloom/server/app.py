"""Builds the MCP server: tools by toolset, resources, prompts and error shaping."""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ListToolsResult, TextContent
from mcp_types import Tool as MCPTool
from pydantic import AnyUrl, ValidationError

from threadloom import __version__, requests, scrub
from threadloom.errors import ThreadloomError
from threadloom.guide import INSTRUCTIONS, instructions_for
from threadloom.identity import detect_vendor
from threadloom.requests import Request
from threadloom.runtime import Runtime
from threadloom.server import errors
from threadloom.server.brief_tools import BRIEF_TOOLS, add_brief_views
from threadloom.server.compact import compact_tool, iso_times
from threadloom.server.connection import ConnectionState, connection_of
from threadloom.server.coordination_tools import COORDINATION_TOOLS
from threadloom.server.curation_tools import CURATION_TOOLS
from threadloom.server.dialog_tools import DIALOG_TOOLS
from threadloom.server.forget_tools import FORGET_TOOLS
from threadloom.server.health_tools import HEALTH_TOOLS
from threadloom.server.learning_tools import LEARNING_TOOLS
from threadloom.server.memory_tools import MEMORY_TOOLS
from threadloom.server.skill_tools import SKILL_TOOLS
from threadloom.server.style_tools import STYLE_TOOLS
from threadloom.server.thread_tools import THREAD_TOOLS
from threadloom.server.thread_views import _reported, add_thread_views
from threadloom.server.tools import TOOLS, status_report
from threadloom.server.toolsets import ToolDef, first_paragraph, select_tools
from threadloom.server.usermodel_tools import USER_MODEL_TOOLS

log = logging.getLogger(__name__)
STATUS_URI = "threadloom://status"


class ThreadloomServer(MCPServer[Any]):
    """MCPServer whose tool failures are always structured results, and whose calls are journaled."""

    def __init__(self, runtime: Runtime, tools: Mapping[str, ToolDef], lifespan: Any = None) -> None:
        super().__init__(
            "threadloom",
            title="threadloom",
            instructions=INSTRUCTIONS,
            version=__version__,
            log_level="WARNING",
            middleware=[ConnectionMiddleware(frozenset(tools))],
            lifespan=lifespan,
        )
        self.runtime = runtime
        self.tool_defs = tools
        for tool in tools.values():
            self.add_tool(
                tool.fn,
                title=tool.title,
                description=inspect.cleandoc(tool.fn.__doc__ or ""),
                annotations=tool.annotations(),
                structured_output=True,
            )

    @property
    def lowlevel(self) -> Any:
        return self._lowlevel_server

    def initialization_options(self, toolset: frozenset[str]) -> Any:
        """What `initialize` answers a session: its instructions name only the tools it is offered."""
        options = self._lowlevel_server.create_initialization_options()
        return options.model_copy(update={"instructions": instructions_for(toolset, self.tool_defs)})

    async def list_tools(self) -> list[MCPTool]:
        """tools/list as an agent pays for it: the schemas compacted (argument validation is unchanged)."""
        return [compact_tool(tool) for tool in await super().list_tools()]

    async def read_resource(self, uri: AnyUrl | str, context: Context[Any, Any] | None = None) -> Any:
        """threadloom://status for a connection that may not see the store's figures (a team server's account):
        its own, read for its session (the SDK gives a static resource no context, so it is answered here)."""
        if str(uri) == STATUS_URI and context is not None:
            conn = connection_of(context.request_context)
            if not conn.store_wide:
                with _reported():
                    info = await conn.ensure_session(context.request_context)
                    report = await status_report(self.runtime, info, store_wide=False) | {"session": None}
                return [ReadResourceContents(content=json.dumps(report, indent=1), mime_type="application/json")]
        return await super().read_resource(uri, context)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        started = time.perf_counter()
        ran, resuming = True, None
        problem = self._unknown_arguments(name, arguments) or argument_problem(arguments)
        if problem:
            return errors.error_result(problem, retryable=False)
        try:
            request = self._request(name, arguments, context)
        except ToolError as exc:  # a bad key is a bad argument: said like one, not as the SDK's bare text
            return errors.error_result(str(exc), retryable=False)
        if request is not None:
            assert context is not None  # a call has a key only with a context
            try:  # as the caller sees now: a replay naming a memory they lost is refused
                info = await connection_of(context.request_context).ensure_session(context.request_context)
                viewer = info.provenance().viewer()
                replayed = await self.runtime.call(
                    requests.earlier, self.runtime.store, request.owner, request.tool, request.key, viewer
                )
            except ThreadloomError as exc:
                return errors.from_exception(exc)
            resumes = self.tool_defs[name].resumes
            if replayed is not None and resumes is not None and resumes(replayed):
                # killed before it finished: the tool finishes it (the key stays the first call's)
                resuming, request, replayed = requests.RESUMING.set(replayed), None, None
            if replayed is not None and self.tool_defs[name].replays_tasks:
                try:
                    replayed = await self.runtime.call(self.runtime.spawner.replayed, replayed, info.provenance())
                except ThreadloomError as exc:
                    return errors.from_exception(exc)
            if replayed is not None:
                return _structured(iso_times(replayed))  # a result remembered before times were ISO, too
        token, scrubbed = requests.CURRENT.set(request), scrub.collect()  # what the call's writes scrubbed
        try:
            result = await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) and cause is not None:
                if not isinstance(cause, ThreadloomError):
                    log.error("tool %s failed", name, exc_info=cause)
                result = errors.from_exception(cause)
            elif isinstance(cause, ValidationError):
                ran, result = False, errors.from_exception(cause)
            else:
                ran, result = False, errors.error_result(str(exc), retryable=False)
        finally:
            requests.CURRENT.reset(token)
            if resuming is not None:
                requests.RESUMING.reset(resuming)
            scrubbed.close()
        if scrubbed.kinds and isinstance(result, CallToolResult) and not result.is_error and result.structured_content:
            result = _structured(result.structured_content | {"scrubbed": scrubbed.kinds})
        if isinstance(result, CallToolResult) and not result.is_error and result.structured_content is not None:
            result = _structured(iso_times(result.structured_content))
        if request is not None and isinstance(result, CallToolResult) and not result.is_error:
            kept = self.runtime.scrubber.tree(result.structured_content or {})  # a replay record is persisted too
            await self.runtime.call(requests.remember, self.runtime.store, request, kept)
        if ran and context is not None:
            await self._journal(context, name, result, time.perf_counter() - started)
        return result

    def _request(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None) -> Request | None:
        """The idempotency key of a write tool's call, taken out of its arguments (the tool never sees it)."""
        tool = self.tool_defs.get(name)
        key = arguments.pop("idempotency_key", None) if tool is not None and tool.keyed else None
        if key is None or context is None:
            return None
        if not isinstance(key, str) or not 1 <= len(key) <= requests.MAX_KEY_CHARS:
            raise ToolError(f"an idempotency key is a string of 1-{requests.MAX_KEY_CHARS} characters")
        conn = connection_of(context.request_context)
        # A replay hands back the first call's result, personal memory included: scoped to the vendor of the
        # session (a retry comes from the same CLI), so another vendor's session never reads what egress withholds.
        params = context.request_context.session.client_params
        vendor = detect_vendor(params.client_info.name if params else None, conn.env)
        return Request(conn.identity().user, name, f"{vendor}:{key}")

    def _unknown_arguments(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Reject misspelt arguments instead of silently dropping them."""
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return None
        known = set(tool.parameters.get("properties", {}))
        extra = sorted(set(arguments) - known)
        if not extra:
            return None
        accepted = ", ".join(sorted(known)) or "none"
        return f"invalid arguments: unknown argument(s) {', '.join(map(repr, extra))}; accepted: {accepted}"

    async def _journal(self, context: Context[Any, Any], name: str, result: Any, seconds: float) -> None:
        conn = connection_of(context.request_context)
        if conn.session is None:
            return
        ok = not (isinstance(result, CallToolResult) and result.is_error)
        detail: dict[str, Any] = {"tool": name, "ok": ok, "ms": round(seconds * 1000, 2)}
        if not ok and isinstance(result, CallToolResult) and result.structured_content:
            # an error may quote an argument: scrubbed like every other text the store keeps
            detail["error"] = self.runtime.scrubber.text(str(result.structured_content.get("error", "")))[:200]
        try:
            await self.runtime.call(self.runtime.sessions.record, conn.session.provenance(), "tool.call", detail)
        except ThreadloomError as exc:  # the journal is bookkeeping: a full disk must not fail a call that worked
            log.warning("tool call not journaled: %s", exc.message)


MAX_ITEMS = 1_000
INT64 = 2**63 - 1


def argument_problem(value: Any, path: str = "") -> str | None:
    """What no tool accepts, whatever its schema says: a NUL byte or an unpaired surrogate in a string, an
    integer past 64 bits, a list of over MAX_ITEMS items. Named by the argument's path, checked before any
    tool runs (the database and the JSON encoder would otherwise fail with an internal error)."""
    where = path or "arguments"
    if isinstance(value, str):
        if "\x00" in value:
            return f"invalid arguments: {where!r} contains a NUL byte"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"invalid arguments: {where!r} contains an unpaired surrogate (not valid Unicode text)"
    elif isinstance(value, bool):
        return None
    elif isinstance(value, int) and not -INT64 - 1 <= value <= INT64:
        return f"invalid arguments: {where!r} is out of range (a 64-bit integer)"
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            return f"invalid arguments: {where!r} has {len(value):,} items; at most {MAX_ITEMS:,}"
        for n, item in enumerate(value):
            found = argument_problem(item, f"{where}[{n}]")
            if found:
                return found
    elif isinstance(value, dict):
        for key, item in value.items():
            found = argument_problem(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    return None


class ConnectionMiddleware:
    """Per-connection concerns: the session's toolset, roots changes, and protocol-level call errors."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        self._tool_names = tool_names

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method == "notifications/roots/list_changed":
            connection_of(ctx).roots_stale = True
            return await call_next(ctx)
        if method == "tools/list":
            return _filter_tools(await call_next(ctx), connection_of(ctx))
        if method != "tools/call":
            return await call_next(ctx)
        conn = connection_of(ctx)
        name = ctx.params.get("name") if isinstance(ctx.params, Mapping) else None
        if isinstance(name, str) and name not in conn.toolset and name in self._tool_names:
            return _dump(
                errors.error_result(
                    f"tool {name!r} is not in this session's toolset; add its group to THREADLOOM_TOOLSET",
                    retryable=False,
                )
            )
        if isinstance(ctx.params, Mapping) and ctx.params.get("arguments") is None:
            ctx = replace(ctx, params={**ctx.params, "arguments": {}})
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            return _dump(
                errors.error_result("malformed tools/call request: " + errors.describe_validation(exc), retryable=False)
            )


def _structured(body: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body)


def _dump(result: CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def _filter_tools(result: HandlerResult, conn: ConnectionState) -> HandlerResult:
    if isinstance(result, ListToolsResult):
        return replace_tools(result, [t for t in result.tools if t.name in conn.toolset])
    if isinstance(result, dict) and isinstance(result.get("tools"), list):  # the SDK may hand back the wire form
        return result | {"tools": [t for t in result["tools"] if t.get("name") in conn.toolset]}
    return result


def replace_tools(result: ListToolsResult, tools: list[Any]) -> ListToolsResult:
    return result.model_copy(update={"tools": tools})


def build_server(runtime: Runtime, lifespan: Any = None) -> ThreadloomServer:
    """The MCP server over `runtime`. `lifespan` matters only to HTTP, where it yields the
    connection registry; the socket and stdio transports hand each connection its own state."""
    groups = (*TOOLS, *BRIEF_TOOLS, *MEMORY_TOOLS, *THREAD_TOOLS, *COORDINATION_TOOLS, *DIALOG_TOOLS, *FORGET_TOOLS)
    tools = {t.name: t for t in groups}
    tools |= {t.name: t for t in USER_MODEL_TOOLS}
    tools |= {t.name: t for t in STYLE_TOOLS}
    tools |= {t.name: t for t in SKILL_TOOLS}
    tools |= {t.name: t for t in CURATION_TOOLS}
    tools |= {t.name: t for t in LEARNING_TOOLS}
    tools |= {t.name: t for t in HEALTH_TOOLS}
    server = ThreadloomServer(runtime, tools, lifespan)
    _add_resources_and_prompts(server)
    add_thread_views(server)
    add_brief_views(server)
    return server


def toolset_for(server: ThreadloomServer, env: Mapping[str, str]) -> frozenset[str]:
    """The tools one connection sees: its own THREADLOOM_TOOLSET, else the server's setting."""
    spec = env.get("THREADLOOM_TOOLSET") or server.runtime.settings.toolset
    return select_tools(spec, server.tool_defs)


def _add_resources_and_prompts(server: ThreadloomServer) -> None:
    @server.resource(
        STATUS_URI,
        name="status",
        title="threadloom status",
        description="The status tool's JSON, without the session part.",
        mime_type="application/json",
    )
    async def status_resource() -> str:  # a team server's account reads its own figures (read_resource)
        return json.dumps(await status_report(server.runtime, None), indent=1)

    @server.prompt(name="help", title="How to use threadloom")
    def help_prompt(ctx: Context) -> str:
        """Explains what threadloom offers this session and how to call it."""
        toolset = connection_of(ctx.request_context).toolset
        advice = instructions_for(toolset, server.tool_defs).splitlines()
        lines = [*advice, "Your tools (THREADLOOM_TOOLSET adds groups):"]
        for tool in server.tool_defs.values():
            if tool.name in toolset:
                lines.append(f"- {tool.name} ({tool.group}): {first_paragraph(tool.fn.__doc__)}")
        return "\n".join(lines)
