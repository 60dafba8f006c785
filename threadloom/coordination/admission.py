"""Admission of spawned children: which tasks still hold a slot, as the processes say, and whether one
more fits under the ceilings (children running, the resident memory of their whole process trees, the
tokens and dollars children reported in 24 hours). It is checked and the task recorded in one write
transaction, so racing processes cannot both take the last slot.

Each attempt at a task leaves two small records beside its log: `<task>.<n>.run`, written by the
spawning process (the supervisor's pid and start time, so a recycled pid is never taken for it), and
`<task>.<n>.exit`, written by the supervisor (supervision.py) when the child has ended. Any process of
the same node may then record a task whose spawning process died: `settle`.

Several nodes on one database (a team server): each task records the node that started it
(`jobs.node_id`), and only that node judges it by its pids, which mean nothing on another machine. Another
node's task holds a slot while that node's lease lives (`jobs.beat`, refreshed by its liveness sweep), and
is recorded lost once the lease has expired. Admission counts every node's tasks, under the store's one
writer (on PostgreSQL, an advisory lock every write transaction takes), so nodes racing for the last slot
cannot both take it. The memory budget is this machine's: it counts this node's children alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.coordination import processes
from threadloom.errors import ThreadloomError
from threadloom.store import jobs
from threadloom.store.base import Reader, Writer

DAY_MS: Final = 86_400_000
START_GRACE_MS: Final = 60_000  # an admitted task with no process after this never started
# An outcome this fresh is left to the spawning process while it lives (it may continue the task).
OWNER_GRACE_MS: Final = 60_000


class AdmissionRefused(ThreadloomError):
    """No room for another child now; retry when one finishes."""

    retryable = True


@dataclass(frozen=True)
class SpawnConfig:
    max_children: int = 4
    memory_budget_mb: int = 4096  # resident memory of the running children's process trees together
    # Counted for a child in its first `reserve_s` seconds, until it has had time to grow to its size
    # (an agent CLI reaches ~170 MB in a few seconds): back-to-back spawns cannot all slip under the budget.
    reserve_mb: int = 200
    reserve_s: float = 30.0
    grace_s: float = 5.0
    command: str = ""  # a custom template: `{model}` is replaced, the prompt goes on stdin
    daily_tokens: int = 0  # ceiling over the last 24 hours, from what the CLIs report; 0: none
    daily_cost_usd: float = 0.0
    toolset: str = "default"  # the groups a child's threadloom session gets when its parent's are not given
    extra_env: Mapping[str, str] = field(default_factory=dict)
    node: str = ""  # this server's name among the nodes on one database (THREADLOOM_NODE); see jobs.node_id
    node_lease_ms: int = jobs.NODE_LEASE_MS


@dataclass(frozen=True)
class Outcome:
    code: int
    reason: str  # exited | timeout | stopped | not started (supervision.py)
    at: int

    def status(self) -> str:
        if self.reason == "exited":
            return "done" if self.code == 0 else "failed"
        return "timeout" if self.reason == "timeout" else "failed"


@dataclass(frozen=True)
class Attempt:
    """The records of one attempt at a task (see the module's docstring)."""

    logs: Path
    task_id: str
    number: int

    @property
    def run_record(self) -> Path:
        return self.logs / f"{self.task_id}.{self.number}.run"

    @property
    def exit_record(self) -> Path:
        return self.logs / f"{self.task_id}.{self.number}.exit"

    def started(self, pid: int) -> None:
        """Record the supervisor `pid` this process just started (and this process, which watches it)."""
        me = os.getpid()
        record = {"pid": pid, "start": processes.start_time(pid), "owner": me,
                  "owner_start": processes.start_time(me), "at": now_ms()}  # fmt: skip
        self.run_record.write_text(json.dumps(record))

    def admitted(self) -> None:
        """Record, before the task is admitted, that this process will start it (no supervisor yet)."""
        me = os.getpid()
        self.run_record.write_text(json.dumps({"pid": None, "owner": me, "owner_start": processes.start_time(me)}))

    def supervisor(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.run_record.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def outcome(self) -> Outcome | None:
        """What the supervisor recorded; None while it runs, or if it was killed before it could."""
        try:
            data = json.loads(self.exit_record.read_text())
            return Outcome(int(data["code"]), str(data["reason"]), int(data["at"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Held:
    """A task holding a slot: its supervisor's pid (None while it starts, or on another node), since when it
    runs, and whether it runs on this node."""

    task_id: str
    pid: int | None
    since_ms: int
    local: bool = True


@dataclass(frozen=True)
class Ended:
    """A task whose process has gone, as it ended: `lost` when its supervisor recorded nothing."""

    task_id: str
    status: str
    code: int | None
    log_path: Path


def survey(r: Reader, node: str, now: int) -> tuple[list[Held], list[Ended]]:
    """The unfinished tasks, split into those that still hold a slot and those whose processes have gone.
    This node's (and those from before nodes were recorded) by their processes: as their supervisors
    recorded, or lost; an admitted task that never started, lost. Another node's by its lease (see the
    module's docstring). Only reads."""
    held: list[Held] = []
    ended: list[Ended] = []
    live: set[str] | None = None
    for row in r.rows(
        "SELECT id, pid, attempt, started_at, log_path, node FROM tasks WHERE status IN ('starting', 'running')"
    ):
        task_id, pid, log_path = str(row["id"]), row["pid"], Path(row["log_path"])
        if row["node"] is not None and row["node"] != node:
            live = jobs.live_nodes(r, now) if live is None else live
            if row["node"] in live:
                held.append(Held(task_id, None, int(row["started_at"]), local=False))
            else:
                ended.append(Ended(task_id, "lost", None, log_path))
            continue
        # its records are beside its log, in the home of the process that started it
        attempt = Attempt(log_path.parent, task_id, int(row["attempt"]))
        run = attempt.supervisor() or {}
        if pid is None:  # its supervisor's pid not stored yet: the records say whether it started
            pid = run.get("pid")
            starter = run.get("owner")
            if pid is None and starter is not None and not processes.running(int(starter), run.get("owner_start")):
                ended.append(Ended(task_id, "lost", None, log_path))  # whoever admitted it died before starting it
                continue
        if pid is None:
            if now - int(row["started_at"]) <= START_GRACE_MS:
                held.append(Held(task_id, None, int(row["started_at"])))
            else:
                ended.append(Ended(task_id, "lost", None, log_path))
            continue
        if run.get("pid") != pid:  # a task from before supervisors: the pid is the child's
            run = {"pid": pid, "start": None, "at": row["started_at"]}
        since = int(run["at"])
        if processes.running(int(pid), run["start"]):
            held.append(Held(task_id, int(pid), since))
            continue
        outcome = attempt.outcome()
        watched = run.get("owner") and processes.running(int(run["owner"]), run.get("owner_start"))
        if outcome is not None and watched and now - outcome.at < OWNER_GRACE_MS:
            held.append(Held(task_id, None, since))  # its watcher records it (or continues it) at once
            continue
        status, code = (outcome.status(), outcome.code) if outcome else ("lost", None)
        ended.append(Ended(task_id, status, code, log_path))
    return held, ended


def settle(w: Writer, node: str, now: int) -> tuple[list[Held], list[Ended]]:
    """Record the tasks whose processes have gone (see `survey`): those that still hold a slot, and those."""
    held, ended = survey(w, node, now)
    for task in ended:
        finish(w, task.task_id, task.status, task.code, task.log_path, only_running=True)
    return held, ended


def unfinished_here(r: Reader, node: str) -> bool:
    """Whether this node has a task not yet recorded as finished (its lease must be kept alive)."""
    return r.one("SELECT 1 FROM tasks WHERE node = :n AND status IN ('starting', 'running')", {"n": node}) is not None


def finish(w: Writer, task_id: str, status: str, code: int | None, log: Path, only_running: bool = False) -> None:
    tokens, cost = reported_usage(log)
    w.execute(
        "UPDATE tasks SET status = :s, exit_code = :c, finished_at = :now, tokens = :t, cost_usd = :usd WHERE id = :id"
        + (" AND status IN ('starting', 'running')" if only_running else ""),
        {"s": status, "c": code, "now": now_ms(), "id": task_id, "t": tokens, "usd": cost},
    )


def check(w: Writer, config: SpawnConfig, held: list[Held], now: int) -> None:
    """Refuse (AdmissionRefused, retryable) when one more child would not fit."""
    if len(held) >= config.max_children:
        elsewhere = sum(not task.local for task in held)
        on_nodes = f", {elsewhere} of them on other nodes" if elsewhere else ""
        raise AdmissionRefused(
            f"{len(held)} children are running{on_nodes} (THREADLOOM_SPAWN_MAX_CHILDREN={config.max_children})"
        )
    spent = w.one(
        "SELECT COALESCE(sum(tokens), 0) AS tokens, COALESCE(sum(cost_usd), 0) AS cost FROM tasks "
        "WHERE started_at >= :since",
        {"since": now - DAY_MS},
    )
    assert spent is not None
    if config.daily_tokens and spent["tokens"] >= config.daily_tokens:
        raise AdmissionRefused(f"children used {spent['tokens']:,} tokens in 24 h (ceiling {config.daily_tokens:,})")
    if config.daily_cost_usd and spent["cost"] >= config.daily_cost_usd:
        raise AdmissionRefused(f"children cost ${spent['cost']:.2f} in 24 h (ceiling ${config.daily_cost_usd:.2f})")
    here = [task for task in held if task.local]  # the budget is this machine's memory
    if not here:
        return  # one child may always run, even one expected to need more than the whole budget
    measured, reserved = resident(here, config, now)
    if measured + reserved + config.reserve_mb > config.memory_budget_mb:
        raise AdmissionRefused(
            f"running children hold {measured:.0f} MB and {reserved:.0f} MB more is reserved for those just "
            f"started; another ({config.reserve_mb} MB reserved) would pass the budget of "
            f"{config.memory_budget_mb} MB (THREADLOOM_SPAWN_MEMORY_MB)"
        )


def resident(held: list[Held], config: SpawnConfig, now: int) -> tuple[float, float]:
    """Resident memory the held tasks' process trees use, and how much more is reserved for the young ones
    (a child counts at least `reserve_mb` in its first `reserve_s` seconds)."""
    procs = processes.table()
    measured = reserved = 0.0
    for task in held:
        mb = processes.resident_mb([task.pid], procs) if task.pid is not None else 0.0
        measured += mb
        if now - task.since_ms < config.reserve_s * 1000:
            reserved += max(0.0, config.reserve_mb - mb)
    return measured, reserved


def reported_usage(log_path: Path) -> tuple[int | None, float | None]:
    """Tokens and cost a child's CLI printed as JSON (Claude Code's `--output-format json` result, or
    any line with `usage` / `total_cost_usd`); the last report wins. None when it printed none."""
    if not log_path.exists():
        return None, None
    tokens: int | None = None
    cost: float | None = None
    with open(log_path, "rb") as f:
        f.seek(max(0, log_path.stat().st_size - 256_000))
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    for line in lines:
        line = line.strip()
        if not (line.startswith("{") and ("usage" in line or "cost" in line)):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            tokens = sum(int(v) for k, v in usage.items() if k.endswith("_tokens") and isinstance(v, int | float))
        for key in ("total_cost_usd", "cost_usd"):
            if isinstance(data, dict) and isinstance(data.get(key), int | float):
                cost = float(data[key])
    return tokens, cost
