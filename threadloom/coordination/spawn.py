"""Spawning child agents: an agent CLI (Claude Code, Codex, Gemini CLI, or a command template from
settings) run with the prompt on stdin, inheriting the parent's session lineage so it shares
memory and can signal the parent. Admission is checked and recorded in one write transaction, so
two processes cannot both take the last slot. A watchdog thread per child enforces the wall clock:
SIGTERM to its process group, SIGKILL after a grace period, exit code 124; a timed-out task may be
retried once with a continuation prompt.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound, ThreadloomError
from threadloom.identity import Provenance
from threadloom.sessions import record_event
from threadloom.store.base import Store, Writer

TIMEOUT_EXIT: Final = 124
DAY_MS: Final = 86_400_000
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


class AdmissionRefused(ThreadloomError):
    """No room for another child now; retry when one finishes."""

    retryable = True


@dataclass(frozen=True)
class SpawnConfig:
    max_children: int = 4
    memory_budget_mb: int = 4096  # resident memory of the running children together
    grace_s: float = 5.0
    command: str = ""  # a custom template: `{model}` is replaced, the prompt goes on stdin
    daily_tokens: int = 0  # ceiling over the last 24 hours, from what the CLIs report; 0: none
    daily_cost_usd: float = 0.0
    extra_env: Mapping[str, str] = field(default_factory=dict)


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
    attempt: int = 1


class SpawnService:
    def __init__(self, store: Store, home: Path, config: SpawnConfig | None = None) -> None:
        self._store = store
        self._logs = home / "tasks"
        self.config = config or SpawnConfig()

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
    ) -> dict[str, Any]:
        if not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidInput(f"a prompt is 1-{MAX_PROMPT_CHARS:,} characters")
        if not 1 <= timeout_s <= 86_400:
            raise InvalidInput("timeout_s is 1 second to 1 day")
        if retries not in (0, 1):
            raise InvalidInput("retries is 0 or 1 (one continuation after a timeout)")
        workdir = child_workdir(cwd, prov.project)
        argv = self._command(agent, model)
        task_id = "t_" + secrets.token_hex(6)
        self._logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_path = self._logs / f"{task_id}.log"
        self._admit(prov, task_id, role, agent, workdir, argv, timeout_s, tournament, log_path)
        self._start(_Launch(prov, task_id, argv, prompt, workdir, timeout_s, retries, log_path))
        return self.status(task_id)

    def _command(self, agent: str, model: str | None) -> list[str]:
        if agent == "custom":
            if not self.config.command:
                raise InvalidInput("no spawn command: set THREADLOOM_SPAWN_COMMAND or choose claude, codex or gemini")
            return [part.replace("{model}", model or "") for part in shlex.split(self.config.command)]
        if agent not in AGENT_COMMANDS:
            raise InvalidInput(f"agent is one of {', '.join([*AGENT_COMMANDS, 'custom'])}")
        flag = f"{MODEL_FLAGS[agent]} {shlex.quote(model)}" if model else ""
        return shlex.split(AGENT_COMMANDS[agent].format(model_flag=flag))

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
    ) -> None:
        def tx(w: Writer) -> None:
            running = []
            now = now_ms()
            for tid, pid, started in w.tuples(
                "SELECT id, pid, started_at FROM tasks WHERE status IN ('starting', 'running')"
            ):
                if (pid and not _alive(int(pid))) or (not pid and now - int(started) > 60_000):
                    # its watchdog's process died with it, or never started it: not running any more
                    w.execute(
                        "UPDATE tasks SET status = 'lost', finished_at = :now WHERE id = :id", {"now": now, "id": tid}
                    )
                else:
                    running.append((str(tid), pid))
            if len(running) >= self.config.max_children:
                raise AdmissionRefused(
                    f"{len(running)} children are running (THREADLOOM_SPAWN_MAX_CHILDREN={self.config.max_children})"
                )
            spent = w.one(
                "SELECT COALESCE(sum(tokens), 0) AS tokens, COALESCE(sum(cost_usd), 0) AS cost FROM tasks "
                "WHERE started_at >= :since",
                {"since": now_ms() - DAY_MS},
            )
            assert spent is not None
            if self.config.daily_tokens and spent["tokens"] >= self.config.daily_tokens:
                raise AdmissionRefused(
                    f"children used {spent['tokens']:,} tokens in 24 h (ceiling {self.config.daily_tokens:,})"
                )
            if self.config.daily_cost_usd and spent["cost"] >= self.config.daily_cost_usd:
                raise AdmissionRefused(
                    f"children cost ${spent['cost']:.2f} in 24 h (ceiling ${self.config.daily_cost_usd:.2f})"
                )
            resident = sum(_rss_mb(pid) for _, pid in running if pid)
            if resident >= self.config.memory_budget_mb:
                raise AdmissionRefused(
                    f"running children hold {resident:.0f} MB (budget {self.config.memory_budget_mb} MB)"
                )
            w.execute(
                "INSERT INTO tasks (id, parent_session, owner, role, agent, cwd, command, status, timeout_s, "
                "tournament, log_path, started_at) VALUES (:id, :parent, :owner, :role, :agent, :cwd, :cmd, "
                "'starting', :timeout, :tournament, :log, :now)",
                {"id": task_id, "parent": prov.session_id, "owner": prov.viewer().user, "role": role, "agent": agent,
                 "cwd": str(cwd),
                 "cmd": shlex.join(argv), "timeout": timeout_s, "tournament": tournament, "log": str(log_path),
                 "now": now_ms()},
            )  # fmt: skip
            record_event(w, prov, "task.spawned", {"id": task_id, "role": role, "agent": agent})

        self._store.write(tx)

    def _start(self, run: _Launch) -> None:
        env = dict(os.environ) | dict(self.config.extra_env) | {
            "THREADLOOM_PARENT_SESSION": run.prov.session_id or "",
            "THREADLOOM_TASK": run.task_id,
            "THREADLOOM_ROOT": str(run.cwd),
            "THREADLOOM_SESSION_ID": f"{run.task_id}-{run.attempt}",
            # the child acts for whoever spawned it, not for the daemon's default user
            **{k: v for k, v in (("THREADLOOM_USER", run.prov.user), ("THREADLOOM_AUTHOR", run.prov.author),
                                 ("THREADLOOM_ORG", run.prov.org)) if v},
        }  # fmt: skip
        try:
            log = open(run.log_path, "ab")  # noqa: SIM115 - handed to the child, closed by the watchdog
            proc = subprocess.Popen(
                run.argv, cwd=run.cwd, env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            self._finish(run.task_id, "failed", None)
            raise InvalidInput(f"could not start {run.argv[0]}: {exc.strerror}") from None
        self._store.write(
            lambda w: w.execute(
                "UPDATE tasks SET pid = :pid, status = 'running', attempt = :a WHERE id = :id",
                {"pid": proc.pid, "a": run.attempt, "id": run.task_id},
            )
        )
        threading.Thread(target=_feed, args=(proc, run.prompt), daemon=True).start()
        threading.Thread(
            target=self._watch, args=(run, proc, log), daemon=True, name=f"threadloom-watchdog-{run.task_id}"
        ).start()

    def _watch(self, run: _Launch, proc: subprocess.Popen[bytes], log: Any) -> None:
        try:
            code = proc.wait(timeout=run.timeout_s)
            self._finish(run.task_id, "done" if code == 0 else "failed", code)
            return
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=self.config.grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        finally:
            log.close()
        if run.retries > 0:
            self._start(replace(run, prompt=CONTINUE + run.prompt, retries=run.retries - 1, attempt=run.attempt + 1))
            return
        self._finish(run.task_id, "timeout", TIMEOUT_EXIT)

    def _finish(self, task_id: str, status: str, code: int | None) -> None:
        tokens, cost = reported_usage(Path(self.status(task_id)["log_path"]))
        self._store.write(
            lambda w: w.execute(
                "UPDATE tasks SET status = :s, exit_code = :c, finished_at = :now, tokens = :t, cost_usd = :usd "
                "WHERE id = :id",
                {"s": status, "c": code, "now": now_ms(), "id": task_id, "t": tokens, "usd": cost},
            )
        )

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
        path = Path(self.status(task_id, prov)["log_path"])
        if not path.exists():
            return ""
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
    ) -> str:
        """The same prompt to one child per role, in parallel; each answers by signal. Returns its id."""
        if not 2 <= len(roles) <= 8 or len(set(roles)) != len(roles):
            raise InvalidInput("a tournament has 2-8 distinct roles")
        if len(roles) > self.config.max_children:
            raise AdmissionRefused(f"{len(roles)} roles but at most {self.config.max_children} children")
        tournament = "tour_" + secrets.token_hex(4)
        for role in roles:
            framed = (
                f"You are the {role}. Answer the task below from that role, then send your answer to the "
                f"parent session with threadloom's signal_send (kind whisper, to $THREADLOOM_PARENT_SESSION).\n\n"
                f"{prompt}"
            )
            self.spawn(prov, framed, role, None, agent, model, timeout_s, 0, tournament)
        return tournament

    def digest(self, tournament: str, prov: Provenance) -> dict[str, Any]:
        """Each role's status, exit code, what it signalled, and the tail of its log."""
        rows = self._store.read(
            lambda r: r.rows(
                "SELECT id FROM tasks WHERE tournament = :t AND owner = :o ORDER BY started_at, id",
                {"t": tournament, "o": prov.viewer().user},
            )
        )
        if not rows:
            raise NotFound(f"no tournament {tournament}")
        entries = []
        for (task_id,) in ((row["id"],) for row in rows):
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
        finished = all(e["status"] not in ("starting", "running") for e in entries)
        return {"tournament": tournament, "finished": finished, "entries": entries}

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


def _feed(proc: subprocess.Popen[bytes], prompt: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(prompt.encode("utf-8"))
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child stopped reading: its exit code tells the rest


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0
