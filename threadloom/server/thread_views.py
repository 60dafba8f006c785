"""Read-only thread views as MCP resources, and the common thread flows as MCP prompts.

The resources are URI templates (their optional query makes them so), because a static resource
cannot see which session asks, and the context depends on the session's project and thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from threadloom.errors import NotFound, ThreadloomError
from threadloom.server.connection import caller, connection_of

if TYPE_CHECKING:
    from threadloom.server.app import ThreadloomServer

logger = logging.getLogger(__name__)


@contextmanager
def _reported() -> Iterator[None]:
    """Our errors reach the client with their message; the SDK would replace any other with a generic one."""
    try:
        yield
    except NotFound as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except ThreadloomError as exc:
        raise ResourceError(str(exc)) from exc


@contextmanager
def _prompt_errors(name: str) -> Iterator[None]:
    """A prompt's failure with its cause, as {error, retryable}: the SDK turns any other exception into
    a bare "Error rendering prompt" (mcp/server/mcpserver/prompts/base.py re-raises only MCPError)."""
    try:
        yield
    except MCPError:
        raise
    except ThreadloomError as exc:
        code = INTERNAL_ERROR if exc.retryable else INVALID_PARAMS
        body = {"error": exc.message, "retryable": exc.retryable}
        raise MCPError(code, f"prompt {name}: {exc.message} (retryable: {str(exc.retryable).lower()})", body) from exc
    except Exception as exc:
        logger.exception("prompt %s failed", name)
        what = f"internal error ({type(exc).__name__}); see the threadloom log"
        raise MCPError(INTERNAL_ERROR, f"prompt {name}: {what}", {"error": what, "retryable": False}) from exc


NO_THREADS = (
    "a team server keeps no threads: thread files stay in your repository, and `threadloom serve --remote URL` "
    "on your machine serves its thread resources and prompts beside the team server's memory"
)


def _threads_here(ctx: Context, name: str) -> None:
    """A team server's session has a project name, not a folder: say so, not "the folder does not exist"."""
    if not connection_of(ctx.request_context).keeps_threads:
        raise MCPError(INVALID_PARAMS, f"{name}: {NO_THREADS}", {"error": NO_THREADS, "retryable": False})


def add_thread_views(server: ThreadloomServer) -> None:
    @server.resource(
        "threadloom://context{?max_tokens}",
        name="context",
        title="Current context",
        description="The active thread's summary with its ancestors' decisions and constraints (Markdown).",
        mime_type="text/markdown",
    )
    async def context_resource(ctx: Context, max_tokens: str = "") -> str:
        _threads_here(ctx, "threadloom://context")
        runtime, prov = await caller(ctx)
        budget = min(max(int(max_tokens), 100), 100_000) if max_tokens.isdigit() and len(max_tokens) < 7 else None
        with _reported():
            return str((await runtime.call(runtime.threads.context, prov, budget)).text)

    @server.resource(
        "threadloom://tree{?project}",
        name="tree",
        title="Thread tree",
        description="This project's threads as an ASCII tree, with status, branch and the active marker.",
        mime_type="text/plain",
    )
    async def tree_resource(ctx: Context, project: str = "") -> str:
        _threads_here(ctx, "threadloom://tree")
        runtime, prov = await caller(ctx)
        with _reported():
            view = await runtime.call(runtime.threads.tree, prov, project or None)
        problems = "".join(f"\n! {p['path']}: {p['error']}" for p in view["problems"])
        return str(view["tree"]) + problems

    @server.resource(
        "threadloom://thread/{thread_id}",
        name="thread",
        title="One thread's summary",
        description="A thread's own summary, without its ancestors.",
        mime_type="text/markdown",
    )
    async def thread_resource(ctx: Context, thread_id: str) -> str:
        _threads_here(ctx, "threadloom://thread")
        runtime, prov = await caller(ctx)
        with _reported():
            thread = await runtime.call(runtime.threads.thread, prov, thread_id)
        return f"# {thread.title} ({thread.status})\n\n{thread.summary.render()}\n"

    @server.prompt(name="context", title="Load the thread context")
    async def context_prompt(ctx: Context) -> str:
        """Loads the active thread's context into the conversation."""
        _threads_here(ctx, "prompt context")
        with _prompt_errors("context"):
            runtime, prov = await caller(ctx)
            assembled = await runtime.call(runtime.threads.context, prov, None)
        return f"Here is the project context from threadloom. Work from it.\n\n{assembled.text}"

    @server.prompt(name="tree", title="Show the thread tree")
    async def tree_prompt(ctx: Context) -> str:
        """Shows the project's thread tree."""
        _threads_here(ctx, "prompt tree")
        with _prompt_errors("tree"):
            runtime, prov = await caller(ctx)
            found = await runtime.call(runtime.threads.tree, prov)
        return "threadloom threads:\n\n" + str(found["tree"])

    @server.prompt(name="create", title="Start a thread")
    def create_prompt(title: str, ctx: Context) -> str:
        """Starts a child thread of the active one for a new topic."""
        steps = f"Call thread_create with title {title!r}, then thread_context, and continue in that thread."
        return _lacking(ctx, "thread_create", "thread_context") or steps

    @server.prompt(name="switch", title="Switch threads")
    def switch_prompt(thread_id: str, ctx: Context) -> str:
        """Switches this session to another thread and loads its context."""
        return _lacking(ctx, "thread_status", "thread_context") or (
            f"Call thread_status with status 'active' and thread_id {thread_id!r}, then thread_context, "
            "and continue from the context it returns."
        )

    @server.prompt(name="summary", title="Save the thread summary")
    def summary_prompt(ctx: Context, text: str = "") -> str:
        """Saves the given summary, or has the agent write one."""
        if lacking := _lacking(ctx, "thread_summary"):
            return lacking
        if text:
            return f"Call thread_summary with this text as the whole summary:\n\n{text}"
        return (
            "Write this thread's summary from our conversation, in sections (## Decisions with their reasons, "
            "## Constraints, ## State, ## Open questions, ## Next steps), short and factual, and save it with "
            "thread_summary. List the files it is about in paths."
        )

    @server.prompt(name="merge", title="Merge the thread into its parent")
    def merge_prompt(ctx: Context) -> str:
        """Folds the finished active thread into its parent."""
        read = "Read the parent's summary (thread_context shows its decisions), write the parent's new summary "
        if lacking := _lacking(ctx, "thread_context", "thread_summary", "thread_status"):
            return lacking
        if "thread_merge" in connection_of(ctx.request_context).toolset:
            return read + "including this thread's conclusions, and call thread_merge with it as parent_summary."
        return (  # the default toolset has no thread_merge: the same steps with the tools it has
            read + "including this thread's conclusions, and save it whole with thread_summary (thread_id: the "
            "parent). Then call thread_status with status 'done' and the outcome as reason, and thread_status "
            "with status 'active' and the parent's thread_id to continue there."
        )


def _lacking(ctx: Context, *tools: str) -> str | None:
    """What a prompt says instead of its steps when they need tools this session is not offered."""
    missing = [t for t in tools if t not in connection_of(ctx.request_context).toolset]
    if not missing:
        return None
    return (
        f"This session is not offered {', '.join(missing)}, which this prompt needs: start the agent with "
        "THREADLOOM_TOOLSET including the threads group (the default set has it)."
    )
