"""Evolve: one generic scheduled agent job. A loop is data (`Loop`): a prompt template, a schedule, the tools
its child may call and a budget; what differs between the learning loops is only what each gathers for its
child (`Gather`). The candidate reviewer, the auto-review of finished threads and the shadow review of recent
dialog are instances of it (learning/reviewer.py).

One pass of a loop, for one user:
- not due: the last pass it recorded (`job_runs`, every process's) started less than `interval_s` ago, so a
  restarted daemon or a second server does not run it again (the interval's high-water mark);
- single-flight across processes: the pass holds the loop's lease (`job_leases`) while it checks the
  high-water again, looks for a child of the loop still running, and spawns; a second process finds the lease
  held (`busy`) or, once it is free, the pass already recorded (`not due`);
- the budget: at most `daily_spawns` children and `daily_tokens` tokens (as the children's CLIs reported them
  in their usage lines) per user in 24 hours, and `deadline_s` of wall clock per child (the spawn
  supervisor's: a child that never answers is ended at it and its task says `timeout`);
- the child is given the loop's instructions and what was gathered inside threadloom's data fence
  (brief/fence.py): third-party text, never instructions. Its agent CLI runs with THREADLOOM_TOOLSET pinned
  to the loop's toolset on its own command line (spawn adds `coordination` for a child that answers its
  parent; these answer nobody) and, for Claude Code, its built-in tools disallowed and only `tools` allowed.

`status` (loops_status) shows per loop when it last ran, what it gathered, and how its last child ended:
task status, exit code, tokens, and the writes it made (counted by the learning tools per task).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from threadloom.brief.fence import LEGEND, fenced
from threadloom.clock import now_ms
from threadloom.coordination.spawn import SpawnConfig, SpawnService
from threadloom.errors import ThreadloomError
from threadloom.identity import Provenance
from threadloom.scrub import SCRUB, Scrubber
from threadloom.sessions import SessionInfo, SessionService
from threadloom.store import jobs
from threadloom.store.base import Reader, Store, Writer

DAY_MS: Final = 86_400_000
LEASE_MS: Final = 120_000
WRITES: Final = "learning.task.writes:"  # job_cursors: how many writes a loop's child made (per task)
NEW_SKILLS: Final = "learning.task.new_skills:"  # ... how many new skills it made
# Claude Code in print mode without its own tools: only the loop's threadloom tools are left. Flags:
# https://docs.anthropic.com/en/docs/claude-code/cli-reference (--disallowedTools, --allowedTools); MCP tools
# are named mcp__<server>__<tool> (https://docs.claude.com/en/api/agent-sdk/custom-tools, "Tool name format");
# `threadloom setup` registers the server as `threadloom` (setup/clients/claude.py).
CLAUDE_BASE: Final = (
    "claude -p --output-format json --disallowedTools Bash Edit MultiEdit Write NotebookEdit Read Glob Grep LS "
    "WebFetch WebSearch Task TodoWrite --allowedTools"
)


@dataclass(frozen=True)
class Loop:
    """One scheduled agent job."""

    name: str  # the job's name in job_runs, job_leases and job_cursors (with ":<user>")
    role: str  # its children's task role
    instructions: str  # the prompt, before the fenced data
    interval_s: float  # at most one pass per interval
    tools: tuple[str, ...]  # the MCP tools its child may call
    toolset: str = "learning"
    deadline_s: float = 600.0
    daily_spawns: int = 24
    daily_tokens: int = 400_000  # 0: no ceiling of the loop's own (the spawn ceilings still hold)


@dataclass(frozen=True)
class Gathered:
    """What a loop's child is to look at: one line per item (cleaned with fence.one_line), the position the
    loop's cursor moves to once they are handed over, and a summary for status."""

    lines: list[str]
    cursor: int
    detail: dict[str, Any] = field(default_factory=dict)


# (reader, user, cursor) -> what is new past the cursor, for that user
Gather = Callable[[Reader, str, int], Gathered]


@dataclass
class PassReport:
    loop: str
    did: str = "nothing"  # spawned | idle | not due | busy | over budget | no agent | refused
    task: str | None = None
    items: int = 0
    why: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = {"did": self.did, "task": self.task, "items": self.items} | self.detail
        return out | ({"why": self.why} if self.why else {})


class EvolveJob:
    def __init__(
        self,
        store: Store,
        home: Path,
        spawn: SpawnConfig,
        user: str,
        loop: Loop,
        gather: Gather,
        *,
        agent: str = "claude",
        scrubber: Scrubber = SCRUB,
    ) -> None:
        self.store, self.user, self.loop, self.gather = store, user, loop, gather
        self.spawner = SpawnService(store, home, replace(spawn, command=child_command(agent, spawn.command, loop)))
        self.spawner.scrubber = scrubber
        self.workdir = home / "learning-loops"  # empty: the child has no repository to read or change
        self.job = f"{loop.name}:{user}"
        digest = hashlib.sha256(f"{loop.name}\0{user}".encode()).hexdigest()[:16]
        self.session = SessionInfo(f"{loop.role}-{digest}", "other", "job", None, None, os.getpid(),
                                   origin=f"job:{loop.role}", user=user)  # fmt: skip

    def run(self, force: bool = False) -> PassReport:
        """One pass (see the module's docstring); `force` ignores the interval, never the lease or budget."""
        report = PassReport(self.loop.name)
        if not self.spawner.config.command:
            report.did, report.why = "no agent", "no agent command (custom needs THREADLOOM_SPAWN_COMMAND)"
            return report
        now = now_ms()
        if not force and self.store.read(lambda r: self._due_at(r) > now):
            report.did = "not due"
            return report
        holder = jobs.holder_id()
        if not self.store.write(lambda w: jobs.acquire(w, self.job, holder, now, LEASE_MS)):
            report.did, report.why = "busy", "another process holds this loop's pass"
            return report
        record = False
        try:
            record = self._under_lease(report, force)
        finally:

            def close(w: Writer) -> None:
                if record:
                    jobs.record_run(w, self.job, now, now_ms(), False, report.as_dict())
                jobs.release(w, self.job, holder)

            self.store.write(close)
        return report

    def _under_lease(self, report: PassReport, force: bool) -> bool:
        """The pass proper; whether it is to be recorded (a pass that changed nothing is not)."""
        now = now_ms()
        if not force and self.store.read(lambda r: self._due_at(r) > now):
            report.did = "not due"  # another process's pass was recorded while this one waited
            return False
        if self.store.read(self._running):
            report.did, report.why = "busy", "the loop's last child is still running"
            return False
        spawns, tokens = self.store.read(lambda r: self._spent(r, now))
        if spawns >= self.loop.daily_spawns or 0 < self.loop.daily_tokens <= tokens:
            report.did = "over budget"
            report.why = f"{spawns} children and {tokens:,} tokens in 24 h (at most {self.loop.daily_spawns} and " \
                f"{self.loop.daily_tokens:,})"  # fmt: skip
            return True
        gathered = self.store.read(lambda r: self.gather(r, self.user, jobs.cursor(r, self.job)))
        report.items, report.detail = len(gathered.lines), gathered.detail
        if gathered.lines:
            try:
                report.task = self._spawn(gathered.lines)
                report.did = "spawned"
            except ThreadloomError as exc:  # admission refused, no such program: said in status, retried
                report.did, report.why = "refused", exc.message
                return True
        else:
            report.did = "idle"
        self.store.write(lambda w: jobs.set_cursor(w, self.job, gathered.cursor))
        return True

    def prompt(self, lines: Sequence[str]) -> str:
        return "\n".join([self.loop.instructions, "", LEGEND, *fenced(list(lines)), ""])

    def _spawn(self, lines: Sequence[str]) -> str:
        sessions = SessionService(self.store)
        sessions.open(self.session)  # the child's parent: its writes are a loop's (origin loop)
        sessions.close(self.session)
        self.workdir.mkdir(mode=0o700, exist_ok=True)
        prov = Provenance(self.session.id, "other", str(self.workdir), origin=self.session.origin, user=self.user)
        task = self.spawner.spawn(
            prov, self.prompt(lines), role=self.loop.role, agent="custom", timeout_s=self.loop.deadline_s
        )
        return str(task["id"])

    def _due_at(self, r: Reader) -> int:
        last = jobs.last_run(r, self.job)
        return 0 if last is None else int(last["started_at"]) + int(self.loop.interval_s * 1000)

    def _running(self, r: Reader) -> bool:
        found = r.one(
            "SELECT 1 FROM tasks WHERE owner = :u AND role = :role AND status IN ('starting', 'running')",
            {"u": self.user, "role": self.loop.role},
        )
        return found is not None

    def _spent(self, r: Reader, now: int) -> tuple[int, int]:
        row = r.one(
            "SELECT COUNT(*) AS n, COALESCE(SUM(tokens), 0) AS t FROM tasks WHERE owner = :u AND role = :role "
            "AND started_at >= :since",
            {"u": self.user, "role": self.loop.role, "since": now - DAY_MS},
        )
        return (int(row["n"]), int(row["t"])) if row else (0, 0)


def child_command(agent: str, custom: str, loop: Loop) -> str:
    """The command a loop's child runs: its toolset set on the command itself (after spawn's environment);
    empty when there is none to run."""
    if agent == "claude":
        allowed = " ".join(f"mcp__threadloom__{t}" for t in loop.tools)
        return f"env THREADLOOM_TOOLSET={loop.toolset} THREADLOOM_VENDOR=claude {CLAUDE_BASE} {allowed}"
    return f"env THREADLOOM_TOOLSET={loop.toolset} {custom}" if custom.strip() else ""


def reserve_new_skill(w: Writer, task: str, cap: int) -> bool:
    """Take one of a loop child's `cap` new skills; False when they are all taken."""
    made = jobs.cursor(w, NEW_SKILLS + task)
    if made >= cap:
        return False
    jobs.set_cursor(w, NEW_SKILLS + task, made + 1)
    return True


def release_new_skill(w: Writer, task: str) -> None:
    """Give back a reservation whose write was refused."""
    jobs.set_cursor(w, NEW_SKILLS + task, max(0, jobs.cursor(w, NEW_SKILLS + task) - 1))


def count_write(w: Writer, task: str) -> None:
    jobs.set_cursor(w, WRITES + task, jobs.cursor(w, WRITES + task) + 1)


def loops_status(store: Store, user: str, loops: Sequence[tuple[Loop, bool]]) -> dict[str, Any]:
    """For `status`: per loop, whether it is on, its interval, when it last ran and what it did, and how its
    last child ended (a child that never answered says timeout; one that wrote nothing, writes 0)."""

    def read(r: Reader) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for loop, enabled in loops:
            last = jobs.last_run(r, f"{loop.name}:{user}")
            entry: dict[str, Any] = {"enabled": enabled, "interval_s": loop.interval_s, "last_pass": None}
            if last is not None:
                entry["last_pass"] = {"finished_at": last["finished_at"], "did": last["outcome"]}
            child = _last_child(r, user, loop.role)
            if child is not None:
                entry["last_child"] = child
            out[loop.name] = entry
        return out

    return store.read(read)


def _last_child(r: Reader, user: str, role: str) -> dict[str, Any] | None:
    row = r.one(
        "SELECT id, status, exit_code, tokens, started_at, finished_at FROM tasks WHERE owner = :u AND role = :role "
        "ORDER BY started_at DESC, rowid DESC LIMIT 1",
        {"u": user, "role": role},
    )
    if row is None:
        return None
    task = str(row["id"])
    return {
        "task": task,
        "status": row["status"],
        "exit_code": row["exit_code"],
        "tokens": row["tokens"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "writes": jobs.cursor(r, WRITES + task),
        "new_skills": jobs.cursor(r, NEW_SKILLS + task),
    }
