"""Tournaments: the same prompt to one child per role, each answering its parent by signal, and a digest
that says which roles answered, and why the others did not."""

from __future__ import annotations

from typing import Any, Final

from threadloom.errors import InvalidInput

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
