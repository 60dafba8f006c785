"""What the server tells an agent about using threadloom (sent as MCP instructions)."""

INSTRUCTIONS = """\
threadloom is this machine's shared, persistent memory for coding agents. Several \
agents (Claude Code, Codex, Gemini CLI, Copilot, Cursor) may use the same store at once.

How to use it:
- Call `status` when you need to know which store, project and session you are in, or \
to check that threadloom is healthy.
- Every tool returns JSON. A failure comes back as {"error": "...", "retryable": true|false}: \
when retryable is true the same call may simply be repeated; when false, change the arguments \
as the message says.
- Times are epoch milliseconds or ISO-8601.
- Read-only views are also resources (threadloom://status); the `help` prompt explains the tools.
"""
