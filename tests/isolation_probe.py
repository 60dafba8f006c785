"""The probe of the isolation matrix: one wrong-user client, every answer it gets checked for what it must not see.

A `Probe` wraps a real MCP client. Each tool call, resource read or prompt is checked twice over:
its whole answer (content, structured content, error text) must hold none of the needles the caller
must not see, unless the caller itself sent that needle; and a call given one of the victim's hidden
values is made again with a made-up value of the same shape, and the two answers must be the same
error (or both succeed), so the hidden value is indistinguishable from one that does not exist.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.shared.exceptions import MCPError

Expect = Callable[[dict[str, Any]], str | None]


@dataclass
class Answer:
    text: str  # everything the caller received
    error: str | None  # the error message, if it was one
    data: dict[str, Any]


@dataclass
class Probe:
    label: str
    client: Client
    forbidden: Mapping[str, str]  # needle -> what it is
    sent: set[str] = field(default_factory=set)  # every string this user has sent (shared by one user's probes)
    findings: list[str] = field(default_factory=list)
    tools: Counter[str] = field(default_factory=Counter)
    resources: Counter[str] = field(default_factory=Counter)
    prompts: Counter[str] = field(default_factory=Counter)

    @property
    def calls(self) -> int:
        return sum(self.tools.values()) + sum(self.resources.values()) + sum(self.prompts.values())

    async def tool(
        self,
        name: str,
        args: dict[str, Any],
        hidden: str | int | None = None,
        expect: Expect | None = None,
        journal: bool = False,
    ) -> dict[str, Any]:
        """Call a tool (and, given a hidden value in `args`, its twin); the structured answer. `journal`: the
        answer lists the user's own past calls, so what they sent before may come back."""
        answer = await self._ask("tool", name, args, hidden, journal)
        if expect is not None and (problem := expect(answer.data)) is not None:
            self._find("tool", name, args, problem, answer.text)
        return answer.data

    async def resource(self, uri: str, hidden: str | None = None) -> str:
        return (await self._ask("resource", uri, {}, hidden)).text

    async def prompt(self, name: str, args: dict[str, str], hidden: str | None = None) -> str:
        return (await self._ask("prompt", name, args, hidden)).text

    def listing(self, what: str, result: Any) -> None:
        self._scan(what, "list", {}, result.model_dump_json(by_alias=True))

    def read_under(self, prefix: str) -> bool:
        return any(uri.startswith(prefix) for uri in self.resources)

    async def _ask(
        self, kind: str, name: str, args: dict[str, Any], hidden: str | int | None, journal: bool = False
    ) -> Answer:
        answer = await self._once(kind, name, args)
        self._scan(kind, name, args, answer.text, journal)
        if hidden is not None:
            fake = twin(hidden)
            fake_args = swap(args, hidden, fake)
            other = await self._once(kind, swap(name, hidden, fake), fake_args)
            self._scan(kind, name, fake_args, other.text)
            mine, theirs = masked(answer.error, hidden), masked(other.error, fake)
            if (answer.error is None) != (other.error is None) or mine != theirs:
                self._find(kind, name, args, "differs from a made-up id", f"{mine!r} vs {theirs!r}")
        return answer

    async def _once(self, kind: str, name: str, args: dict[str, Any]) -> Answer:
        self.sent.add(json.dumps(args) + name)
        try:
            if kind == "tool":
                self.tools[name] += 1
                result = await self.client.call_tool(name, args)
                data = dict(result.structured_content or {})
                error = str(data.get("error") or result.content) if result.is_error else None
                return Answer(result.model_dump_json(by_alias=True), error, data)
            if kind == "resource":
                self.resources[name.split("?")[0]] += 1
                read = await self.client.read_resource(name)
                return Answer(read.model_dump_json(by_alias=True), None, {})
            self.prompts[name] += 1
            got = await self.client.get_prompt(name, args)
            return Answer(got.model_dump_json(by_alias=True), None, {})
        except MCPError as exc:
            message = f"{exc} {json.dumps(exc.error.data) if exc.error.data is not None else ''}".strip()
            return Answer(message, message, {})

    def _scan(self, kind: str, name: str, args: dict[str, Any], text: str, journal: bool = False) -> None:
        sent = "\n".join(self.sent) if journal else json.dumps(args) + name
        for needle, what in self.forbidden.items():
            if needle in text and needle not in sent:
                at = text.index(needle)
                self._find(kind, name, args, f"shows {what}", text[max(0, at - 160) : at + 80])

    def _find(self, kind: str, name: str, args: dict[str, Any], problem: str, excerpt: str) -> None:
        self.findings.append(f"{self.label} {kind} {name} {json.dumps(args)}: {problem}: {excerpt}")


def twin(value: str | int) -> str | int:
    """A made-up value of the same shape: an id's prefix kept, each other character replaced by one of its class
    (hex digits stay hex digits), punctuation kept."""
    if isinstance(value, int):
        return 900_000_000 + value
    found = _ID.fullmatch(value)
    prefix, hexed = (found[1], found[2]) if found else ("", value)
    pools = ("0123456789abcdef",) if prefix else (string.ascii_lowercase, string.ascii_uppercase, string.digits)
    return prefix + "".join(
        secrets.choice(pool) if (pool := next((p for p in pools if ch in p), None)) else ch for ch in hexed
    )


_ID = re.compile(r"([a-z]+_)([0-9a-f]+)")


def swap(value: Any, old: str | int, new: str | int) -> Any:
    """`value` (arguments, or a URI) with `new` in place of `old`."""
    if isinstance(value, str) and isinstance(old, str):
        return value.replace(old, str(new))
    if isinstance(value, int) and not isinstance(value, bool) and value == old:
        return new
    if isinstance(value, list):
        return [swap(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: swap(v, old, new) for k, v in value.items()}
    return value


def masked(message: str | None, value: str | int) -> str | None:
    if message is None:
        return None
    return re.sub(rf"(?<![\w-]){re.escape(str(value))}(?![\w-])", "<ID>", message)


def dump_rows(db: Path, user: str) -> dict[str, Any]:
    """Everything of `user`'s a wrong user must not change, read from the store file."""
    from threadloom.store.sqlite import SqliteStore

    store = SqliteStore(db)
    mine = "SELECT id FROM memories WHERE owner = :u"
    private = "SELECT id FROM memories WHERE owner = :u AND visibility <> 'project'"
    sessions = "SELECT id FROM sessions WHERE user = :u"
    queries = {
        "memories": "SELECT * FROM memories WHERE owner = :u ORDER BY id",
        "entities": f"SELECT * FROM memory_entities WHERE memory_id IN ({mine}) ORDER BY memory_id, entity",
        "edges": f"SELECT * FROM memory_edges WHERE source IN ({mine}) OR target IN ({private}) ORDER BY id",
        "archive": "SELECT * FROM memory_archive WHERE owner = :u ORDER BY id",
        "notes": "SELECT * FROM thread_notes WHERE owner = :u ORDER BY id",
        "tasks": "SELECT * FROM tasks WHERE owner = :u ORDER BY id",
        "sessions": "SELECT id, vendor, project, cwd, user, org, parent_id, started_at, ended_at FROM sessions "
        "WHERE user = :u ORDER BY id",
        "signals": f"SELECT * FROM signals WHERE sender IN ({sessions}) ORDER BY id",
        "deliveries": "SELECT d.*, s.sender, (SELECT user FROM sessions WHERE id = s.sender) AS sender_user "
        f"FROM signal_deliveries d JOIN signals s ON s.id = d.signal_id "
        f"WHERE d.recipient IN ({sessions}) ORDER BY d.signal_id, d.recipient",
        "cursors": f"SELECT * FROM session_cursors WHERE session_id IN ({sessions}) ORDER BY session_id",
        "events": f"SELECT id, kind, session_id, detail FROM events WHERE session_id IN ({sessions}) "
        "AND kind <> 'tool.call' ORDER BY id",
        "claims": f"SELECT * FROM thread_claims WHERE session_id IN ({sessions}) ORDER BY thread",
        "preferences": "SELECT * FROM core_preferences WHERE owner = :u ORDER BY project",
        # learning (issue 19): candidates, skills and lessons, snapshots, trash, curation, concepts, insights
        "candidates": "SELECT * FROM learning_candidates WHERE owner = :u ORDER BY id",
        "entries": "SELECT * FROM learning_entries WHERE owner = :u ORDER BY kind, name",
        "snapshots": "SELECT * FROM learning_snapshots WHERE owner = :u ORDER BY id",
        "trash": "SELECT * FROM learning_trash WHERE owner = :u ORDER BY id",
        "curation": "SELECT * FROM learning_curation WHERE owner = :u ORDER BY kind, name",
        "concepts": "SELECT * FROM concepts WHERE owner = :u ORDER BY id",
        "insights": "SELECT * FROM insights WHERE owner = :u ORDER BY id",
    }
    volatile = {"decay_score", "scored_at"}  # any user's maintenance pass rescores every memory
    shared_volatile = {"last_reactivated_at", "reactivation_count"}  # others recalling a shared memory revive it
    try:
        out: dict[str, Any] = {}
        for name, sql in queries.items():
            rows = store.read(lambda r, sql=sql: [dict(row) for row in r.rows(sql, {"u": user})])
            for row in rows:
                for key in volatile | (shared_volatile if row.get("visibility") == "project" else set()):
                    row.pop(key, None)
            out[name] = rows
        return out
    finally:
        store.close()
