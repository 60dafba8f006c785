"""The self-test: what a probe run checks, category by category, through two agent sessions' tool calls.

Each category is what an agent relies on, checked end to end through the tools an agent calls:
- `memory.recall`: a memory stored is found by a recall on its words;
- `memory.amend`: an amended memory names its correction, and a recall ranks the correction first;
- `signal.delivery`: a whisper from one session reaches the other's inbox;
- `thread.context`: a decision written to a thread's summary is in the context a session picks up.

The calls go through `ToolSession`, which the driver (`server/probe_driver.py`) implements with a real MCP
client against the real server over a scratch store, so this module knows nothing of MCP. A category fails
on an error result, on a wrong answer, or on any exception (a probe reports what broke, it never raises).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

CATEGORIES: Final = ("memory.recall", "memory.amend", "signal.delivery", "thread.context")
MAX_ERROR_CHARS: Final = 300


class ProbeFailure(Exception):
    """A check saw a wrong answer or an error result; the message says which call and what it saw."""


class ToolSession(Protocol):
    """One agent session: `call` returns a tool's structured result, or raises ProbeFailure on an error result."""

    session_id: str

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Outcome:
    category: str
    ok: bool
    ms: float
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"category": self.category, "ok": self.ok, "ms": round(self.ms, 1), "error": self.error}


@dataclass
class _State:
    nonce: str
    memory_id: str | None = None


Check = Callable[[ToolSession, ToolSession, _State], Awaitable[None]]


async def run_checks(a: ToolSession, b: ToolSession, nonce: str, outcomes: list[Outcome]) -> None:
    """Every category once, in order, each timed, appended to `outcomes` as it ends (so a run cut short by a
    timeout keeps what it found); `nonce` makes this run's words unique."""
    state = _State(nonce)
    checks: dict[str, Check] = {
        "memory.recall": _store_then_recall,
        "memory.amend": _amend_then_recall,
        "signal.delivery": _whisper_then_inbox,
        "thread.context": _summary_then_context,
    }
    for category in CATEGORIES:
        started = time.perf_counter()
        try:
            await checks[category](a, b, state)
        except Exception as exc:  # noqa: BLE001 - the probe's edge: whatever broke is this category's finding
            ms = (time.perf_counter() - started) * 1000
            outcomes.append(Outcome(category, False, ms, describe(exc)))
            continue
        outcomes.append(Outcome(category, True, (time.perf_counter() - started) * 1000))


def describe(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, ProbeFailure) else f"{type(exc).__name__}: {exc}"
    return text[:MAX_ERROR_CHARS]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ProbeFailure(message)


def _ids(recalled: dict[str, Any]) -> list[str]:
    return [str(m.get("id")) for m in recalled.get("memories", [])]


async def _store_then_recall(a: ToolSession, b: ToolSession, state: _State) -> None:
    text = f"The {state.nonce} release checklist lives in docs/RELEASE.md"
    stored = await a.call("memory_store", {"content": text, "kind": "fact"})
    state.memory_id = str(stored.get("id") or "")
    _expect(bool(state.memory_id), f"memory_store returned no id: {stored}")
    recalled = await a.call("memory_recall", {"query": f"{state.nonce} release checklist"})
    _expect(state.memory_id in _ids(recalled), f"memory_recall did not find the stored memory: {_ids(recalled)}")


async def _amend_then_recall(a: ToolSession, b: ToolSession, state: _State) -> None:
    _expect(state.memory_id is not None, "skipped: memory.recall stored nothing to amend")
    text = f"The {state.nonce} release checklist moved to docs/release/CHECKLIST.md"
    amended = await a.call("memory_amend", {"memory_id": state.memory_id, "content": text, "reason": "moved"})
    new_id = str(amended.get("new", {}).get("id") or "")
    superseded_by = amended.get("old", {}).get("superseded_by")
    _expect(bool(new_id) and superseded_by == new_id, f"memory_amend: the old memory is not superseded: {amended}")
    recalled = await a.call("memory_recall", {"query": f"{state.nonce} release checklist"})
    found = _ids(recalled)
    _expect(bool(found) and found[0] == new_id, f"memory_recall ranks {found[:3]} above the correction {new_id}")


async def _whisper_then_inbox(a: ToolSession, b: ToolSession, state: _State) -> None:
    await b.call("peers", {})  # b's session is live before it is whispered to
    text = f"probe {state.nonce}: the build is green"
    sent = await a.call("signal_send", {"to": b.session_id, "text": text})
    _expect(b.session_id in sent.get("delivered_to", []), f"signal_send did not deliver to {b.session_id}: {sent}")
    inbox = await b.call("signal_inbox", {})
    bodies = [s.get("body") for s in inbox.get("unread", [])]
    _expect(text in bodies, f"signal_inbox of the recipient lacks the whisper: {bodies}")


async def _summary_then_context(a: ToolSession, b: ToolSession, state: _State) -> None:
    await a.call("thread_project", {"action": "create", "title": f"Probe {state.nonce}"})
    decision = f"- {state.nonce}: orders are kept in Postgres"
    await a.call("thread_summary", {"text": decision, "section": "Decisions"})
    picked = await b.call("thread_context", {})
    _expect(decision in str(picked.get("context", "")), "thread_context lacks the decision written to the summary")
