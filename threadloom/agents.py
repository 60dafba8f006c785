"""What agent CLIs put in the environment of the servers they start. Standard library only.

The bridge forwards exactly these variables to the daemon, which keeps its own
environment for itself: per-session settings never leak between sessions.
"""

from __future__ import annotations

from typing import Final, Literal

Vendor = Literal["claude", "codex", "gemini", "copilot", "cursor", "other"]
VENDORS: Final[tuple[Vendor, ...]] = ("claude", "codex", "gemini", "copilot", "cursor", "other")

# Settings that belong to one session (the agent's MCP config `env`), not to the daemon.
PER_SESSION_KEYS: Final[tuple[str, ...]] = (
    "THREADLOOM_ROOT",
    "THREADLOOM_SESSION_ID",
    "THREADLOOM_VENDOR",
    "THREADLOOM_TOOLSET",
    "THREADLOOM_PARENT_SESSION",  # set by threadloom for a spawned child agent: its parent's session id
)
# Who a session acts as. Forwarded per session like the keys above, so two agents on one daemon can be two
# users; unlike them they may also be set machine-wide (the `.env`), as the default for sessions naming none.
IDENTITY_KEYS: Final[tuple[str, ...]] = ("THREADLOOM_USER", "THREADLOOM_AUTHOR", "THREADLOOM_ORG")
VENDOR_ENV_MARKERS: Final[tuple[tuple[str, Vendor], ...]] = (
    ("CLAUDECODE", "claude"),
    ("CLAUDE_CODE_ENTRYPOINT", "claude"),
    ("CODEX_HOME", "codex"),
    ("CODEX_SANDBOX", "codex"),
    ("CODEX_MANAGED_BY_NPM", "codex"),
    ("GEMINI_CLI", "gemini"),
    ("CURSOR_TRACE_ID", "cursor"),
    ("CURSOR_AGENT", "cursor"),
    ("VSCODE_PID", "copilot"),
    ("VSCODE_IPC_HOOK_CLI", "copilot"),
)
FORWARDED_ENV: Final[tuple[str, ...]] = (
    *PER_SESSION_KEYS,
    *IDENTITY_KEYS,
    "TERM_PROGRAM",
    *(name for name, _ in VENDOR_ENV_MARKERS),
)
