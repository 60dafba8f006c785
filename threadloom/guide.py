"""What threadloom tells an agent about using it: sent as MCP instructions, and written into
instruction files (AGENTS.md, a Cursor rule) for agents that do not read those."""

import re
from collections.abc import Collection
from typing import Final

INSTRUCTIONS = """\
threadloom is the shared, persistent memory of your coding agents, across sessions.
- At the start, read the brief (`brief`): core memory, your thread, inbox, live peers and a "now" \
table. `memory_recall` what you are about to work on.
- Learned something a later session needs (a decision and why, a fix, a gotcha)? `memory_store` \
it; when one is outdated, `memory_amend` it.
- Keep your thread: `thread_note` as you go, `thread_summary` decisions, `thread_status` done.
- `signal_send` tells, asks or answers other live agents; `signal_inbox` reads what they sent.
- A failure is {"error", "retryable"}: repeat the call only if retryable.
- Times: an ISO 8601 date or date-time, or epoch ms, copied from the now table, never computed. \
Times returned are ISO with their offset.
"""
_NAMED: Final = re.compile(r"`([a-z_]+)`")


def instructions_for(offered: Collection[str], known: Collection[str]) -> str:
    """INSTRUCTIONS without the lines that name a tool (`like_this`) the session is not offered."""
    missing = set(known) - set(offered)
    kept = [line for line in INSTRUCTIONS.splitlines() if not missing & set(_NAMED.findall(line))]
    return "\n".join(kept) + "\n"
