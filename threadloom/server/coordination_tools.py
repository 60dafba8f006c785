"""Coordination tools (group `coordination`): who is here, signals between sessions, catching up."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import Field

from threadloom import requests
from threadloom.coordination.tournament import resumable
from threadloom.errors import InvalidInput
from threadloom.server.connection import caller, connection_of
from threadloom.server.toolsets import RequestKey, ToolDef


async def peers(
    ctx: Context,
    window_s: Annotated[float, Field(ge=1, le=604_800, description="Seen within this many seconds.")] = 900,
    all_projects: Annotated[bool, Field(description="false: only sessions in this project.")] = True,
) -> dict[str, Any]:
    """Who am I, and which other agent sessions are live (yours is marked self): the ids signal_send takes.

    Returns {me: {session: {id, vendor, project, cwd, pid, parent_id, started_at, last_seen_at, transport},
    unread_signals}, peers: [{id, vendor, project, cwd, pid, parent_id, started_at, last_seen_at, self}]}.
    """
    runtime, prov = await caller(ctx)
    me = await runtime.call(runtime.presence.whoami, prov)
    return {"me": me, "peers": await runtime.call(runtime.presence.peers, prov, window_s, not all_projects)}


async def signal_send(
    ctx: Context,
    text: Annotated[str, Field(description="The message.")],
    kind: Annotated[
        Literal["whisper", "broadcast", "ask", "answer"],
        Field(description="whisper/ask: to one session; broadcast: to all live ones; answer: to an ask."),
    ] = "whisper",
    to: Annotated[str | None, Field(description="whisper/ask: session id or prefix.")] = None,
    reply_to: Annotated[int | None, Field(ge=1, le=2**63 - 1, description="answer: the ask's id.")] = None,
    all_projects: Annotated[bool, Field(description="broadcast: not just this project.")] = False,
    wait_s: Annotated[float, Field(ge=0, le=600, description="ask: wait for the answer.")] = 0,
    task_id: Annotated[str | None, Field(description="Tag: a spawned task's id.")] = None,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Tell live agent sessions something, ask them, or answer an ask. Not for what later sessions
    need (memory_store).
    """
    runtime, prov = await caller(ctx)
    if kind == "answer":
        if reply_to is None:
            raise InvalidInput("answer needs `reply_to`: the id of the ask in your inbox")
        sent = await runtime.call(runtime.signals.respond, prov, reply_to, text)
    elif kind == "broadcast":
        sent = await runtime.call(runtime.signals.broadcast, prov, text, all_projects, task_id)
    elif to is None:
        raise InvalidInput(f"{kind} needs `to`: a session id (see peers, or the brief's live peers)")
    elif kind == "ask":
        sent = await runtime.call(runtime.signals.ask, prov, to, text, task_id)
    else:
        sent = await runtime.call(runtime.signals.whisper, prov, to, text, task_id)
    runtime.waiters.notify()
    result = sent.as_dict()
    if kind == "ask" and wait_s > 0 and sent.id is not None:
        ask_id, conn = sent.id, connection_of(ctx.request_context)

        async def answered() -> dict[str, Any] | None:
            await conn.recheck(ctx.request_context)  # an account that lost access while waiting gets nothing
            return await runtime.call(runtime.signals.answer_for, prov, ask_id)

        answer = await runtime.waiters.until(answered, wait_s)
        if answer is not None:  # acknowledged by this connection's next inbox read
            conn.delivered.add(int(answer["id"]))
        result |= {"answer": answer, "timed_out": answer is None}
    return result


async def signal_inbox(
    ctx: Context,
    wait_s: Annotated[float, Field(ge=0, le=600, description="Wait up to this long for one.")] = 0,
    ack: Annotated[int | None, Field(ge=1, le=2**63 - 1, description="Acknowledge up to this id.")] = None,
    include_read: Annotated[bool, Field(description="Also recent read ones.")] = False,
    limit: Annotated[int, Field(ge=1, le=200, description="At most this many of each.")] = 50,
) -> dict[str, Any]:
    """Signals other sessions sent you, oldest first. Call it when the brief or a result shows unread
    signals; answer an ask with signal_send(kind="answer", reply_to=<id>). Your next call marks these
    read. Returns {unread: [{id, sender, kind, body, created_at}], read, unread_left}.
    """
    runtime, prov = await caller(ctx)
    conn = connection_of(ctx.request_context)
    acked, conn.delivered = sorted(conn.delivered), set()
    first_look = True  # follows the gate's check of this very request

    async def arrived() -> dict[str, Any] | None:
        nonlocal acked, first_look
        if not first_look:  # after a wake-up: an account that lost access while waiting gets nothing
            await conn.recheck(ctx.request_context)
        box: dict[str, Any] = await runtime.call(runtime.signals.inbox, prov, acked, ack, limit, include_read)
        acked, first_look = [], False  # acknowledged once: a wait that polls again must not repeat the write
        return box if box["unread"] or wait_s == 0 else None

    found = await runtime.waiters.until(arrived, wait_s)
    if found is None:
        return {"unread": [], "read": [], "unread_left": 0, "timed_out": True}
    conn.delivered = {int(s["id"]) for s in found["unread"]}
    return found | {"timed_out": False}


async def catch_up(
    ctx: Context,
    peek: Annotated[bool, Field(description="Look without moving this session's cursor.")] = False,
    limit: Annotated[int, Field(ge=1, le=500, description="At most this many events.")] = 100,
) -> dict[str, Any]:
    """What other sessions did since you last caught up: memories stored, threads written, signals.
    For a signal's text, signal_inbox.

    Returns {events: [{at, kind, session_id, vendor, project, detail}], more, advanced}.
    """
    runtime, prov = await caller(ctx)
    return await runtime.call(runtime.presence.catch_up, prov, peek, limit)


Agent = Literal["claude", "codex", "gemini", "custom"]


async def spawn(
    ctx: Context,
    prompt: Annotated[str, Field(description="The task; sent on the child's stdin, any length up to 2 MB.")],
    role: Annotated[str | None, Field(description="A name for what the child does (reviewer, tester...).")] = None,
    cwd: Annotated[str | None, Field(description="Working folder; default: this project's root.")] = None,
    agent: Annotated[
        Agent, Field(description="claude -p, codex exec, gemini, or THREADLOOM_SPAWN_COMMAND.")
    ] = "custom",
    model: Annotated[str | None, Field(description="Model name passed to the agent CLI.")] = None,
    timeout_s: Annotated[
        float, Field(ge=1, le=86_400, description="Wall clock; then SIGTERM, SIGKILL, exit 124.")
    ] = 600,
    retries: Annotated[int, Field(ge=0, le=1, description="1: continue once after a timeout.")] = 0,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """Start a child agent on a task that can run beside yours; not for a quick question (signal_send
    ask). It inherits this session's lineage (it shares memory and can signal you); admission is refused
    (retryable) when too many children run or they hold too much memory.

    Returns the task {id, role, agent, cwd, command, pid, status, exit_code, timeout_s, attempt, log_path, ...}.
    """
    runtime, prov = await caller(ctx)
    toolset = connection_of(ctx.request_context).env.get("THREADLOOM_TOOLSET")  # the child gets this session's
    return await runtime.call(
        runtime.spawner.spawn, prov, prompt, role, cwd, agent, model, timeout_s, retries, None, toolset
    )


async def tasks(
    ctx: Context,
    task_id: Annotated[str | None, Field(description="One task, with its log tail and signals.")] = None,
    log_lines: Annotated[int, Field(ge=0, le=500, description="Lines of the log to show.")] = 40,
    all_sessions: Annotated[bool, Field(description="Tasks of all your sessions, not just this one.")] = False,
) -> dict[str, Any]:
    """Your spawned tasks, newest first; or one task with its log tail and the signals it sent. Call it
    to follow the children you started.

    Returns {tasks: [...]} or {task: {...}, log_tail, signals: [{id, sender, kind, body, created_at}]}.
    """
    runtime, prov = await caller(ctx)
    if task_id is None:
        return {"tasks": await runtime.call(runtime.spawner.tasks, prov, all_sessions)}
    task = await runtime.call(runtime.spawner.status, task_id, prov)
    tail = await runtime.call(runtime.spawner.log_tail, task_id, prov, log_lines) if log_lines else ""
    return {"task": task, "log_tail": tail, "signals": await runtime.call(runtime.spawner.task_signals, task_id)}


async def tournament(
    ctx: Context,
    prompt: Annotated[str, Field(description="The question every role answers.")],
    roles: Annotated[list[str], Field(min_length=2, max_length=8, description="2-8 distinct roles.")],
    agent: Annotated[Agent, Field(description="Which agent CLI runs the roles.")] = "custom",
    model: Annotated[str | None, Field(description="Model name passed to the agent CLI.")] = None,
    timeout_s: Annotated[float, Field(ge=1, le=3600, description="Each child's wall clock.")] = 600,
    wait_s: Annotated[float, Field(ge=0, le=3600, description="Wait this long for all to finish.")] = 600,
    idempotency_key: RequestKey = None,
) -> dict[str, Any]:
    """The same prompt to one child per role, in parallel, to compare their answers; each answers by
    signal; returns a digest. For one task, spawn.

    Returns {tournament, finished, entries: [{task, role, status, exit_code, answers: [...], log_tail}],
    missing: [roles that sent no answer], caveats: [why each is silent]}.
    """
    runtime, prov = await caller(ctx)
    toolset = connection_of(ctx.request_context).env.get("THREADLOOM_TOOLSET")
    resume = requests.RESUMING.get()  # a retry of a call killed before it admitted every role: the missing ones start
    tid = await runtime.call(runtime.spawner.tournament, prov, prompt, roles, agent, model, timeout_s, toolset, resume)
    deadline = anyio.current_time() + wait_s
    while True:
        digest = await runtime.call(runtime.spawner.digest, tid, prov)
        if digest["finished"] or anyio.current_time() >= deadline:
            return digest | ({"replayed": True} if resume is not None else {})
        await anyio.sleep(0.5)


COORDINATION_TOOLS: tuple[ToolDef, ...] = (
    ToolDef(peers, "coordination", "Who is here", read_only=True, destructive=False, idempotent=True),
    ToolDef(
        signal_send,
        "coordination",
        "Send a signal",
        read_only=False,
        destructive=False,
        idempotent=False,
        keyed=True,
        default=True,
    ),
    ToolDef(signal_inbox, "coordination", "Inbox", read_only=False, destructive=False, idempotent=False, default=True),
    ToolDef(catch_up, "coordination", "Catch up", read_only=False, destructive=False, idempotent=False),
    ToolDef(
        spawn,
        "agents",
        "Spawn an agent",
        read_only=False,
        destructive=False,
        idempotent=False,
        keyed=True,
        replays_tasks=True,
    ),
    ToolDef(tasks, "agents", "Spawned tasks", read_only=True, destructive=False, idempotent=True),
    ToolDef(
        tournament,
        "agents",
        "Tournament",
        read_only=False,
        destructive=False,
        idempotent=False,
        keyed=True,
        replays_tasks=True,
        resumes=resumable,
    ),
)
