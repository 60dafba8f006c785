"""Spawning child agents: an agent CLI (Claude Code, Codex, Gemini CLI, or a command template from
settings) run with the prompt on stdin, inheriting the parent's session lineage so it shares memory and
can signal the parent. Admission is checked and recorded in one write transaction (admission.py). Each
child runs under a small supervisor process of its own (supervision.py) that enforces the wall clock
even when the spawning process dies: SIGTERM to its process group, SIGKILL after a grace period, exit
code 124; it also ends whatever the child leaves running. A timed-out task may be retried once with a
continuation prompt.
"""

from __future__ import annotations

import logging
import os
import secrets
import shlex
import shutil
import subprocess
import threading
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from threadloom import requests
from threadloom.clock import now_ms
from threadloom.coordination import admission, supervision, tournament
from threadloom.coordination.admission import AdmissionRefused, Attempt, SpawnConfig
from threadloom.coordination.tournament import RoleTaken, admit_once
from threadloom.errors import InvalidInput, NotFound, ThreadloomError
from threadloom.identity import Provenance
from threadloom.scrub import SCRUB, Scrubber
from threadloom.sessions import record_event
from threadloom.store import jobs
from threadloom.store.base import Reader, Store, Writer

__all__ = ["AdmissionRefused", "SpawnConfig", "SpawnService"]
log = logging.getLogger(__name__)

MAX_PROMPT_CHARS: Final = 2_000_000  # on stdin, so far past the argument limit
AGENT_COMMANDS: Final = {
    "claude": "claude -p {model_flag}",
    "codex": "codex exec {model_flag} -",
    "gemini": "gemini {model_flag}",
}
MODEL_FLAGS: Final = {"claude": "--model", "codex": "-m", "gemini": "-m"}
CONTINUE: Final = (
    "You were stopped at your time limit before finishing. Continue the task below from where it stands.\n\n"
)


@dataclass(frozen=True)
class _Launch:
    """One attempt at running a task's child."""

    prov: Provenance
    task_id: str
    argv: list[str]
    prompt: str
    cwd: Path
    timeout_s: float
    retries: int
    log_path: Path
    toolset: str
    attempt: int = 1
    vendor: str | None = None  # the child's agent CLI when threadloom knows it (not for a custom command)


class SpawnService:
    scrubber: Scrubber = SCRUB  # open_runtime sets THREADLOOM_SCRUB_SECRETS's

    def __init__(self, store: Store, home: Path, config: SpawnConfig | None = None) -> None:
        self._store = store
        self._logs = home / "tasks"
        self.config = config or SpawnConfig()
        self.node = jobs.node_id(self.config.node)

    def spawn(
        self,
        prov: Provenance,
        prompt: str,
        role: str | None = None,
        cwd: str | None = None,
        agent: str = "custom",
        model: str | None = None,
        timeout_s: float = 600,
        retries: int = 0,
        tournament: str | None = None,
        toolset: str | None = None,
        kept: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Start a child. `toolset`: the parent session's THREADLOOM_TOOLSET; the child gets those groups
        and `coordination`, so that it can answer (default: the configured toolset). `kept`: what the
        admission keeps with the call's key (default: the task's id)."""
        if not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidInput(f"a prompt is 1-{MAX_PROMPT_CHARS:,} characters")
        if not 1 <= timeout_s <= 86_400:
            raise InvalidInput("timeout_s is 1 second to 1 day")
        if retries not in (0, 1):
            raise InvalidInput("retries is 0 or 1 (one continuation after a timeout)")
        role = self.scrubber.optional(role)  # free text, kept in the task's row and the journal
        workdir = child_workdir(cwd, prov.project)
        argv = self._command(agent, model, workdir)
        task_id = "t_" + secrets.token_hex(6)
        self._logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_path = self._logs / f"{task_id}.log"
        admitted = Attempt(self._logs, task_id, 1)
        admitted.admitted()  # killed before its child starts, this process is seen gone: the task is lost
        try:
            self._admit(prov, task_id, role, agent, workdir, argv, timeout_s, tournament, log_path, kept)
        except BaseException:
            admitted.run_record.unlink(missing_ok=True)
            raise
        child_toolset = with_coordination(toolset or self.config.toolset)
        vendor = agent if agent in AGENT_COMMANDS else None
        self._start(
            _Launch(prov, task_id, argv, prompt, workdir, timeout_s, retries, log_path, child_toolset, vendor=vendor)
        )
        return self.status(task_id)

    def _command(self, agent: str, model: str | None, cwd: Path) -> list[str]:
        if agent == "custom":
            if not self.config.command:
                raise InvalidInput("no spawn command: set THREADLOOM_SPAWN_COMMAND or choose claude, codex or gemini")
            argv = [part.replace("{model}", model or "") for part in shlex.split(self.config.command)]
        elif agent in AGENT_COMMANDS:
            flag = f"{MODEL_FLAGS[agent]} {shlex.quote(model)}" if model else ""
            argv = shlex.split(AGENT_COMMANDS[agent].format(model_flag=flag))
        else:
            raise InvalidInput(f"agent is one of {', '.join([*AGENT_COMMANDS, 'custom'])}")
        # the supervisor starts it: say now, not in the log, that it cannot be found
        found = (cwd / argv[0]).is_file() if "/" in argv[0] else shutil.which(argv[0], path=self._env_path())
        if not found:
            raise InvalidInput(f"could not start {argv[0]}: no such program (on PATH, or under {cwd})")
        return argv

    def _env_path(self) -> str | None:
        return self.config.extra_env.get("PATH", os.environ.get("PATH"))

    def _admit(
        self,
        prov: Provenance,
        task_id: str,
        role: str | None,
        agent: str,
        cwd: Path,
        argv: list[str],
        timeout_s: float,
        tournament: str | None,
        log_path: Path,
        kept: dict[str, Any] | None,
    ) -> None:
        def tx(w: Writer) -> None:
            now = now_ms()
            admit_once(w, tournament, role)
            admission.check(w, self.config, admission.settle(w, self.node, now)[0], now)
            w.execute(
                "INSERT INTO tasks (id, parent_session, owner, role, agent, cwd, command, status, timeout_s, "
                "tournament, log_path, started_at, node) VALUES (:id, :parent, :owner, :role, :agent, :cwd, :cmd, "
                "'starting', :timeout, :tournament, :log, :now, :node)",
                {"id": task_id, "parent": prov.session_id, "owner": prov.viewer().user, "role": role, "agent": agent,
                 "cwd": str(cwd), "cmd": self.scrubber.text(shlex.join(argv)), "timeout": timeout_s,
                 "tournament": tournament, "log": str(log_path), "now": now, "node": self.node},
            )  # fmt: skip
            jobs.beat(w, self.node, now, self.config.node_lease_ms)
            record_event(w, prov, "task.spawned", {"id": task_id, "role": role, "agent": agent})
            # a retry of a call killed before it answered finds its task, or its tournament
            requests.keep(w, kept or {"id": task_id})

        self._store.write(tx)

    def settle(self) -> int:
        """Record the tasks whose spawning process died as they ended (see admission.survey), and keep this
        node's lease alive while it has tasks (other nodes judge them by it); the liveness sweep runs it.
        Only reads when there is nothing to do. Returns how many tasks it recorded."""

        def look(r: Reader) -> bool:
            return bool(admission.survey(r, self.node, now_ms())[1]) or admission.unfinished_here(r, self.node)

        if not self._store.read(look):
            return 0

        def tx(w: Writer) -> int:
            now = now_ms()
            if admission.unfinished_here(w, self.node):
                jobs.beat(w, self.node, now, self.config.node_lease_ms)
            return len(admission.settle(w, self.node, now)[1])

        return self._store.write(tx)

    def replayed(self, earlier: dict[str, Any], prov: Provenance) -> dict[str, Any]:
        """A retried spawn's (or tournament's) answer: the task (the tournament's digest) the first call admitted
        as it is now, after `settle` (a task whose spawning process was killed before its child started reads
        `lost`), never the first answer alone."""
        task, tour = earlier.get("id"), earlier.get("tournament")
        if not isinstance(task, str) and not isinstance(tour, str):
            return earlier
        self.settle()
        try:
            now = self.status(task, prov) if isinstance(task, str) else self.digest(str(tour), prov)
        except NotFound:  # its rows are gone (retention): what the first call answered
            return earlier
        return now | {"replayed": True}

    def unsettled(self) -> int:
        """How many tasks `settle` would record now (their processes gone); only reads."""
        return len(self._store.read(lambda r: admission.survey(r, self.node, now_ms())[1]))

    def _start(self, run: _Launch) -> None:
        attempt = Attempt(self._logs, run.task_id, run.attempt)
        argv = supervision.command(
            str(attempt.exit_record), run.timeout_s, self.config.grace_s, run.argv, self.scrubber.enabled
        )
        try:
            with open(run.log_path, "ab") as log:  # the supervisor and the child keep their own copies
                proc = subprocess.Popen(
                    argv, cwd=run.cwd, env=child_env(run, self.config), stdin=subprocess.PIPE, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
        except OSError as exc:
            self._finish(run.task_id, "failed", None)
            raise InvalidInput(f"could not start the supervisor of {run.argv[0]}: {exc.strerror}") from None
        attempt.started(proc.pid)  # before the pid is in the store: whoever reads the pid finds its start time
        self._store.write(
            lambda w: w.execute(
                "UPDATE tasks SET pid = :pid, status = 'running', attempt = :a WHERE id = :id",
                {"pid": proc.pid, "a": run.attempt, "id": run.task_id},
            )
        )
        threading.Thread(target=_feed, args=(proc, run.prompt), daemon=True).start()
        threading.Thread(
            target=self._watch, args=(run, proc, attempt), daemon=True, name=f"threadloom-watch-{run.task_id}"
        ).start()

    def _watch(self, run: _Launch, proc: subprocess.Popen[bytes], attempt: Attempt) -> None:
        """Record the attempt once its supervisor exits (the supervisor, not this thread, keeps the deadline)."""
        proc.wait()
        outcome = attempt.outcome()
        try:
            if outcome is not None and outcome.reason == "timeout" and run.retries > 0:
                again = replace(run, prompt=CONTINUE + run.prompt, retries=run.retries - 1, attempt=run.attempt + 1)
                self._start(again)
            elif outcome is not None:
                self._finish(run.task_id, outcome.status(), outcome.code)
            else:  # its supervisor was killed before it could say
                self._finish(run.task_id, "lost", None)
        except ThreadloomError as exc:  # a watcher thread has no caller to tell: the task says it
            self._finish(run.task_id, "failed", None)
            log.warning("task %s not continued: %s", run.task_id, exc.message)

    def _finish(self, task_id: str, status: str, code: int | None) -> None:
        log = Path(self.status(task_id)["log_path"])
        self._store.write(lambda w: admission.finish(w, task_id, status, code, log))

    def status(self, task_id: str, prov: Provenance | None = None) -> dict[str, Any]:
        """A task; given a caller, only one their user spawned (any other is "no task")."""
        owner = prov.viewer().user if prov is not None else None
        row = self._store.read(
            lambda r: r.one(
                "SELECT * FROM tasks WHERE id = :id AND (:o IS NULL OR owner = :o)", {"id": task_id, "o": owner}
            )
        )
        if row is None:
            raise NotFound(f"no task {task_id}")
        return dict(row)

    def tasks(self, prov: Provenance, all_sessions: bool = False, limit: int = 50) -> list[dict[str, Any]]:
        """This session's tasks, or (all_sessions) those of every session of the caller's user."""
        where = "owner = :o" if all_sessions else "parent_session = :p AND owner = :o"
        params = {"p": prov.session_id, "o": prov.viewer().user, "n": limit}
        rows = self._store.read(
            lambda r: r.rows(f"SELECT * FROM tasks WHERE {where} ORDER BY started_at DESC LIMIT :n", params)
        )
        return [dict(row) for row in rows]

    def log_tail(self, task_id: str, prov: Provenance, lines: int = 40) -> str:
        task = self.status(task_id, prov)
        path = Path(task["log_path"])
        if not path.exists():
            elsewhere = task["node"] is not None and task["node"] != self.node
            return f"[its log is on node {task['node']}, which ran it]" if elsewhere else ""
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - 64_000))
            text = f.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def tournament(
        self,
        prov: Provenance,
        prompt: str,
        roles: list[str],
        agent: str = "custom",
        model: str | None = None,
        timeout_s: float = 600,
        toolset: str | None = None,
        resume: dict[str, Any] | None = None,
    ) -> str:
        """The same prompt to one child per role, in parallel; each answers by signal. Returns its id. `resume`:
        what a call with the same key kept, killed before admitting every role: only the missing roles start."""
        tournament.check_roles(roles)
        if len(roles) > self.config.max_children:
            raise AdmissionRefused(f"{len(roles)} roles but at most {self.config.max_children} children")
        asking = tournament.asked(prompt, roles, agent, model, timeout_s)
        tour = tournament.resumed(resume, asking) or "tour_" + secrets.token_hex(4)
        if resume is not None:
            self.settle()  # a task whose spawning process was killed before its child started reads lost
        for role in roles:
            with suppress(RoleTaken):
                framed, kept = tournament.framed(role, prompt), {"tournament": tour, "asked": asking}
                self.spawn(prov, framed, role, None, agent, model, timeout_s, 0, tour, toolset, kept)
        return tour

    def digest(self, tour: str, prov: Provenance) -> dict[str, Any]:
        """Each role's status, exit code, what it signalled and the tail of its log; the roles that sent no
        answer (`missing`) and why (`caveats`)."""
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT id FROM tasks WHERE tournament = :t AND owner = :o ORDER BY started_at, id",
                {"t": tour, "o": prov.viewer().user},
            )
        )
        if not rows:
            raise NotFound(f"no tournament {tour}")
        entries = []
        for task_id in (str(row["id"]) for row in rows):
            task = self.status(task_id, prov)
            entries.append(
                {
                    "task": task_id,
                    "role": task["role"],
                    "status": task["status"],
                    "exit_code": task["exit_code"],
                    "answers": [s["body"] for s in self.task_signals(task_id)],
                    "log_tail": self.log_tail(task_id, prov, 5),
                }
            )
        return tournament.digest(tour, entries)

    def task_signals(self, task_id: str) -> list[dict[str, Any]]:
        """Signals tagged with the task or sent by its sessions, in order."""
        # A `task` tag is free text anyone may write: only its sessions' and its owner's signals count.
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT s.id, s.sender, s.kind, s.body, s.created_at FROM signals s WHERE s.sender LIKE :s "
                "OR (s.task = :t AND EXISTS (SELECT 1 FROM sessions x JOIN tasks k ON k.id = :t "
                "WHERE x.id = s.sender AND x.user = k.owner)) ORDER BY s.id",
                {"t": task_id, "s": task_id + "-%"},
            )
        )
        return [dict(row) for row in rows]


def with_coordination(toolset: str) -> str:
    """A parent's toolset plus `coordination`: a child needs signal_send to answer its parent."""
    groups = [g.strip().lower() for g in toolset.split(",") if g.strip()] or ["default"]
    return "full" if "full" in groups else ",".join(dict.fromkeys([*groups, "coordination"]))


def child_env(run: _Launch, config: SpawnConfig) -> dict[str, str]:
    # The child's session is of its own CLI's vendor, never its parent's: the egress policy gives a model only
    # what may reach its maker. A custom command's CLI names itself (its MCP client name, its environment).
    inherited = {k: v for k, v in os.environ.items() if k != "THREADLOOM_VENDOR"}
    return inherited | dict(config.extra_env) | {
        **({"THREADLOOM_VENDOR": run.vendor} if run.vendor else {}),
        "THREADLOOM_PARENT_SESSION": run.prov.session_id or "",
        "THREADLOOM_TASK": run.task_id,
        "THREADLOOM_ROOT": str(run.cwd),
        "THREADLOOM_SESSION_ID": f"{run.task_id}-{run.attempt}",
        "THREADLOOM_TOOLSET": run.toolset,
        # the child acts for whoever spawned it, not for the daemon's default user
        **{k: v for k, v in (("THREADLOOM_USER", run.prov.user), ("THREADLOOM_AUTHOR", run.prov.author),
                             ("THREADLOOM_ORG", run.prov.org)) if v},
    }  # fmt: skip


def child_workdir(cwd: str | None, project: str | None) -> Path:
    """Where a child runs: the session's project, or a folder inside it (resolved, so a link cannot lead out):
    a session may not start an agent anywhere else on the machine."""
    if cwd is not None and len(cwd) > 4_096:
        raise InvalidInput("cwd is at most 4,096 characters")
    base = Path(project or os.getcwd()).resolve()
    try:
        workdir = (base / (cwd or ".")).resolve()
        inside = workdir == base or base in workdir.parents
        if not inside:
            raise InvalidInput(f"cwd {cwd} is outside this session's project {base}; children run inside it")
        if not workdir.is_dir():
            raise InvalidInput(f"cwd {workdir} is not a folder")
    except OSError as exc:
        raise InvalidInput(f"cwd {cwd!r} cannot be used: {exc.strerror}") from None
    return workdir


def _feed(proc: subprocess.Popen[bytes], prompt: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(prompt.encode("utf-8"))
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child stopped reading: its exit code tells the rest
