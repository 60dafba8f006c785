"""Rows of every kind retention covers, dated, for one user: transcripts through the real ingester (Claude Code
JSONL files in the user's home; threadloom/transcripts/claude_code.py cites the format), the rest as the
services write them (a session, its signals and deliveries, journal events, replay records, tasks with their
files in `<home>/tasks`, pruned memories' archive rows, job runs, self-test results). Shared by
tests/test_retention.py, tests/test_compaction.py and bench/year.py."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from threadloom.ingest.service import IngestConfig, Ingester
from threadloom.store.base import Store, Writer

DAY = 86_400_000
WORDS = [
    "deploy",
    "cart",
    "invoice",
    "parser",
    "schema",
    "retry",
    "cache",
    "token",
    "branch",
    "review",
    "merge",
    "lint",
    "flaky",
    "test",
    "migration",
    "index",
    "queue",
    "worker",
    "latency",
    "budget",
    "rollout",
    "canary",
    "checkout",
    "payment",
    "refund",
    "webhook",
    "session",
    "cookie",
    "header",
    "proxy",
]


def text(seed: int, words: int) -> str:
    """Plain varied prose: enough distinct terms that the full-text index has real postings to hold."""
    return " ".join(f"{WORDS[(seed * 7 + i * 13) % len(WORDS)]}{(seed + i) % 97}" for i in range(words))


def _line(uuid: str, session: str, at: int, cwd: str, body: str, role: str) -> str:
    when = datetime.fromtimestamp(at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    envelope = {"type": role, "uuid": uuid, "sessionId": session, "timestamp": when, "cwd": cwd}
    return json.dumps(envelope | {"message": {"role": role, "content": body}})


def transcript(user_home: Path, session: str, at: int, messages: int, words: int = 40) -> None:
    """One Claude Code session file of `messages` turns from `at`, a minute apart."""
    folder = user_home / ".claude" / "projects" / "-repo-shop"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        _line(f"{session}-{i}", session, at + i * 60_000, "/repo/shop", text(hash((session, i)) % 10_000, words),
              "user" if i % 2 == 0 else "assistant")
        for i in range(messages)
    ]  # fmt: skip
    (folder / f"{session}.jsonl").write_text("\n".join(lines) + "\n")


def ingest(store: Store, owner: str, user_home: Path) -> None:
    Ingester(store, IngestConfig(owner, user_home, {})).run()


def session(w: Writer, session_id: str, user: str, at: int) -> None:
    w.execute(
        "INSERT INTO sessions (id, vendor, transport, origin, started_at, last_seen_at, ended_at, user) "
        "VALUES (:id, 'claude', 'stdio', 'test', :at, :at, :at, :u) ON CONFLICT (id) DO NOTHING",
        {"id": session_id, "at": at, "u": user},
    )


def signal(w: Writer, sender: str, recipient: str, at: int, body: str) -> int:
    signal_id = w.insert(
        "INSERT INTO signals (sender, kind, body, created_at) VALUES (:s, 'whisper', :b, :at)",
        {"s": sender, "b": body, "at": at},
    )
    w.execute(
        "INSERT INTO signal_deliveries (recipient, signal_id, read_at) VALUES (:r, :i, :at)",
        {"r": recipient, "i": signal_id, "at": at},
    )
    return signal_id


def event(w: Writer, session_id: str | None, at: int, kind: str = "tool.call", detail: Any = None) -> int:
    body = detail if detail is not None else {"tool": "memory_recall", "ok": True, "ms": 12.5}
    return w.insert(
        "INSERT INTO events (at, kind, session_id, vendor, origin, detail) VALUES (:at, :k, :s, 'claude', 'test', :d)",
        {"at": at, "k": kind, "s": session_id, "d": json.dumps(body)},
    )


def replay(w: Writer, owner: str, key: str, at: int) -> None:
    w.execute(
        "INSERT INTO tool_requests (owner, tool, key, nonce, result, created_at) VALUES (:o, 'memory_store', :k, "
        "'n', '{\"id\": \"m1\"}', :at)",
        {"o": owner, "k": key, "at": at},
    )


def task(
    w: Writer, logs: Path, task_id: str, owner: str, at: int, status: str = "done", log_bytes: int = 2_000
) -> None:
    """A spawned task's row and its files as spawn.py and the supervisor leave them."""
    finished = None if status in ("starting", "running") else at + 60_000
    w.execute(
        "INSERT INTO tasks (id, agent, cwd, command, status, timeout_s, log_path, started_at, finished_at, owner) "
        "VALUES (:id, 'custom', '/repo/shop', 'agent -p', :st, 600, :log, :at, :fin, :o)",
        {"id": task_id, "st": status, "log": str(logs / f"{task_id}.log"), "at": at, "fin": finished, "o": owner},
    )
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    (logs / f"{task_id}.log").write_bytes(b"x" * log_bytes)
    (logs / f"{task_id}.1.exit").write_text('{"code": 0}')
    stamp = (finished or at) / 1000
    for name in (f"{task_id}.log", f"{task_id}.1.exit"):
        os.utime(logs / name, (stamp, stamp))


def archived(w: Writer, memory_id: str, owner: str, at: int) -> None:
    payload = {"memory": {"id": memory_id, "owner": owner, "content": text(len(memory_id), 20), "created_at": at}}
    w.execute(
        "INSERT INTO memory_archive (id, payload, pruned_at, owner) VALUES (:id, :p, :at, :o)",
        {"id": memory_id, "p": json.dumps(payload), "at": at, "o": owner},
    )


def job_run(w: Writer, name: str, at: int) -> None:
    w.execute(
        "INSERT INTO job_runs (name, started_at, finished_at, dry_run, outcome) VALUES (:n, :at, :at, 0, '{}')",
        {"n": name, "at": at},
    )


def probe(w: Writer, at: int) -> None:
    w.execute(
        "INSERT INTO probe_results (run_id, at, category, ok, ms, trigger) VALUES ('r', :at, 'store', 1, 3.5, 'test')",
        {"at": at},
    )
