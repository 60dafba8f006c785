"""Tournaments: the same prompt to one child per role, each answering its parent by signal, and a digest
that says which roles answered, and why the others did not.

Each role is admitted in a transaction of its own, and the first keeps the tournament's id and what was asked
with the call's idempotency key. A call killed before it admitted every role is finished by its retry: the
server hands the retry what was kept (`requests.RESUMING`), and the retry admits, under the same id, the roles that have
no task yet; an admission finds its role's task inside its transaction (`RoleTaken`), so two calls racing on one
tournament start each role once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from threadloom.errors import InvalidInput
from threadloom.store.base import Reader


class RoleTaken(Exception):
    """The role already has a task in this tournament: it is not started twice."""


WHY_SILENT: Final = {
    "starting": "still starting",
    "running": "still running",
    "done": "finished without signalling an answer",
    "timeout": "stopped at its time limit",
    "lost": "lost (its supervisor was killed)",
}


def check_roles(roles: list[str]) -> None:
    if not 2 <= len(roles) <= 8 or len(set(roles)) != len(roles):
        raise InvalidInput("a tournament has 2-8 distinct roles")


def admit_once(r: Reader, tour: str | None, role: str | None) -> None:
    """Inside a role's admission: refuse (RoleTaken) a role that has a task in the tournament already."""
    if tour is not None and r.one("SELECT 1 FROM tasks WHERE tournament = :t AND role = :r", {"t": tour, "r": role}):
        raise RoleTaken(role)


def asked(prompt: str, roles: list[str], agent: str, model: str | None, timeout_s: float) -> str:
    """What a tournament call asked, as a digest kept with its key: a retry asking anything else resumes nothing."""
    text = json.dumps([prompt, roles, agent, model, timeout_s], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resumable(kept: dict[str, Any]) -> bool:
    """Whether a key's kept record is a tournament's first admission (its call never answered), not its answer."""
    return isinstance(kept.get("tournament"), str) and isinstance(kept.get("asked"), str)


def resumed(kept: dict[str, Any] | None, asking: str) -> str | None:
    """The tournament a retry finishes (None: a new one)."""
    if kept is None:
        return None
    if kept.get("asked") != asking:
        raise InvalidInput(
            "the first tournament call with this idempotency key asked for another prompt, roles, agent, model or "
            "time limit: nothing was started; call again with a new key"
        )
    return str(kept["tournament"])


def framed(role: str, prompt: str) -> str:
    return (
        f"You are the {role}. Answer the task below from that role, then send your answer to the "
        f"parent session with threadloom's signal_send (kind whisper, to $THREADLOOM_PARENT_SESSION).\n\n"
        f"{prompt}"
    )


def digest(tournament: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether every role has finished, each role's entry, the roles that sent no answer (`missing`) and
    a caveat saying why, so that no answers never reads as an empty success."""
    finished = all(e["status"] not in ("starting", "running") for e in entries)
    silent = [e for e in entries if not e["answers"]]
    caveats = []
    if silent:
        why = ", ".join(f"{e['role']} ({_why_silent(e)})" for e in silent)
        caveats.append(f"no answer from {why}; each entry's log_tail shows what it did")
    return {
        "tournament": tournament,
        "finished": finished,
        "entries": entries,
        "missing": [e["role"] for e in silent],
        "caveats": caveats,
    }


def _why_silent(entry: dict[str, Any]) -> str:
    return WHY_SILENT.get(entry["status"]) or f"failed with exit code {entry['exit_code']}"
